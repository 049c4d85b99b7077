// The tile driver shared by the register-blocked GEMM kernels (AVX-512 VNNI,
// AVX2 and AVX-VNNI): how a tile of rows x panels is walked, written once.
// Include only from those files, inside their anonymous namespace, after
// <immintrin.h> and kernels/gemm_internal.h, and after defining the ISA's
// policy type `Isa`:
//   static constexpr int kRowBlock, kPanelBlock;   // register tile
//   static constexpr float CodeBias(PackKind);     // see ExpandScales
//   template <PackKind K, bool kIntOffset, int R, int P>
//   static void BlockChunk(const GemmArgs&, const int64_t* rows, int64_t p0,
//                          int64_t g0, int64_t g1, const ChunkScales<Isa>&,
//                          int shift, float* part);
// BlockChunk adds groups [g0, g1) of R rows x P panels to the float partial
// sums `part` (row r's panel p at part + (r * kPanelBlock + p) * 16).
//
// The walk:
// - K goes in chunks of ChunkK elements: about 12-24 KB of a panel block's
//   codes, which stay in L1 while every row block of the tile streams over
//   them, so each weight byte comes from L2 or memory once per tile, not once
//   per row block. The float partial sums wait in `part` between chunks (a
//   store and a reload, exact);
// - the next chunk's codes and scales (or the next panel block's first
//   chunk) are prefetched a slice per row block while this one computes:
//   with few rows (cached steps) the weight stream is the bound, and the
//   scale arrays, apart from the codes, would each stall on memory;
// - a chunk's group scales are formed once per panel block (ChunkScales)
//   and read by every row block;
// - where the format's offset is c = -2^shift d (QuantizedMatrix::
//   offset_shift), BlockChunk folds it into the integer dot; otherwise it
//   adds c s_x sum(q) per group after the chunk's dots.
// Each output element sees the same operations in the same order whatever
// the tile, the edge blocks and the thread count (gemm_test holds it).

constexpr int64_t kMaxChunkK = 1024;
constexpr int64_t kPartRows = 128;  // rows of float partial sums kept per call

// Elements of K per L1-resident chunk (fewer, longer chunks for 4- and 6-bit
// codes cut the per-chunk overhead).
constexpr int64_t ChunkK(PackKind kind) { return PackCodeBits(kind) == 8 ? 512 : 1024; }

// A chunk's group scales for the panel block: d and c (16 floats each) of
// panel p of the block and group j of the chunk.
template <typename Policy>
struct ChunkScales {
  alignas(64) float d[Policy::kPanelBlock][kMaxChunkK / 16][kPanelRows];
  alignas(64) float c[Policy::kPanelBlock][kMaxChunkK / 16][kPanelRows];
};

// kU4K: d = d_super * sc and c = 0 - dmin * m per group (as the file's
// dequantization). Kernels whose integer dot sees codes minus a bias
// (AVX2's recentred 8-bit codes, Policy::CodeBias) get c + bias d, so the
// float term restores what the bias took.
template <typename Policy, PackKind kKind>
void ExpandScales(const QuantizedMatrix& w, int64_t p0, int np, int64_t g0, int64_t g1,
                  ChunkScales<Policy>* s) {
  constexpr float bias = Policy::CodeBias(kKind);
  const int64_t n = (g1 - g0) * kPanelRows;  // floats of a panel's chunk
  for (int p = 0; p < np; ++p) {
    float* d = &s->d[p][0][0];
    float* c = &s->c[p][0][0];
    if constexpr (kKind == PackKind::kU4K) {
      const uint8_t* sc = w.k_scales(p0 + p) + g0 * kPanelRows;
      const uint8_t* mn = w.k_mins(p0 + p) + g0 * kPanelRows;
      for (int64_t g = 0; g < g1 - g0; ++g) {
        const float* sd = w.super_scales(p0 + p) + (g0 + g) / 8 * kPanelRows;
        const float* sm = w.super_mins(p0 + p) + (g0 + g) / 8 * kPanelRows;
        for (int i = 0; i < kPanelRows; ++i) {
          d[g * kPanelRows + i] = sd[i] * static_cast<float>(sc[g * kPanelRows + i]);
          c[g * kPanelRows + i] = 0.0f - sm[i] * static_cast<float>(mn[g * kPanelRows + i]);
        }
      }
    } else {
      // A panel's group scales (and offsets) are contiguous in K order.
      std::memcpy(d, w.scales(p0 + p) + g0 * kPanelRows, sizeof(float) * n);
      const float* off = w.offsets(p0 + p);
      if (off == nullptr) continue;
      off += g0 * kPanelRows;
      if constexpr (bias == 0.0f) {
        std::memcpy(c, off, sizeof(float) * n);
      } else {
        for (int64_t i = 0; i < n; ++i) c[i] = std::fma(d[i], bias, off[i]);
      }
    }
  }
}

// The memory the next chunk reads, prefetched a slice at a time.
template <typename Policy>
class NextChunk {
 public:
  void Add(const void* p, int64_t bytes) {
    if (bytes > 0) ranges_[n_++] = {static_cast<const char*>(p), bytes};
    total_lines_ += (bytes + 63) / 64;
  }
  int64_t total_lines() const { return total_lines_; }
  // Prefetches the next `lines` cache lines.
  void Step(int64_t lines) {
    for (; lines > 0 && at_ < n_; --lines) {
      _mm_prefetch(ranges_[at_].p + off_, _MM_HINT_T0);
      off_ += 64;
      if (off_ >= ranges_[at_].bytes) ++at_, off_ = 0;
    }
  }

 private:
  struct Range {
    const char* p;
    int64_t bytes;
  };
  Range ranges_[5 * Policy::kPanelBlock] = {};
  int n_ = 0, at_ = 0;
  int64_t off_ = 0, total_lines_ = 0;
};

// Groups [g0, g1) of panels [p0, p0 + np): codes and scales.
template <typename Policy, PackKind kKind>
void AddChunk(const QuantizedMatrix& w, int64_t p0, int np, int64_t g0, int64_t g1,
              NextChunk<Policy>* nc) {
  const int64_t groups = g1 - g0;
  for (int64_t p = p0; p < p0 + np; ++p) {
    nc->Add(w.codes(p, g0), groups * static_cast<int64_t>(w.group_code_bytes()));
    if constexpr (kKind == PackKind::kU4K) {
      nc->Add(w.k_scales(p) + g0 * kPanelRows, groups * kPanelRows);
      nc->Add(w.k_mins(p) + g0 * kPanelRows, groups * kPanelRows);
      const int64_t s0 = g0 / 8, s1 = (g1 + 7) / 8;
      nc->Add(w.super_scales(p) + s0 * kPanelRows, (s1 - s0) * kPanelRows * 4);
      nc->Add(w.super_mins(p) + s0 * kPanelRows, (s1 - s0) * kPanelRows * 4);
    } else {
      nc->Add(w.scales(p) + g0 * kPanelRows, groups * kPanelRows * 4);
      if (w.offsets(p) != nullptr) nc->Add(w.offsets(p) + g0 * kPanelRows, groups * kPanelRows * 4);
    }
  }
}

// Rows [row_begin, row_end) of one chunk: whole row blocks, then one block
// of the rows left.
template <typename Policy, PackKind kKind, bool kIntOffset, int P>
void RowsChunk(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t p0, int64_t g0,
               int64_t g1, const ChunkScales<Policy>& cs, int shift, NextChunk<Policy>* next,
               float* part) {
  constexpr int kRows = Policy::kRowBlock;
  constexpr int64_t kPartStride = Policy::kPanelBlock * kPanelRows;
  int64_t rows[kRows];
  int64_t i = row_begin;
  const int64_t blocks = (row_end - row_begin) / kRows;
  const int64_t lines_per_block = blocks > 0 ? (next->total_lines() + blocks - 1) / blocks : 0;
  for (; i + kRows <= row_end; i += kRows) {
    for (int r = 0; r < kRows; ++r) rows[r] = i + r;
    next->Step(lines_per_block);
    Policy::template BlockChunk<kKind, kIntOffset, kRows, P>(a, rows, p0, g0, g1, cs, shift,
                                                             part + (i - row_begin) * kPartStride);
  }
  next->Step(next->total_lines());  // whatever is left (fewer rows than a block)
  const int left = static_cast<int>(row_end - i);
  for (int r = 0; r < left; ++r) rows[r] = i + r;
  float* at = part + (i - row_begin) * kPartStride;
  [&]<int... kR>(std::integer_sequence<int, kR...>) {
    ((left == kR + 1 ? Policy::template BlockChunk<kKind, kIntOffset, kR + 1, P>(a, rows, p0, g0,
                                                                                 g1, cs, shift, at)
                     : void()),
     ...);
  }
  (std::make_integer_sequence<int, kRows - 1>{});
}

template <typename Policy, PackKind kKind, bool kIntOffset>
void TileImpl(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
              int64_t panel_end) {
  constexpr int S = PackGroupSize(kKind);
  constexpr int kPanels = Policy::kPanelBlock;
  constexpr int64_t kPartStride = kPanels * kPanelRows;
  const QuantizedMatrix& w = *a.w;
  const int64_t groups = w.num_groups();
  const int64_t chunk_groups = ChunkK(kKind) / S;
  const int shift = w.offset_shift;
  alignas(64) float part[kPartRows * kPartStride];
  alignas(64) ChunkScales<Policy> cs;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPartRows) {
    const int64_t r1 = std::min(row_end, r0 + kPartRows);
    for (int64_t p0 = panel_begin; p0 < panel_end; p0 += kPanels) {
      const int np = static_cast<int>(std::min<int64_t>(kPanels, panel_end - p0));
      std::memset(part, 0, sizeof(float) * (r1 - r0) * kPartStride);
      for (int64_t g0 = 0; g0 < groups; g0 += chunk_groups) {
        const int64_t g1 = std::min(groups, g0 + chunk_groups);
        ExpandScales<Policy, kKind>(w, p0, np, g0, g1, &cs);
        NextChunk<Policy> next;  // the following chunk, or the next panel block's first
        if (g1 < groups) {
          AddChunk<Policy, kKind>(w, p0, np, g1, std::min(groups, g1 + chunk_groups), &next);
        } else if (p0 + kPanels < panel_end) {
          const int next_np =
              static_cast<int>(std::min<int64_t>(kPanels, panel_end - p0 - kPanels));
          AddChunk<Policy, kKind>(w, p0 + kPanels, next_np, 0, std::min(groups, chunk_groups),
                                  &next);
        }
        [&]<int... kP>(std::integer_sequence<int, kP...>) {
          ((np == kP + 1 ? RowsChunk<Policy, kKind, kIntOffset, kP + 1>(a, r0, r1, p0, g0, g1, cs,
                                                                        shift, &next, part)
                         : void()),
           ...);
        }
        (std::make_integer_sequence<int, kPanels>{});
      }
      for (int p = 0; p < np; ++p) {
        const int64_t col0 = (p0 + p) * kPanelRows;
        const int n_valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - col0));
        for (int64_t r = r0; r < r1; ++r) {
          std::memcpy(a.y + r * a.y_stride + col0, part + (r - r0) * kPartStride + p * kPanelRows,
                      sizeof(float) * n_valid);
        }
      }
    }
  }
}

// The tile function for `kKind`: with the offset folded into the integer
// dot where the format allows it (always for kU6G16, never for kU4K).
template <typename Policy, PackKind kKind>
void Tile(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
          int64_t panel_end) {
  if constexpr (kKind == PackKind::kU6G16) {  // stores no offsets: always c = -2^shift d
    TileImpl<Policy, kKind, true>(a, row_begin, row_end, panel_begin, panel_end);
  } else if constexpr (kKind == PackKind::kU4K) {  // free mins
    TileImpl<Policy, kKind, false>(a, row_begin, row_end, panel_begin, panel_end);
  } else if (a.w->offset_shift >= 0) {
    TileImpl<Policy, kKind, true>(a, row_begin, row_end, panel_begin, panel_end);
  } else {
    TileImpl<Policy, kKind, false>(a, row_begin, row_end, panel_begin, panel_end);
  }
}

template <typename Policy>
void FillTiles(GemmKernels* k) {
  k->tile[static_cast<int>(PackKind::kU4K)] = Tile<Policy, PackKind::kU4K>;
  k->tile[static_cast<int>(PackKind::kU4G32)] = Tile<Policy, PackKind::kU4G32>;
  k->tile[static_cast<int>(PackKind::kU8G32)] = Tile<Policy, PackKind::kU8G32>;
  k->tile[static_cast<int>(PackKind::kU6G16)] = Tile<Policy, PackKind::kU6G16>;
  k->row_block = Policy::kRowBlock;
  k->panel_block = Policy::kPanelBlock;
}
