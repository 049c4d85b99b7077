// AMX-INT8 GEMM tiles (compiled with -mamx-tile -mamx-int8 plus AVX-512 for
// the float epilogue). Needs the Linux tile-data permission, which
// cpu_features.cc requests; IsaLevel::kAmx is only reported once granted.
//
// Scheme: every weight scale group (S = 32 or 16 k) has its own scales, so
// the int32 product of each group is scaled in float:
//   y[r] += cvt(C_g[r]) * (d_g * s_r,g) + c_g * (s_r,g * sum_g(q_r)).
// `tdpbsud` computes C_g for 16 X rows (A tile: 16 rows x S activation codes,
// s8) by 16 weight rows (B tile: S/4 quad-rows x 16 rows x 4 codes, u8, the
// packed panel layout). The float work is the bound (4 vector ops a row a
// group against a quarter of a tile product), so everything else is taken
// out of the group loop:
// - a panel's codes are unpacked to bytes (4- and 6-bit kinds) and its
//   per-group d and c vectors formed once, into a per-thread staging area,
//   and reused by every 16-row block of the tile;
// - each 16-row block's activation codes are repacked group-major once, and
//   its s and s * sum(q) per group laid out as tables the epilogue
//   broadcasts from;
// - the 16 rows' accumulators stay in zmm registers across all groups, and
//   two C tiles alternate so the next group's tile product overlaps this
//   group's epilogue.
//
// GCC 12 trap (docs forward-pass.md section 6): `_tile_loadconfig` declares
// only 8 of the config's 64 bytes as read, so a config filled just before the
// call can lose its stores and the first tile instruction raises SIGILL. The
// configs here are constant objects in static storage (nothing to drop), and
// a memory clobber precedes the load. tests/CMakeLists.txt builds this file
// a second time at -O2 (gemm_amx_o2_test) next to the library's -O3.
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"  // GCC 12 _mm512_undefined_* false positive
#pragma GCC diagnostic ignored "-Wuninitialized"
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstdlib>
#include <cstring>

#include "kernels/amx_tile_config.h"
#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {
namespace {

// Two sets, alternating by group: C tiles 0, 1 (16 x 16 int32); A tiles
// 4, 5 (16 rows x S codes); B tiles 6, 7 (S/4 quad-rows x 64 bytes).
constexpr AmxTileConfig MakeConfig(int S) {
  AmxTileConfig c{};
  c.palette_id = 1;
  for (int t = 0; t < 2; ++t) {
    c.colsb[t] = 64;
    c.rows[t] = 16;
    c.colsb[4 + t] = static_cast<uint16_t>(S);
    c.rows[4 + t] = 16;
    c.colsb[6 + t] = 64;
    c.rows[6 + t] = static_cast<uint8_t>(S / 4);
  }
  return c;
}
alignas(64) static const AmxTileConfig kConfigG32 = MakeConfig(32);
alignas(64) static const AmxTileConfig kConfigG16 = MakeConfig(16);

#include "kernels/gemm_avx512_helpers-inl.h"

// Per-thread staging memory, grown on demand and kept (a tile's panel of
// K = 18944 needs about 0.8 MB: it stays in L2).
class Staging {
 public:
  uint8_t* Get(size_t bytes) {
    if (bytes > size_) {
      std::free(data_);
      size_ = (bytes + 4095) / 4096 * 4096;
      data_ = static_cast<uint8_t*>(std::aligned_alloc(64, size_));
    }
    return data_;
  }
  ~Staging() { std::free(data_); }

 private:
  uint8_t* data_ = nullptr;
  size_t size_ = 0;
};

// A panel's groups, ready for the tile loop: byte codes (S/4 x 64 bytes a
// group) and the d and c vectors (16 floats a group each).
struct StagedPanel {
  const uint8_t* codes;
  size_t code_stride;
  const float* d;
  const float* c;
};

template <PackKind kKind>
StagedPanel StagePanel(const QuantizedMatrix& w, int64_t p, uint8_t* codes_out, float* d_out,
                       float* c_out) {
  constexpr int S = PackGroupSize(kKind);
  const int64_t groups = w.num_groups();
  StagedPanel sp;
  sp.code_stride = static_cast<size_t>(S) * kPanelRows;
  if constexpr (kKind == PackKind::kU8G32) {
    sp.codes = w.codes(p, 0);  // already bytes, groups back to back
  } else {
    const __m512i nib = _mm512_set1_epi8(0x0f);
    for (int64_t g = 0; g < groups; ++g) {
      const uint8_t* in = w.codes(p, g);
      uint8_t* out = codes_out + g * sp.code_stride;
      if constexpr (PackIsFourBit(kKind)) {
        for (int q = 0; q < 4; ++q) {
          const __m512i v = _mm512_load_si512(in + 64 * q);
          _mm512_store_si512(out + 64 * q, _mm512_and_si512(v, nib));
          _mm512_store_si512(out + 64 * (q + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
        }
      } else {
        for (int q = 0; q < 4; ++q) _mm512_store_si512(out + 64 * q, Unpack6(in, q));
      }
    }
    sp.codes = codes_out;
  }
  if constexpr (kKind == PackKind::kU4K) {
    const KPanel kp(w, p);
    for (int64_t g = 0; g < groups; ++g) {
      __m512 dv, cv;
      KScales(kp, g, &dv, &cv);
      _mm512_store_ps(d_out + g * kPanelRows, dv);
      _mm512_store_ps(c_out + g * kPanelRows, cv);
    }
    sp.d = d_out;
    sp.c = c_out;
  } else if constexpr (kKind == PackKind::kU6G16) {
    const float* d = w.scales(p);
    // kU6G16 stores no offsets: c = -2^shift d.
    const __m512 neg_pow = _mm512_set1_ps(-std::ldexp(1.0f, w.offset_shift));
    for (int64_t g = 0; g < groups; ++g) {
      _mm512_store_ps(c_out + g * kPanelRows,
                      _mm512_mul_ps(_mm512_load_ps(d + g * kPanelRows), neg_pow));
    }
    sp.d = d;
    sp.c = c_out;
  } else {
    sp.d = w.scales(p);
    sp.c = w.offsets(p);
  }
  return sp;
}

// A block of up to 16 X rows, ready for the tile loop: the codes repacked
// group by group (16 rows x S bytes, so a tile load reads 512 contiguous
// bytes: rows of X are K bytes apart, and at K = 4096 the 16 rows of a tile
// would all fall in one L1 set), and per group and row the activation scale
// s and s * sum(q) (tables [group][16]). Missing rows are zeros.
struct StagedRows {
  const int8_t* q;  // [group][16][S]
  const float* s;
  const float* xs;
};

template <int S>
StagedRows StageRows(const GemmArgs& a, const int64_t* rows, int nb, int8_t* codes_out,
                     float* s_out, float* xs_out) {
  const QuantizedRows& x = *a.x;
  const int64_t groups = x.cols / S;
  for (int r = 0; r < 16; ++r) {
    if (r < nb) {
      const int8_t* src = x.row_q(rows[r]);
      for (int64_t g = 0; g < groups; ++g) {
        std::memcpy(codes_out + (g * 16 + r) * S, src + g * S, S);
      }
    } else {
      for (int64_t g = 0; g < groups; ++g) std::memset(codes_out + (g * 16 + r) * S, 0, S);
    }
  }
  for (int r = 0; r < 16; ++r) {
    if (r >= nb) {
      for (int64_t g = 0; g < groups; ++g) s_out[g * 16 + r] = xs_out[g * 16 + r] = 0;
      continue;
    }
    const float* scale = x.row_scale(rows[r]);
    const int32_t* sum16 = x.row_sum16(rows[r]);
    for (int64_t g = 0; g < groups; ++g) {
      const float s = scale[g * S / kActBlock];
      s_out[g * 16 + r] = s;
      xs_out[g * 16 + r] = s * static_cast<float>(ActGroupSum(sum16, g * S, S));
    }
  }
  return {codes_out, s_out, xs_out};
}

// C tile `c` = A tile `at` (16 rows of `a`, row stride `stride`) x B tile
// `bt` (`b`, one group's byte codes). A macro: GCC's tile intrinsics take
// their tile numbers as literal tokens.
#define DLLM_AMX_PRODUCT(c, at, bt, a, stride, b) \
  do {                                            \
    _tile_zero(c);                                \
    _tile_loadd(at, a, stride);                   \
    _tile_loadd(bt, b, 64);                       \
    _tile_dpbsud(c, at, bt);                      \
  } while (0)

// acc[r] += cvt(c[r]) * (d * s_r) + cv * xs_r for the 16 rows. Unrolled and
// inlined, so that acc stays in 16 zmm registers (as a loop GCC keeps it on
// the stack, and every row pays a store-to-load round trip).
__attribute__((always_inline)) inline void Epilogue(const int32_t (*c)[16], __m512 dv, __m512 cv,
                                                    const float* s, const float* xs, __m512* acc) {
#pragma GCC unroll 16
  for (int r = 0; r < 16; ++r) {
    const __m512 dot = _mm512_cvtepi32_ps(_mm512_load_si512(c[r]));
    acc[r] = _mm512_fmadd_ps(dot, _mm512_mul_ps(dv, _mm512_set1_ps(s[r])), acc[r]);
    acc[r] = _mm512_fmadd_ps(cv, _mm512_set1_ps(xs[r]), acc[r]);
  }
}

constexpr int kMaxBlocks = 8;  // 16-row blocks staged at once (128 rows, PlanGemmTiles' tallest)

// Rows [row_begin, row_end), at most kMaxBlocks * 16 of them.
template <PackKind kKind>
void TileAmxRows(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
                 int64_t panel_end) {
  constexpr int S = PackGroupSize(kKind);
  const QuantizedMatrix& w = *a.w;
  const int64_t groups = w.num_groups();
  const int64_t K = w.cols;
  const int64_t nrows = row_end - row_begin;
  const int64_t nblocks = (nrows + 15) / 16;

  // Staging: the panel's byte codes and d, c vectors; then per row block its
  // repacked codes and s, xs tables.
  static thread_local Staging staging;
  const size_t panel_codes = static_cast<size_t>(K) * kPanelRows;
  const size_t panel_vecs = static_cast<size_t>(groups) * kPanelRows * sizeof(float);
  const size_t block_codes = static_cast<size_t>(K) * 16;  // [group][16][S]
  const size_t block_tables = static_cast<size_t>(groups) * 16 * sizeof(float);
  uint8_t* base = staging.Get(panel_codes + 2 * panel_vecs +
                              static_cast<size_t>(nblocks) * (block_codes + 2 * block_tables));
  uint8_t* p_codes = base;
  float* p_d = reinterpret_cast<float*>(p_codes + panel_codes);
  float* p_c = p_d + groups * kPanelRows;
  uint8_t* blocks_at = reinterpret_cast<uint8_t*>(p_c + groups * kPanelRows);

  StagedRows blocks[kMaxBlocks];
  int64_t rows[16];
  for (int64_t b = 0; b < nblocks; ++b) {
    uint8_t* at = blocks_at + static_cast<size_t>(b) * (block_codes + 2 * block_tables);
    const int nb = static_cast<int>(std::min<int64_t>(16, nrows - 16 * b));
    for (int r = 0; r < nb; ++r) rows[r] = row_begin + 16 * b + r;
    blocks[b] = StageRows<S>(a, rows, nb, reinterpret_cast<int8_t*>(at),
                             reinterpret_cast<float*>(at + block_codes),
                             reinterpret_cast<float*>(at + block_codes + block_tables));
  }

  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(S == 32 ? &kConfigG32 : &kConfigG16);
  alignas(64) int32_t cbuf[2][16][16];
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    const StagedPanel sp = StagePanel<kKind>(w, p, p_codes, p_d, p_c);
    const int n_valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - p * kPanelRows));
    const __mmask16 mask = static_cast<__mmask16>((1u << n_valid) - 1);
    for (int64_t b = 0; b < nblocks; ++b) {
      const StagedRows& sr = blocks[b];
      __m512 acc[16];
      for (__m512& v : acc) v = _mm512_setzero_ps();
      // Software pipeline, three groups deep: at step g the product of
      // group g + 1 is issued (tile set (g + 1) % 2), group g's C tile is
      // stored, and group g - 1's stored C is scaled. A tile store takes
      // long to become readable, so nothing reads what was just stored.
      constexpr int64_t kA = 16 * S;  // bytes of one group's A tile
      DLLM_AMX_PRODUCT(0, 4, 6, sr.q, S, sp.codes);
      for (int64_t g = 0; g <= groups; ++g) {
        const bool odd = (g & 1) != 0;
        if (g + 1 < groups) {
          const int8_t* a_next = sr.q + (g + 1) * kA;
          const uint8_t* b_next = sp.codes + (g + 1) * sp.code_stride;
          if (odd) {
            DLLM_AMX_PRODUCT(0, 4, 6, a_next, S, b_next);
          } else {
            DLLM_AMX_PRODUCT(1, 5, 7, a_next, S, b_next);
          }
        }
        if (g < groups) {
          if (odd) {
            _tile_stored(1, cbuf[1], 64);
          } else {
            _tile_stored(0, cbuf[0], 64);
          }
        }
        if (g > 0) {
          const int64_t gp = g - 1;
          Epilogue(cbuf[gp & 1], _mm512_load_ps(sp.d + gp * kPanelRows),
                   _mm512_load_ps(sp.c + gp * kPanelRows), sr.s + gp * 16, sr.xs + gp * 16, acc);
        }
      }
      const int nb = static_cast<int>(std::min<int64_t>(16, nrows - 16 * b));
      for (int r = 0; r < nb; ++r) {
        const int64_t row = row_begin + 16 * b + r;
        _mm512_mask_storeu_ps(a.y + row * a.y_stride + p * kPanelRows, mask, acc[r]);
      }
    }
  }
  _tile_release();
}

template <PackKind kKind>
void TileAmx(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
             int64_t panel_end) {
  for (int64_t r = row_begin; r < row_end; r += kMaxBlocks * 16) {
    TileAmxRows<kKind>(a, r, std::min<int64_t>(row_end, r + kMaxBlocks * 16), panel_begin,
                       panel_end);
  }
}

#undef DLLM_AMX_PRODUCT

}  // namespace

void FillAmxKernels(GemmKernels* k) {
  k->tile[static_cast<int>(PackKind::kU4K)] = TileAmx<PackKind::kU4K>;
  k->tile[static_cast<int>(PackKind::kU4G32)] = TileAmx<PackKind::kU4G32>;
  k->tile[static_cast<int>(PackKind::kU8G32)] = TileAmx<PackKind::kU8G32>;
  k->tile[static_cast<int>(PackKind::kU6G16)] = TileAmx<PackKind::kU6G16>;
  k->row_block = 16;  // one A tile of X rows
}

}  // namespace dllm::gemm_internal
