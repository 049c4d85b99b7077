// The AVX-512 vector table: the AVX2 kernels, but for add_weighted_rows
// (DiffusionGemma's soft embedding, a 256 x 262k x 2816 float GEMM a step).
#include <immintrin.h>

#include <cmath>

#include "kernels/vector_ops_internal.h"

namespace dllm::vector_internal {
namespace {

// Four rows at a time over 64 columns: 16 accumulators, so that the FMA
// chains (one per accumulator, over i) keep both FMA pipes busy and each
// embedding vector loaded feeds four rows. Every sum runs over i in order
// with one FMA each, as the scalar and AVX2 kernels do, so a row's bits do
// not depend on the ISA, its neighbours or the blocking.
void AddWeightedRowsAvx512(const float* w, int64_t ldw, int64_t rows, const float* e, int64_t lde,
                           int64_t k, int64_t n, float* acc, int64_t ldacc) {
  int64_t r = 0;
  const int64_t n64 = n / 64 * 64;
  for (; r + 4 <= rows && n64 > 0; r += 4) {
    const float* wr = w + r * ldw;
    float* a = acc + r * ldacc;
    for (int64_t j = 0; j < n64; j += 64) {
      __m512 s[4][4];
      for (int q = 0; q < 4; ++q) {
        for (int c = 0; c < 4; ++c) s[q][c] = _mm512_loadu_ps(a + q * ldacc + j + 16 * c);
      }
      for (int64_t i = 0; i < k; ++i) {
        const float* ei = e + i * lde + j;
        const __m512 e0 = _mm512_loadu_ps(ei), e1 = _mm512_loadu_ps(ei + 16);
        const __m512 e2 = _mm512_loadu_ps(ei + 32), e3 = _mm512_loadu_ps(ei + 48);
        for (int q = 0; q < 4; ++q) {
          const __m512 v = _mm512_set1_ps(wr[q * ldw + i]);
          s[q][0] = _mm512_fmadd_ps(v, e0, s[q][0]);
          s[q][1] = _mm512_fmadd_ps(v, e1, s[q][1]);
          s[q][2] = _mm512_fmadd_ps(v, e2, s[q][2]);
          s[q][3] = _mm512_fmadd_ps(v, e3, s[q][3]);
        }
      }
      for (int q = 0; q < 4; ++q) {
        for (int c = 0; c < 4; ++c) _mm512_storeu_ps(a + q * ldacc + j + 16 * c, s[q][c]);
      }
    }
  }
  // The rows past the last four, and the columns past the last 64: the AVX2
  // kernel (the same sums, in the same order).
  static const auto avx2 = [] {
    VectorKernels table;
    FillAvx2VectorKernels(&table);
    return table.add_weighted_rows;
  }();
  if (n64 < n && r > 0) avx2(w, ldw, r, e + n64, lde, k, n - n64, acc + n64, ldacc);
  if (r < rows) avx2(w + r * ldw, ldw, rows - r, e, lde, k, n, acc + r * ldacc, ldacc);
}

}  // namespace

void FillAvx512VectorKernels(VectorKernels* k) {
  FillAvx2VectorKernels(k);
  k->add_weighted_rows = AddWeightedRowsAvx512;
}

}  // namespace dllm::vector_internal
