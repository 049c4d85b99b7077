// AVX-512 vector kernels (compiled with the AVX-512 flags only): the AVX2
// table, with add_weighted_rows at 16 lanes (self-conditioning's
// probability-weighted embedding is a float GEMM of 189 GFLOP a canvas
// step at DiffusionGemma's real shape).
#include <immintrin.h>

#include <cmath>

#include "kernels/vector_ops_internal.h"

namespace dllm::vector_internal {
namespace {

// 64 columns at a time in four accumulators, then 16, then a scalar tail;
// each accumulator takes the k weighted rows in i order, one FMA each.
void AddWeightedRowsAvx512(const float* w, int64_t ldw, int64_t rows, const float* e, int64_t lde,
                           int64_t k, int64_t n, float* acc, int64_t ldacc) {
  for (int64_t r = 0; r < rows; ++r) {
    const float* wr = w + r * ldw;
    float* a = acc + r * ldacc;
    int64_t j = 0;
    for (; j + 64 <= n; j += 64) {
      __m512 s0 = _mm512_loadu_ps(a + j), s1 = _mm512_loadu_ps(a + j + 16);
      __m512 s2 = _mm512_loadu_ps(a + j + 32), s3 = _mm512_loadu_ps(a + j + 48);
      for (int64_t i = 0; i < k; ++i) {
        const __m512 wi = _mm512_set1_ps(wr[i]);
        const float* ei = e + i * lde + j;
        s0 = _mm512_fmadd_ps(wi, _mm512_loadu_ps(ei), s0);
        s1 = _mm512_fmadd_ps(wi, _mm512_loadu_ps(ei + 16), s1);
        s2 = _mm512_fmadd_ps(wi, _mm512_loadu_ps(ei + 32), s2);
        s3 = _mm512_fmadd_ps(wi, _mm512_loadu_ps(ei + 48), s3);
      }
      _mm512_storeu_ps(a + j, s0);
      _mm512_storeu_ps(a + j + 16, s1);
      _mm512_storeu_ps(a + j + 32, s2);
      _mm512_storeu_ps(a + j + 48, s3);
    }
    for (; j + 16 <= n; j += 16) {
      __m512 s = _mm512_loadu_ps(a + j);
      for (int64_t i = 0; i < k; ++i) {
        s = _mm512_fmadd_ps(_mm512_set1_ps(wr[i]), _mm512_loadu_ps(e + i * lde + j), s);
      }
      _mm512_storeu_ps(a + j, s);
    }
    for (; j < n; ++j) {
      float s = a[j];
      for (int64_t i = 0; i < k; ++i) s = std::fma(wr[i], e[i * lde + j], s);
      a[j] = s;
    }
  }
}

}  // namespace

void FillAvx512VectorKernels(VectorKernels* k) {
  FillAvx2VectorKernels(k);
  k->add_weighted_rows = AddWeightedRowsAvx512;
}

}  // namespace dllm::vector_internal
