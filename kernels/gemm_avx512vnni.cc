// AVX-512 VNNI GEMM tiles (compiled with -mavx512f/bw/vl/vnni only).
//
// A zmm holds one quad-row of a packed panel: 16 weight rows x 4 consecutive
// k codes, exactly `vpdpbusd`'s operand shape, so one instruction does
// 16 x 4 u8 x s8 products per X row into 16 int32 lanes. Codes are the
// unsigned operand and activations the signed one (quantized_matrix.h).
//
// Schedule, chosen by measurement on Zen 5 (docs in the issue #23 note;
// `vpdpbusd zmm` has latency 4 and throughput 2 per cycle, and shares its
// two pipes with every float multiply and FMA):
// - a register tile of kRowBlock X rows by kPanelBlock panels: 12
//   independent int32 chains, each weight vector used by 4 rows and each
//   activation broadcast (folded into the instruction's memory operand) by
//   3 panels;
// - K is walked in chunks of kChunkK elements; a chunk of the panel block's
//   weights (<= 12 KB) stays in L1 while every row block of the tile streams
//   over it, so each weight byte comes from L2 or memory once per tile, not
//   once per row block. Float partial sums wait in a per-call buffer between
//   chunks (a store and a reload, exact). The next chunk's codes and scales
//   are prefetched meanwhile;
// - the float epilogue runs once per 32-element activation block:
//       t  = cvt(dot_g0) * d_g0 [+ cvt(dot_g1) * d_g1 for 16-element groups]
//       y += t * s_x
//   and, where the format's offset is c = -2^shift d (Q4_0, Q8_0, Q5_0,
//   Q6_K, float weights: QuantizedMatrix::offset_shift), the offset is an
//   integer correction folded into the accumulator's start value,
//   dot - 2^shift sum(q), exact; only formats with free mins (Q4_1, Q4_K,
//   Q5_1, Q5_K) add c * s_x sum(q) in float.
// Each output element sees the same operations in the same order whatever
// the tile, the block shapes at the edges and the thread count, so a row's
// result does not depend on M or on its neighbours (gemm_test holds it).
// GCC 12 flags `_mm512_undefined_ps()` inside `_mm512_cvtepi32_ps` as
// maybe-uninitialized once inlined; it is a false positive.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {
namespace {

constexpr int kRowBlock = 4;
constexpr int kPanelBlock = 3;
// Elements of K per L1-resident weight chunk: about 6-12 KB of the panel
// block's codes (fewer, longer chunks cut the per-chunk overhead).
constexpr int64_t ChunkK(PackKind kind) { return PackCodeBits(kind) == 8 ? 256 : 512; }
constexpr int64_t kMaxChunkK = 512;
constexpr int64_t kPartRows = 128;     // rows of float partial sums kept per call

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

#include "kernels/gemm_avx512_helpers-inl.h"

// Per-chunk expanded group scales of the panel block: d and c (16 floats
// each) for group j of the chunk and panel p of the block.
struct ChunkScales {
  alignas(64) float d[kMaxChunkK / 16][kPanelBlock][kPanelRows];
  alignas(64) float c[kMaxChunkK / 16][kPanelBlock][kPanelRows];
};

template <PackKind kKind>
void ExpandScales(const QuantizedMatrix& w, int64_t p0, int np, int64_t g0, int64_t g1,
                  ChunkScales* s) {
  for (int p = 0; p < np; ++p) {
    if constexpr (kKind == PackKind::kU4K) {
      const KPanel kp(w, p0 + p);
      for (int64_t g = g0; g < g1; ++g) {
        __m512 d, c;
        KScales(kp, g, &d, &c);
        _mm512_store_ps(s->d[g - g0][p], d);
        _mm512_store_ps(s->c[g - g0][p], c);
      }
    } else {
      const float* d = w.scales(p0 + p);
      const float* c = w.offsets(p0 + p);
      for (int64_t g = g0; g < g1; ++g) {
        _mm512_store_ps(s->d[g - g0][p], _mm512_load_ps(d + g * kPanelRows));
        if (c != nullptr) _mm512_store_ps(s->c[g - g0][p], _mm512_load_ps(c + g * kPanelRows));
      }
    }
  }
}

// The integer dot of one scale group for R rows x P panels, started at
// `init[r]` (the folded offset correction, or zero).
template <PackKind kKind, int R, int P>
inline void GroupDots(const uint8_t* const* codes, const int8_t* const* x, const __m512i* init,
                      __m512i (&dot)[R][P]) {
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) dot[r][p] = init[r];
  if constexpr (PackIsFourBit(kKind)) {
    const __m512i nib = _mm512_set1_epi8(0x0f);
    for (int q = 0; q < 4; ++q) {
      for (int half = 0; half < 2; ++half) {  // elements 4q.. (low nibbles), 16 + 4q.. (high)
        __m512i wv[P];  // loaded twice (from L1) rather than held: registers are short
        for (int p = 0; p < P; ++p) {
          const __m512i v = _mm512_load_si512(codes[p] + 64 * q);
          wv[p] = _mm512_and_si512(half == 0 ? v : _mm512_srli_epi16(v, 4), nib);
        }
        for (int r = 0; r < R; ++r) {
          const __m512i b = Bcast4(x[r] + 4 * q + 16 * half);
          for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], b);
        }
      }
    }
  } else if constexpr (kKind == PackKind::kU6G16) {
    for (int q = 0; q < 4; ++q) {
      __m512i wv[P];
      for (int p = 0; p < P; ++p) wv[p] = Unpack6(codes[p], q);
      for (int r = 0; r < R; ++r) {
        const __m512i b = Bcast4(x[r] + 4 * q);
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], b);
      }
    }
  } else {
    for (int q = 0; q < 8; ++q) {
      __m512i wv[P];
      for (int p = 0; p < P; ++p) wv[p] = _mm512_load_si512(codes[p] + 64 * q);
      for (int r = 0; r < R; ++r) {
        const __m512i b = Bcast4(x[r] + 4 * q);
        for (int p = 0; p < P; ++p) dot[r][p] = _mm512_dpbusd_epi32(dot[r][p], wv[p], b);
      }
    }
  }
}

// Adds groups [g0, g1) (one chunk) of rows rows[0..R) x panels p0..p0+P to
// the partial sums `part` (row r at part + r * kPanelBlock * 16).
template <PackKind kKind, bool kIntOffset, int R, int P>
void BlockChunk(const GemmArgs& a, const int64_t* rows, int64_t p0, int64_t g0, int64_t g1,
                const ChunkScales& cs, int shift, float* part) {
  constexpr int S = PackGroupSize(kKind);
  const QuantizedMatrix& w = *a.w;
  const int8_t* xq[R];
  const float* sx[R];
  const int32_t* sum16[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.x->row_q(rows[r]);
    sx[r] = a.x->row_scale(rows[r]);
    sum16[r] = a.x->row_sum16(rows[r]);
  }
  __m512 acc[R][P];
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) acc[r][p] = _mm512_load_ps(part + r * kPanelBlock * 16 + p * 16);
  const uint8_t* panel_base[P];
  for (int p = 0; p < P; ++p) panel_base[p] = w.panel(p0 + p);
  const size_t gbytes = w.group_code_bytes();
  for (int64_t g = g0; g < g1; ++g) {
    const int64_t k0 = g * S;
    const uint8_t* codes[P];
    for (int p = 0; p < P; ++p) codes[p] = panel_base[p] + g * gbytes;
    const int8_t* x[R];
    __m512i init[R];
    for (int r = 0; r < R; ++r) {
      x[r] = xq[r] + k0;
      if constexpr (kIntOffset) {
        const int32_t sum = ActGroupSum(sum16[r], k0, S);
        init[r] = _mm512_set1_epi32(-(sum * (1 << shift)));
      } else {
        init[r] = _mm512_setzero_si512();
      }
    }
    __m512i dot[R][P];
    GroupDots<kKind, R, P>(codes, x, init, dot);
    for (int r = 0; r < R; ++r) {
      const __m512 sv = _mm512_set1_ps(sx[r][k0 / kActBlock]);
      for (int p = 0; p < P; ++p) {
        const __m512 t = _mm512_mul_ps(_mm512_cvtepi32_ps(dot[r][p]), _mm512_load_ps(cs.d[g - g0][p]));
        acc[r][p] = _mm512_fmadd_ps(t, sv, acc[r][p]);
      }
    }
  }
  if constexpr (!kIntOffset) {
    // The free mins, c * s_x sum(q), for the chunk's groups after its dots:
    // the same float operations in the same order for every tile shape.
    for (int64_t g = g0; g < g1; ++g) {
      const int64_t k0 = g * S;
      for (int r = 0; r < R; ++r) {
        const __m512 xs = _mm512_set1_ps(sx[r][k0 / kActBlock] *
                                         static_cast<float>(ActGroupSum(sum16[r], k0, S)));
        for (int p = 0; p < P; ++p) {
          acc[r][p] = _mm512_fmadd_ps(_mm512_load_ps(cs.c[g - g0][p]), xs, acc[r][p]);
        }
      }
    }
  }
  for (int r = 0; r < R; ++r)
    for (int p = 0; p < P; ++p) _mm512_store_ps(part + r * kPanelBlock * 16 + p * 16, acc[r][p]);
}

// The memory the next chunk reads (its codes and scales, per panel),
// prefetched a slice per row block while this chunk computes, so it arrives
// from memory in time: with few rows (cached steps) the weight stream is
// the bound, and the scales, apart from the codes, would each stall.
class NextChunk {
 public:
  void Add(const void* p, int64_t bytes) {
    if (bytes > 0) ranges_[n_++] = {static_cast<const char*>(p), bytes};
    total_lines_ += (bytes + 63) / 64;
  }
  int64_t total_lines() const { return total_lines_; }
  // Prefetches the next `lines` lines.
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
  Range ranges_[5 * kPanelBlock] = {};
  int n_ = 0, at_ = 0;
  int64_t off_ = 0, total_lines_ = 0;
};

// Groups [g0, g1) of panels [p0, p0 + np): codes and scales.
template <PackKind kKind>
void AddChunk(const QuantizedMatrix& w, int64_t p0, int np, int64_t g0, int64_t g1, NextChunk* nc) {
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

template <PackKind kKind, bool kIntOffset, int P>
void RowsChunk(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t p0, int64_t g0,
               int64_t g1, const ChunkScales& cs, int shift, NextChunk* next, float* part) {
  int64_t rows[kRowBlock];
  int64_t i = row_begin;
  const int64_t blocks = (row_end - row_begin) / kRowBlock;
  const int64_t lines_per_block = blocks > 0 ? (next->total_lines() + blocks - 1) / blocks : 0;
  for (; i + kRowBlock <= row_end; i += kRowBlock) {
    for (int r = 0; r < kRowBlock; ++r) rows[r] = i + r;
    next->Step(lines_per_block);
    BlockChunk<kKind, kIntOffset, kRowBlock, P>(a, rows, p0, g0, g1, cs, shift,
                                                part + (i - row_begin) * kPanelBlock * 16);
  }
  next->Step(next->total_lines());  // whatever is left (fewer rows than a block)
  const int left = static_cast<int>(row_end - i);
  for (int r = 0; r < left; ++r) rows[r] = i + r;
  float* at = part + (i - row_begin) * kPanelBlock * 16;
  switch (left) {
    case 1:
      return BlockChunk<kKind, kIntOffset, 1, P>(a, rows, p0, g0, g1, cs, shift, at);
    case 2:
      return BlockChunk<kKind, kIntOffset, 2, P>(a, rows, p0, g0, g1, cs, shift, at);
    case 3:
      return BlockChunk<kKind, kIntOffset, 3, P>(a, rows, p0, g0, g1, cs, shift, at);
    default:
      return;
  }
}

template <PackKind kKind, bool kIntOffset>
void TileVnniImpl(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
                  int64_t panel_end) {
  constexpr int S = PackGroupSize(kKind);
  const QuantizedMatrix& w = *a.w;
  const int64_t groups = w.num_groups();
  const int64_t chunk_groups = ChunkK(kKind) / S;
  const int shift = w.offset_shift;
  alignas(64) float part[kPartRows * kPanelBlock * 16];
  alignas(64) ChunkScales cs;
  for (int64_t r0 = row_begin; r0 < row_end; r0 += kPartRows) {
    const int64_t r1 = std::min(row_end, r0 + kPartRows);
    for (int64_t p0 = panel_begin; p0 < panel_end; p0 += kPanelBlock) {
      const int np = static_cast<int>(std::min<int64_t>(kPanelBlock, panel_end - p0));
      std::memset(part, 0, sizeof(float) * (r1 - r0) * kPanelBlock * 16);
      for (int64_t g0 = 0; g0 < groups; g0 += chunk_groups) {
        const int64_t g1 = std::min(groups, g0 + chunk_groups);
        ExpandScales<kKind>(w, p0, np, g0, g1, &cs);
        NextChunk next;  // the following chunk, or the next panel block's first
        if (g1 < groups) {
          AddChunk<kKind>(w, p0, np, g1, std::min(groups, g1 + chunk_groups), &next);
        } else if (p0 + kPanelBlock < panel_end) {
          const int next_np = static_cast<int>(std::min<int64_t>(kPanelBlock, panel_end - p0 - kPanelBlock));
          AddChunk<kKind>(w, p0 + kPanelBlock, next_np, 0, std::min(groups, chunk_groups), &next);
        }
        switch (np) {
          case 3:
            RowsChunk<kKind, kIntOffset, 3>(a, r0, r1, p0, g0, g1, cs, shift, &next, part);
            break;
          case 2:
            RowsChunk<kKind, kIntOffset, 2>(a, r0, r1, p0, g0, g1, cs, shift, &next, part);
            break;
          default:
            RowsChunk<kKind, kIntOffset, 1>(a, r0, r1, p0, g0, g1, cs, shift, &next, part);
            break;
        }
      }
      for (int p = 0; p < np; ++p) {
        const int64_t col0 = (p0 + p) * kPanelRows;
        const int n_valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - col0));
        const __mmask16 mask = static_cast<__mmask16>((1u << n_valid) - 1);
        for (int64_t r = r0; r < r1; ++r) {
          _mm512_mask_storeu_ps(a.y + r * a.y_stride + col0, mask,
                                _mm512_load_ps(part + (r - r0) * kPanelBlock * 16 + p * 16));
        }
      }
    }
  }
}

template <PackKind kKind>
void TileVnni(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
              int64_t panel_end) {
  if (a.w->offset_shift >= 0) {  // always for kU6G16, never for kU4K
    if constexpr (kKind != PackKind::kU4K) {
      return TileVnniImpl<kKind, true>(a, row_begin, row_end, panel_begin, panel_end);
    }
  }
  if constexpr (kKind != PackKind::kU6G16) {
    TileVnniImpl<kKind, false>(a, row_begin, row_end, panel_begin, panel_end);
  }
}

}  // namespace

void FillAvx512VnniKernels(GemmKernels* k) {
  k->tile[static_cast<int>(PackKind::kU4K)] = TileVnni<PackKind::kU4K>;
  k->tile[static_cast<int>(PackKind::kU4G32)] = TileVnni<PackKind::kU4G32>;
  k->tile[static_cast<int>(PackKind::kU8G32)] = TileVnni<PackKind::kU8G32>;
  k->tile[static_cast<int>(PackKind::kU6G16)] = TileVnni<PackKind::kU6G16>;
  k->row_block = kRowBlock;
  k->panel_block = kPanelBlock;
}

}  // namespace dllm::gemm_internal
