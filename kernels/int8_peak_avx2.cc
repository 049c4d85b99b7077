// AVX2 int8 peak without VNNI: vpmaddubsw alone (see int8_peak.h).
#include <immintrin.h>

#include <chrono>
#include <cstdint>

#include "kernels/int8_peak.h"

namespace dllm {

double Avx2PeakOpsPerSecond(double seconds) {
  __m256i acc[8];
  for (auto& a : acc) a = _mm256_setzero_si256();
  __m256i a = _mm256_set1_epi8(1), b = _mm256_set1_epi8(2);
  constexpr int64_t kInner = 1 << 16;
  int64_t iters = 0;
  const auto start = std::chrono::steady_clock::now();
  double elapsed = 0;
  do {
    for (int64_t i = 0; i < kInner; ++i) {
      // Each step's product is recomputed (the asm hides a and b), as the
      // GEMM kernel's are; otherwise the compiler would hoist it.
      for (auto& x : acc) {
        x = _mm256_maddubs_epi16(a, b);  // independent: throughput, not latency
        __asm__ volatile("" : "+x"(x), "+x"(a));
      }
      __asm__ volatile("" : "+x"(acc[0]), "+x"(acc[1]), "+x"(acc[2]), "+x"(acc[3]), "+x"(acc[4]),
                       "+x"(acc[5]), "+x"(acc[6]), "+x"(acc[7]), "+x"(a), "+x"(b));
    }
    iters += kInner;
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  } while (elapsed < seconds);
  __m256i s = acc[0];
  for (int i = 1; i < 8; ++i) s = _mm256_add_epi32(s, acc[i]);
  volatile int sink = _mm256_extract_epi32(s, 0);
  (void)sink;
  return static_cast<double>(iters) * 8 * 2 * 32 / elapsed;
}

}  // namespace dllm
