// AVX-512 VNNI int8 peak: VPDPBUSD zmm register loop (see int8_peak.h).
// GCC 12 warns inside _mm512_reduce_add_epi32 (_mm512_undefined_*); a false positive.
#pragma GCC diagnostic ignored "-Wuninitialized"
#pragma GCC diagnostic ignored "-Wmaybe-uninitialized"
#include <immintrin.h>

#include <chrono>
#include <cstdint>

#include "kernels/int8_peak.h"

namespace dllm {

double Avx512VnniPeakOpsPerSecond(double seconds) {
  __m512i acc[12];
  for (auto& a : acc) a = _mm512_setzero_si512();
  const __m512i a = _mm512_set1_epi8(1), b = _mm512_set1_epi8(2);
  constexpr int64_t kInner = 1 << 16;
  int64_t iters = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    for (int64_t i = 0; i < kInner; ++i) {
      for (auto& x : acc) x = _mm512_dpbusd_epi32(x, a, b);
      __asm__ volatile("" : "+v"(acc[0]), "+v"(acc[1]), "+v"(acc[2]), "+v"(acc[3]), "+v"(acc[4]),
                       "+v"(acc[5]), "+v"(acc[6]), "+v"(acc[7]), "+v"(acc[8]), "+v"(acc[9]),
                       "+v"(acc[10]), "+v"(acc[11]));
    }
    iters += kInner;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  __m512i s = acc[0];
  for (int i = 1; i < 12; ++i) s = _mm512_add_epi32(s, acc[i]);
  volatile int sink = _mm512_reduce_add_epi32(s);
  (void)sink;
  return static_cast<double>(iters) * 12 * 2 * 64 / elapsed;
}

}  // namespace dllm
