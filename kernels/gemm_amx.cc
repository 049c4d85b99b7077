// AMX-INT8 GEMM tiles (compiled with -mamx-tile -mamx-int8 plus AVX-512 for
// the float epilogue). Needs the Linux tile-data permission, which
// cpu_features.cc requests; IsaLevel::kAmx is only reported once granted.
//
// Scheme: for each weight scale group (S = 32 or 16 k), `tdpbsud` multiplies
// an A tile of 16 X rows x S activation codes (s8) by a B tile of S/4
// quad-rows x 16 weight rows x 4 codes (u8, exactly the packed panel layout;
// 4- and 6-bit codes are unpacked to bytes once per group and reused by
// every row block of the tile). The int32 C tile is stored and scaled in float
// (y += s d dot + c s sum(q)) because every group has its own scales; two
// panels share each A tile.
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
#include <cstring>

#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {
namespace {

struct alignas(64) TileConfig {
  uint8_t palette_id;
  uint8_t start_row;
  uint8_t reserved[14];
  uint16_t colsb[16];
  uint8_t rows[16];
};
static_assert(sizeof(TileConfig) == 64);

// Tiles 0,1: C (16 x 16 int32) for two panels; 4: A (16 x S codes);
// 6,7: B (S/4 quad-rows x 64 bytes) for two panels.
constexpr TileConfig MakeConfig(int S) {
  TileConfig c{};
  c.palette_id = 1;
  c.colsb[0] = c.colsb[1] = 64;
  c.rows[0] = c.rows[1] = 16;
  c.colsb[4] = static_cast<uint16_t>(S);
  c.rows[4] = 16;
  c.colsb[6] = c.colsb[7] = 64;
  c.rows[6] = c.rows[7] = static_cast<uint8_t>(S / 4);
  return c;
}
alignas(64) static const TileConfig kConfigG32 = MakeConfig(32);
alignas(64) static const TileConfig kConfigG16 = MakeConfig(16);

constexpr int kChunkRows = 128;  // X rows whose float accumulators stay on the stack

// Unpacks a 4-bit group (4 quad-rows, low/high nibbles) into 8 byte quad-rows.
inline void UnpackU4(const uint8_t* codes, uint8_t* out) {
  const __m512i nib = _mm512_set1_epi8(0x0f);
  for (int q = 0; q < 4; ++q) {
    const __m512i v = _mm512_load_si512(codes + 64 * q);
    _mm512_store_si512(out + 64 * q, _mm512_and_si512(v, nib));
    _mm512_store_si512(out + 64 * (q + 4), _mm512_and_si512(_mm512_srli_epi16(v, 4), nib));
  }
}

#include "kernels/gemm_avx512_helpers-inl.h"

template <PackKind kKind>
void TileAmx(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
             int64_t panel_end) {
  constexpr int S = kKind == PackKind::kU6G16 ? 16 : 32;
  const QuantizedMatrix& w = *a.w;
  const QuantizedRows& x = *a.x;
  const int64_t groups = w.num_groups();
  __asm__ volatile("" ::: "memory");
  _tile_loadconfig(S == 32 ? &kConfigG32 : &kConfigG16);

  alignas(64) uint8_t bbuf[2][512];
  alignas(64) int8_t abuf[16 * S];
  alignas(64) int32_t cbuf[2][16][16];
  alignas(64) float acc[kChunkRows][2][16];
  int64_t rows[kChunkRows];

  for (int64_t p = panel_begin; p < panel_end; p += 2) {
    const int64_t p1 = p + 1 < panel_end ? p + 1 : p;  // odd count: panel p twice, second dropped
    const float* d[2] = {w.scales(p), w.scales(p1)};
    const float* c[2] = {w.offsets(p), w.offsets(p1)};
    const KPanel kp0(w, p), kp1(w, p1);
    for (int64_t i0 = row_begin; i0 < row_end; i0 += kChunkRows) {
      const int nrows = static_cast<int>(std::min<int64_t>(kChunkRows, row_end - i0));
      for (int r = 0; r < nrows; ++r) rows[r] = RowOf(a, i0 + r);
      std::memset(acc, 0, sizeof(acc[0]) * nrows);
      for (int64_t g = 0; g < groups; ++g) {
        const int64_t k0 = g * S;
        if constexpr (PackIsFourBit(kKind)) {
          UnpackU4(w.codes(p, g), bbuf[0]);
          UnpackU4(w.codes(p1, g), bbuf[1]);
          _tile_loadd(6, bbuf[0], 64);
          _tile_loadd(7, bbuf[1], 64);
        } else if constexpr (kKind == PackKind::kU6G16) {
          for (int q = 0; q < 4; ++q) {
            _mm512_store_si512(bbuf[0] + 64 * q, Unpack6(w.codes(p, g), q));
            _mm512_store_si512(bbuf[1] + 64 * q, Unpack6(w.codes(p1, g), q));
          }
          _tile_loadd(6, bbuf[0], 64);
          _tile_loadd(7, bbuf[1], 64);
        } else {
          _tile_loadd(6, w.codes(p, g), 64);
          _tile_loadd(7, w.codes(p1, g), 64);
        }
        __m512 dv0, dv1, cv0, cv1;
        if constexpr (kKind == PackKind::kU4K) {
          KScales(kp0, g, &dv0, &cv0);
          KScales(kp1, g, &dv1, &cv1);
        } else {
          dv0 = _mm512_load_ps(d[0] + g * kPanelRows);
          dv1 = _mm512_load_ps(d[1] + g * kPanelRows);
          const __m512 m32 = _mm512_set1_ps(-32.0f);  // kU6G16 stores no offsets: c = -32 d
          cv0 = kKind == PackKind::kU6G16 ? _mm512_mul_ps(dv0, m32) : _mm512_load_ps(c[0] + g * kPanelRows);
          cv1 = kKind == PackKind::kU6G16 ? _mm512_mul_ps(dv1, m32) : _mm512_load_ps(c[1] + g * kPanelRows);
        }
        for (int rb = 0; rb < nrows; rb += 16) {
          const int nb = std::min(16, nrows - rb);
          bool contiguous = nb == 16;
          for (int r = 1; contiguous && r < 16; ++r) contiguous = rows[rb + r] == rows[rb] + r;
          if (contiguous) {
            _tile_loadd(4, x.row_q(rows[rb]) + k0, x.cols);
          } else {
            for (int r = 0; r < 16; ++r) {
              if (r < nb) {
                std::memcpy(abuf + r * S, x.row_q(rows[rb + r]) + k0, S);
              } else {
                std::memset(abuf + r * S, 0, S);
              }
            }
            _tile_loadd(4, abuf, S);
          }
          _tile_zero(0);
          _tile_zero(1);
          _tile_dpbsud(0, 4, 6);
          _tile_dpbsud(1, 4, 7);
          _tile_stored(0, cbuf[0], 64);
          _tile_stored(1, cbuf[1], 64);
          for (int r = 0; r < nb; ++r) {
            const int64_t row = rows[rb + r];
            const float s = x.row_scale(row)[k0 / kActBlock];
            const __m512 vs = _mm512_set1_ps(s);
            const __m512 vxs =
                _mm512_set1_ps(s * static_cast<float>(ActGroupSum(x.row_sum16(row), k0, S)));
            float* ar = acc[rb + r][0];
            __m512 y0 = _mm512_load_ps(ar), y1 = _mm512_load_ps(ar + 16);
            y0 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cbuf[0][r])), _mm512_mul_ps(dv0, vs), y0);
            y1 = _mm512_fmadd_ps(_mm512_cvtepi32_ps(_mm512_load_si512(cbuf[1][r])), _mm512_mul_ps(dv1, vs), y1);
            _mm512_store_ps(ar, _mm512_fmadd_ps(cv0, vxs, y0));
            _mm512_store_ps(ar + 16, _mm512_fmadd_ps(cv1, vxs, y1));
          }
        }
      }
      for (int pp = 0; pp < (p1 != p ? 2 : 1); ++pp) {
        const int64_t panel = p + pp;
        const int n_valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - panel * kPanelRows));
        const __mmask16 mask = static_cast<__mmask16>((1u << n_valid) - 1);
        for (int r = 0; r < nrows; ++r) {
          _mm512_mask_storeu_ps(a.y + rows[r] * a.y_stride + panel * kPanelRows, mask,
                                _mm512_load_ps(acc[r][pp]));
        }
      }
    }
  }
  _tile_release();
}

}  // namespace

void FillAmxKernels(GemmKernels* k) {
  k->tile[static_cast<int>(PackKind::kU4K)] = TileAmx<PackKind::kU4K>;
  k->tile[static_cast<int>(PackKind::kU4G32)] = TileAmx<PackKind::kU4G32>;
  k->tile[static_cast<int>(PackKind::kU8G32)] = TileAmx<PackKind::kU8G32>;
  k->tile[static_cast<int>(PackKind::kU6G16)] = TileAmx<PackKind::kU6G16>;
}

}  // namespace dllm::gemm_internal
