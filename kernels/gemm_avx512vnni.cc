// AVX-512 VNNI GEMM tiles (compiled with -mavx512f/bw/vl/vnni only).
//
// A zmm holds one quad-row of a packed panel: 16 weight rows x 4 consecutive
// k codes, exactly `vpdpbusd`'s operand shape, so one instruction does
// 16 x 4 u8 x s8 products per X row into 16 int32 lanes. Codes are the
// unsigned operand and activations the signed one, so no sign correction
// is needed (quantized_matrix.h). Each group's weight vectors (unpacked from
// nibbles in registers for 4-bit codes) are reused by kRows X rows; after the
// group, each row's int32 dot is scaled in float: y += s d dot + c s sum(q).
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

inline __m512i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm512_set1_epi32(v);
}

#include "kernels/gemm_avx512_helpers-inl.h"

// X rows list[0..R) against panel p, all groups.
template <PackKind kKind, int R>
void RowsVnni(const GemmArgs& a, const int64_t* rows, int64_t p) {
  constexpr int S = kKind == PackKind::kU6G16 ? 16 : 32;
  constexpr int Q = S / 4;  // quad-rows per group
  const QuantizedMatrix& w = *a.w;
  const int64_t groups = w.num_groups();
  const float* d = w.scales(p);
  const float* c = w.offsets(p);
  const KPanel kp(w, p);
  const __m512i nib = _mm512_set1_epi8(0x0f);
  const int8_t* xq[R];
  const float* sx[R];
  const int32_t* sum16[R];
  __m512 acc[R];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.x->row_q(rows[r]);
    sx[r] = a.x->row_scale(rows[r]);
    sum16[r] = a.x->row_sum16(rows[r]);
    acc[r] = _mm512_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* codes = w.codes(p, g);
    __m512i wv[Q];
    if constexpr (PackIsFourBit(kKind)) {
      for (int q = 0; q < 4; ++q) {
        const __m512i v = _mm512_load_si512(codes + 64 * q);
        wv[q] = _mm512_and_si512(v, nib);                          // elements 4q..4q+3
        wv[q + 4] = _mm512_and_si512(_mm512_srli_epi16(v, 4), nib);  // elements 16+4q..
      }
    } else if constexpr (kKind == PackKind::kU6G16) {
      for (int q = 0; q < 4; ++q) wv[q] = Unpack6(codes, q);
    } else {
      for (int q = 0; q < Q; ++q) wv[q] = _mm512_load_si512(codes + 64 * q);
    }
    const int64_t k0 = g * S;
    __m512 dv, cv;
    if constexpr (kKind == PackKind::kU4K) {
      KScales(kp, g, &dv, &cv);
    } else {
      dv = _mm512_load_ps(d + g * kPanelRows);
      cv = kKind == PackKind::kU6G16 ? _mm512_mul_ps(dv, _mm512_set1_ps(-32.0f))
                                     : _mm512_load_ps(c + g * kPanelRows);
    }
    for (int r = 0; r < R; ++r) {
      const int8_t* x = xq[r] + k0;
      __m512i dot = _mm512_setzero_si512();
      for (int q = 0; q < Q; ++q) {
        // 4-bit: quad-rows 0..3 hold elements 4q.., 4..7 hold 16 + 4(q-4)..
        const int e = PackIsFourBit(kKind) ? (q < 4 ? 4 * q : 16 + 4 * (q - 4)) : 4 * q;
        dot = _mm512_dpbusd_epi32(dot, wv[q], Bcast4(x + e));
      }
      const float s = sx[r][k0 / kActBlock];
      const float xs = s * static_cast<float>(ActGroupSum(sum16[r], k0, S));
      acc[r] = _mm512_fmadd_ps(_mm512_cvtepi32_ps(dot), _mm512_mul_ps(dv, _mm512_set1_ps(s)), acc[r]);
      acc[r] = _mm512_fmadd_ps(cv, _mm512_set1_ps(xs), acc[r]);
    }
  }
  const int n_valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - p * kPanelRows));
  const __mmask16 mask = static_cast<__mmask16>((1u << n_valid) - 1);
  for (int r = 0; r < R; ++r) {
    _mm512_mask_storeu_ps(a.y + rows[r] * a.y_stride + p * kPanelRows, mask, acc[r]);
  }
}

template <PackKind kKind>
void TileVnni(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
              int64_t panel_end) {
  constexpr int kRows = 8;  // 8 int32 + 8 float accumulators + 8 weight vectors fit in 32 zmm
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    int64_t i = row_begin;
    int64_t rows[kRows];
    for (; i + kRows <= row_end; i += kRows) {
      for (int r = 0; r < kRows; ++r) rows[r] = i + r;
      RowsVnni<kKind, kRows>(a, rows, p);
    }
    for (; i < row_end; ++i) {
      rows[0] = i;
      RowsVnni<kKind, 1>(a, rows, p);
    }
  }
}

}  // namespace

void FillAvx512VnniKernels(GemmKernels* k) {
  k->tile[static_cast<int>(PackKind::kU4K)] = TileVnni<PackKind::kU4K>;
  k->tile[static_cast<int>(PackKind::kU4G32)] = TileVnni<PackKind::kU4G32>;
  k->tile[static_cast<int>(PackKind::kU8G32)] = TileVnni<PackKind::kU8G32>;
  k->tile[static_cast<int>(PackKind::kU6G16)] = TileVnni<PackKind::kU6G16>;
}

}  // namespace dllm::gemm_internal
