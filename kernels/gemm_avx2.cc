// AVX2 GEMM tiles (compiled with -mavx2 -mfma only). Two X rows at a time
// against a 16-row weight panel held as two 8-lane halves.
//
// Integer scheme: `vpmaddubsw` multiplies u8 codes by s8 activations into
// saturating int16 pairs, `vpmaddwd` by ones widens to int32. Codes of at
// most 6 bits cannot saturate (2 * 63 * 127 < 32767). 8-bit codes could
// (2 * 255 * 127), so they are recentred, s = u - 128, and multiplied as
// |s| x sign(x, s) (at most 2 * 128 * 127); the lost 128 * sum(q) is folded
// into the offset term: c' = c + 128 d. Activations are in [-127, 127], so
// negating them never overflows.
//
// The same source is compiled a second time as gemm_avxvnni.cc with
// DLLM_GEMM_AVXVNNI defined (and -mavxvnni): there `vpdpbusd` (ymm) takes the
// u8 codes times s8 activations straight into int32, with no saturation and
// no recentring, and gemm.cc uses that table for IsaLevel::kAvx2 on CPUs with
// AVX-VNNI.
#include <immintrin.h>

#include <algorithm>
#include <cstring>

#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {
namespace {

#ifdef DLLM_GEMM_AVXVNNI
constexpr bool kAvxVnni = true;
#define DLLM_GEMM_AVX2_FILL FillAvxVnniKernels
#else
constexpr bool kAvxVnni = false;
#define DLLM_GEMM_AVX2_FILL FillAvx2Kernels
#endif

inline __m256i Bcast4(const int8_t* p) {
  int32_t v;
  std::memcpy(&v, p, 4);
  return _mm256_set1_epi32(v);
}

// X rows rows[0..R) against panel p, all groups. Each group's weight
// vectors are loaded (and unpacked or recentred) once for the R rows.
// Quad-row q (0..3) of a 6-bit group (layout in quantized_matrix.h), bytes
// [half, half + 32) of it. The 16-bit shifts are safe: the masks drop the
// bits that cross a byte.
inline __m256i Unpack6(const uint8_t* codes, int q, int half) {
  auto load = [&](int v) { return _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * v + half)); };
  if (q < 2) return _mm256_and_si256(load(q), _mm256_set1_epi8(0x3f));
  const __m256i low = load(2);
  const __m256i lo = _mm256_and_si256(q == 2 ? low : _mm256_srli_epi16(low, 4), _mm256_set1_epi8(0x0f));
  return _mm256_or_si256(lo, _mm256_and_si256(_mm256_srli_epi16(load(q - 2), 2), _mm256_set1_epi8(0x30)));
}

// A kU4K panel's scale arrays (quantized_matrix.h).
struct KPanel {
  const uint8_t *sc, *mn;
  const float *sd, *sm;
  KPanel(const QuantizedMatrix& w, int64_t p)
      : sc(w.k_scales(p)), mn(w.k_mins(p)), sd(w.super_scales(p)), sm(w.super_mins(p)) {}
};

// kU4K: d = d_super * sc and c = -(dmin * m) for rows [n0, n0 + 8) of group g.
inline void KScales(const KPanel& k, int64_t g, int n0, __m256* d, __m256* c) {
  const int64_t at = g / 8 * kPanelRows + n0;
  const __m256 sc = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k.sc + g * kPanelRows + n0))));
  const __m256 mn = _mm256_cvtepi32_ps(_mm256_cvtepu8_epi32(
      _mm_loadl_epi64(reinterpret_cast<const __m128i*>(k.mn + g * kPanelRows + n0))));
  *d = _mm256_mul_ps(_mm256_loadu_ps(k.sd + at), sc);
  *c = _mm256_xor_ps(_mm256_mul_ps(_mm256_loadu_ps(k.sm + at), mn), _mm256_set1_ps(-0.0f));
}

template <PackKind kKind, int R>
void RowsAvx2(const GemmArgs& a, const int64_t* rows, int64_t p) {
  constexpr int S = kKind == PackKind::kU6G16 ? 16 : 32;
  const QuantizedMatrix& w = *a.w;
  const int64_t groups = w.num_groups();
  const float* d = w.scales(p);
  const float* c = w.offsets(p);
  const KPanel kp(w, p);
  const __m256i ones16 = _mm256_set1_epi16(1);
  const __m256i nib = _mm256_set1_epi8(0x0f);
  const __m256i bias = _mm256_set1_epi8(static_cast<char>(0x80));
  const int8_t* xq[R];
  __m256 acc[R][2];
  for (int r = 0; r < R; ++r) {
    xq[r] = a.x->row_q(rows[r]);
    acc[r][0] = acc[r][1] = _mm256_setzero_ps();
  }
  for (int64_t g = 0; g < groups; ++g) {
    const uint8_t* codes = w.codes(p, g);
    const int64_t k0 = g * S;
    __m256i dot[R][2];
    for (int r = 0; r < R; ++r) dot[r][0] = dot[r][1] = _mm256_setzero_si256();
    if constexpr (PackIsFourBit(kKind)) {
      for (int q = 0; q < 4; ++q) {
        const __m256i v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q));
        const __m256i v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q + 32));
        const __m256i l0 = _mm256_and_si256(v0, nib), l1 = _mm256_and_si256(v1, nib);
        const __m256i h0 = _mm256_and_si256(_mm256_srli_epi16(v0, 4), nib);
        const __m256i h1 = _mm256_and_si256(_mm256_srli_epi16(v1, 4), nib);
        for (int r = 0; r < R; ++r) {
          const __m256i xl = Bcast4(xq[r] + k0 + 4 * q), xh = Bcast4(xq[r] + k0 + 16 + 4 * q);
#ifdef DLLM_GEMM_AVXVNNI
          dot[r][0] = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(dot[r][0], l0, xl), h0, xh);
          dot[r][1] = _mm256_dpbusd_avx_epi32(_mm256_dpbusd_avx_epi32(dot[r][1], l1, xl), h1, xh);
          continue;
#endif
          // Two 4-bit products per pair, two pairs summed: 4 * 15 * 127 < 32767.
          const __m256i p0 = _mm256_add_epi16(_mm256_maddubs_epi16(l0, xl), _mm256_maddubs_epi16(h0, xh));
          const __m256i p1 = _mm256_add_epi16(_mm256_maddubs_epi16(l1, xl), _mm256_maddubs_epi16(h1, xh));
          dot[r][0] = _mm256_add_epi32(dot[r][0], _mm256_madd_epi16(p0, ones16));
          dot[r][1] = _mm256_add_epi32(dot[r][1], _mm256_madd_epi16(p1, ones16));
        }
      }
    } else if constexpr (kKind == PackKind::kU6G16 || kAvxVnni) {
      for (int q = 0; q < S / 4; ++q) {
        __m256i v0, v1;
        if constexpr (kKind == PackKind::kU6G16) {
          v0 = Unpack6(codes, q, 0);
          v1 = Unpack6(codes, q, 32);
        } else {
          v0 = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q));
          v1 = _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q + 32));
        }
        for (int r = 0; r < R; ++r) {
          const __m256i xb = Bcast4(xq[r] + k0 + 4 * q);
#ifdef DLLM_GEMM_AVXVNNI
          dot[r][0] = _mm256_dpbusd_avx_epi32(dot[r][0], v0, xb);
          dot[r][1] = _mm256_dpbusd_avx_epi32(dot[r][1], v1, xb);
          continue;
#endif
          dot[r][0] = _mm256_add_epi32(dot[r][0], _mm256_madd_epi16(_mm256_maddubs_epi16(v0, xb), ones16));
          dot[r][1] = _mm256_add_epi32(dot[r][1], _mm256_madd_epi16(_mm256_maddubs_epi16(v1, xb), ones16));
        }
      }
    } else {
      for (int q = 0; q < 8; ++q) {
        const __m256i s0 = _mm256_xor_si256(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q)), bias);
        const __m256i s1 = _mm256_xor_si256(
            _mm256_load_si256(reinterpret_cast<const __m256i*>(codes + 64 * q + 32)), bias);
        const __m256i a0 = _mm256_abs_epi8(s0), a1 = _mm256_abs_epi8(s1);
        for (int r = 0; r < R; ++r) {
          const __m256i xb = Bcast4(xq[r] + k0 + 4 * q);
          const __m256i m0 = _mm256_maddubs_epi16(a0, _mm256_sign_epi8(xb, s0));
          const __m256i m1 = _mm256_maddubs_epi16(a1, _mm256_sign_epi8(xb, s1));
          dot[r][0] = _mm256_add_epi32(dot[r][0], _mm256_madd_epi16(m0, ones16));
          dot[r][1] = _mm256_add_epi32(dot[r][1], _mm256_madd_epi16(m1, ones16));
        }
      }
    }
    __m256 d0, d1, c0, c1;
    if constexpr (kKind == PackKind::kU4K) {
      KScales(kp, g, 0, &d0, &c0);
      KScales(kp, g, 8, &d1, &c1);
    } else {
      d0 = _mm256_load_ps(d + g * kPanelRows);
      d1 = _mm256_load_ps(d + g * kPanelRows + 8);
    }
    if constexpr (kKind == PackKind::kU4K) {
    } else if constexpr (kKind == PackKind::kU6G16) {
      c0 = _mm256_mul_ps(d0, _mm256_set1_ps(-32.0f));
      c1 = _mm256_mul_ps(d1, _mm256_set1_ps(-32.0f));
    } else {
      c0 = _mm256_load_ps(c + g * kPanelRows);
      c1 = _mm256_load_ps(c + g * kPanelRows + 8);
    }
    if constexpr (kKind == PackKind::kU8G32 && !kAvxVnni) {
      const __m256 k128 = _mm256_set1_ps(128.0f);
      c0 = _mm256_fmadd_ps(d0, k128, c0);
      c1 = _mm256_fmadd_ps(d1, k128, c1);
    }
    for (int r = 0; r < R; ++r) {
      const float s = a.x->row_scale(rows[r])[k0 / kActBlock];
      const __m256 vs = _mm256_set1_ps(s);
      const __m256 vxs =
          _mm256_set1_ps(s * static_cast<float>(ActGroupSum(a.x->row_sum16(rows[r]), k0, S)));
      acc[r][0] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][0]), _mm256_mul_ps(d0, vs), acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(_mm256_cvtepi32_ps(dot[r][1]), _mm256_mul_ps(d1, vs), acc[r][1]);
      acc[r][0] = _mm256_fmadd_ps(c0, vxs, acc[r][0]);
      acc[r][1] = _mm256_fmadd_ps(c1, vxs, acc[r][1]);
    }
  }
  const int n_valid = static_cast<int>(std::min<int64_t>(kPanelRows, w.rows - p * kPanelRows));
  for (int r = 0; r < R; ++r) {
    float* out = a.y + rows[r] * a.y_stride + p * kPanelRows;
    if (n_valid == kPanelRows) {
      _mm256_storeu_ps(out, acc[r][0]);
      _mm256_storeu_ps(out + 8, acc[r][1]);
    } else {
      alignas(32) float tmp[kPanelRows];
      _mm256_store_ps(tmp, acc[r][0]);
      _mm256_store_ps(tmp + 8, acc[r][1]);
      std::memcpy(out, tmp, n_valid * sizeof(float));
    }
  }
}

template <PackKind kKind>
void TileAvx2(const GemmArgs& a, int64_t row_begin, int64_t row_end, int64_t panel_begin,
              int64_t panel_end) {
  constexpr int kRows = 2;  // 2 rows x 2 halves of int32 and float accumulators fit in 16 ymm
  for (int64_t p = panel_begin; p < panel_end; ++p) {
    int64_t i = row_begin;
    int64_t rows[kRows];
    for (; i + kRows <= row_end; i += kRows) {
      for (int r = 0; r < kRows; ++r) rows[r] = i + r;
      RowsAvx2<kKind, kRows>(a, rows, p);
    }
    for (; i < row_end; ++i) {
      rows[0] = i;
      RowsAvx2<kKind, 1>(a, rows, p);
    }
  }
}

}  // namespace

void DLLM_GEMM_AVX2_FILL(GemmKernels* k) {
  k->tile[static_cast<int>(PackKind::kU4K)] = TileAvx2<PackKind::kU4K>;
  k->tile[static_cast<int>(PackKind::kU4G32)] = TileAvx2<PackKind::kU4G32>;
  k->tile[static_cast<int>(PackKind::kU8G32)] = TileAvx2<PackKind::kU8G32>;
  k->tile[static_cast<int>(PackKind::kU6G16)] = TileAvx2<PackKind::kU6G16>;
}

}  // namespace dllm::gemm_internal
