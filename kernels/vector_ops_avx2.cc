// AVX2 + FMA vector kernels (compiled with -mavx2 -mfma only). exp is a
// Cephes-style range reduction (x = n ln2 + r) with a degree-6 polynomial
// for e^r, relative error below 3e-7 over the float range; inputs below
// -87.3 give 0 (SwiGLU's silu of a very negative gate is 0, as in the scalar path).
#include <immintrin.h>

#include <cmath>

#include "kernels/vector_ops_internal.h"

namespace dllm::vector_internal {
namespace {

inline __m256 Exp256(__m256 x) {
  const __m256 lo = _mm256_set1_ps(-87.3f), hi = _mm256_set1_ps(88.7f);
  const __m256 underflow = _mm256_cmp_ps(x, lo, _CMP_LT_OQ);
  x = _mm256_min_ps(_mm256_max_ps(x, lo), hi);
  const __m256 n = _mm256_round_ps(_mm256_mul_ps(x, _mm256_set1_ps(1.44269504088896341f)),
                                   _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
  // r = x - n ln2 in two steps (Cody-Waite) to keep r exact.
  __m256 r = _mm256_fnmadd_ps(n, _mm256_set1_ps(0.693359375f), x);
  r = _mm256_fnmadd_ps(n, _mm256_set1_ps(-2.12194440e-4f), r);
  __m256 p = _mm256_set1_ps(1.9875691500e-4f);
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.3981999507e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(8.3334519073e-3f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(4.1665795894e-2f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(1.6666665459e-1f));
  p = _mm256_fmadd_ps(p, r, _mm256_set1_ps(5.0000001201e-1f));
  p = _mm256_fmadd_ps(p, _mm256_mul_ps(r, r), _mm256_add_ps(r, _mm256_set1_ps(1.0f)));
  const __m256i e =
      _mm256_slli_epi32(_mm256_add_epi32(_mm256_cvtps_epi32(n), _mm256_set1_epi32(127)), 23);
  const __m256 y = _mm256_mul_ps(p, _mm256_castsi256_ps(e));
  return _mm256_andnot_ps(underflow, y);
}

inline float HorizontalSum(__m256 v) {
  __m128 s = _mm_add_ps(_mm256_castps256_ps128(v), _mm256_extractf128_ps(v, 1));
  s = _mm_add_ps(s, _mm_movehl_ps(s, s));
  s = _mm_add_ss(s, _mm_movehdup_ps(s));
  return _mm_cvtss_f32(s);
}

void RmsNormAvx2(const float* x, const float* w, float eps, int64_t n, float* y) {
  // Four float accumulators of 8 lanes, then double: error ~ n/32 ulps.
  __m256 a0 = _mm256_setzero_ps(), a1 = _mm256_setzero_ps();
  int64_t i = 0;
  for (; i + 16 <= n; i += 16) {
    const __m256 v0 = _mm256_loadu_ps(x + i), v1 = _mm256_loadu_ps(x + i + 8);
    a0 = _mm256_fmadd_ps(v0, v0, a0);
    a1 = _mm256_fmadd_ps(v1, v1, a1);
  }
  double ss = HorizontalSum(_mm256_add_ps(a0, a1));
  for (; i < n; ++i) ss += static_cast<double>(x[i]) * x[i];
  const float scale = static_cast<float>(1.0 / std::sqrt(ss / static_cast<double>(n) + eps));
  const __m256 vs = _mm256_set1_ps(scale);
  if (w == nullptr) {
    for (i = 0; i + 8 <= n; i += 8)
      _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_loadu_ps(x + i), vs));
    for (; i < n; ++i) y[i] = x[i] * scale;
    return;
  }
  for (i = 0; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(
        y + i, _mm256_mul_ps(_mm256_mul_ps(_mm256_loadu_ps(x + i), vs), _mm256_loadu_ps(w + i)));
  }
  for (; i < n; ++i) y[i] = x[i] * scale * w[i];
}

void SwigluAvx2(const float* g, const float* u, int64_t n, float* y) {
  const __m256 one = _mm256_set1_ps(1.0f);
  const __m256 sign = _mm256_set1_ps(-0.0f);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 gv = _mm256_loadu_ps(g + i);
    const __m256 den = _mm256_add_ps(one, Exp256(_mm256_xor_ps(gv, sign)));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(_mm256_div_ps(gv, den), _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) y[i] = g[i] / (1.0f + std::exp(-g[i])) * u[i];
}

// tanh(z) = 1 - 2 / (exp(2z) + 1): Exp256 saturates at both ends, so the
// result goes to +-1 without overflow to NaN.
void GegluAvx2(const float* g, const float* u, int64_t n, float* y) {
  const __m256 one = _mm256_set1_ps(1.0f), two = _mm256_set1_ps(2.0f), half = _mm256_set1_ps(0.5f);
  const __m256 c = _mm256_set1_ps(kSqrt2OverPi), a = _mm256_set1_ps(kGeluCubic);
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    const __m256 x = _mm256_loadu_ps(g + i);
    const __m256 z =
        _mm256_mul_ps(_mm256_mul_ps(c, x), _mm256_fmadd_ps(_mm256_mul_ps(a, x), x, one));
    const __m256 e = Exp256(_mm256_mul_ps(two, z));
    const __m256 t = _mm256_sub_ps(one, _mm256_div_ps(two, _mm256_add_ps(e, one)));
    const __m256 gelu = _mm256_mul_ps(_mm256_mul_ps(half, x), _mm256_add_ps(one, t));
    _mm256_storeu_ps(y + i, _mm256_mul_ps(gelu, _mm256_loadu_ps(u + i)));
  }
  for (; i < n; ++i) {
    const float x = g[i];
    y[i] = 0.5f * x * (1.0f + std::tanh(kSqrt2OverPi * x * (1.0f + kGeluCubic * x * x))) * u[i];
  }
}

// Eight columns at a time, the k weighted rows summed into the
// accumulator in i order (as the scalar path: one FMA each, so the same
// order for every row count); tails by the scalar loop.
void AddWeightedRowsAvx2(const float* w, int64_t ldw, int64_t rows, const float* e, int64_t lde,
                         int64_t k, int64_t n, float* acc, int64_t ldacc) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* wr = w + r * ldw;
    float* a = acc + r * ldacc;
    int64_t j = 0;
    for (; j + 32 <= n; j += 32) {
      __m256 s0 = _mm256_loadu_ps(a + j), s1 = _mm256_loadu_ps(a + j + 8);
      __m256 s2 = _mm256_loadu_ps(a + j + 16), s3 = _mm256_loadu_ps(a + j + 24);
      for (int64_t i = 0; i < k; ++i) {
        const __m256 wi = _mm256_set1_ps(wr[i]);
        const float* ei = e + i * lde + j;
        s0 = _mm256_fmadd_ps(wi, _mm256_loadu_ps(ei), s0);
        s1 = _mm256_fmadd_ps(wi, _mm256_loadu_ps(ei + 8), s1);
        s2 = _mm256_fmadd_ps(wi, _mm256_loadu_ps(ei + 16), s2);
        s3 = _mm256_fmadd_ps(wi, _mm256_loadu_ps(ei + 24), s3);
      }
      _mm256_storeu_ps(a + j, s0);
      _mm256_storeu_ps(a + j + 8, s1);
      _mm256_storeu_ps(a + j + 16, s2);
      _mm256_storeu_ps(a + j + 24, s3);
    }
    for (; j + 8 <= n; j += 8) {
      __m256 s = _mm256_loadu_ps(a + j);
      for (int64_t i = 0; i < k; ++i) {
        s = _mm256_fmadd_ps(_mm256_set1_ps(wr[i]), _mm256_loadu_ps(e + i * lde + j), s);
      }
      _mm256_storeu_ps(a + j, s);
    }
    for (; j < n; ++j) {
      float s = a[j];
      for (int64_t i = 0; i < k; ++i) s = std::fma(wr[i], e[i * lde + j], s);
      a[j] = s;
    }
  }
}

void AddAvx2(const float* a, const float* b, int64_t n, float* y) {
  int64_t i = 0;
  for (; i + 8 <= n; i += 8) {
    _mm256_storeu_ps(y + i, _mm256_add_ps(_mm256_loadu_ps(a + i), _mm256_loadu_ps(b + i)));
  }
  for (; i < n; ++i) y[i] = a[i] + b[i];
}

}  // namespace

void FillAvx2VectorKernels(VectorKernels* k) {
  k->rms_norm = RmsNormAvx2;
  k->swiglu = SwigluAvx2;
  k->geglu = GegluAvx2;
  k->add = AddAvx2;
  k->add_weighted_rows = AddWeightedRowsAvx2;
}

}  // namespace dllm::vector_internal
