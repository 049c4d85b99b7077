// AVX-512 peak loops (built with -mavx512f -mavx512bw -mavx512vnni; each
// runs only where PeakLoopSupported says so). See peak.h.
#include <cstdint>

#include "kernels/peak_internal.h"

namespace dllm::peak_internal {

// kZmmChainsPerBlock accumulator chains of vpdpbusd zmm (latency 5 x 2
// ports = 10 needed).
void Avx512VnniInt8Blocks(int64_t blocks) {
  __asm__ volatile(
      "vpternlogd $0xff, %%zmm30, %%zmm30, %%zmm30\n\t"
      "vpabsb %%zmm30, %%zmm31\n\t"
      "1:\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm0\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm1\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm2\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm3\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm4\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm5\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm6\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm7\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm8\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm9\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm10\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm11\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm12\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm13\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm14\n\t"
      "vpdpbusd %%zmm30, %%zmm31, %%zmm15\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(blocks)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm30", "xmm31", "cc");
}

// kZmmChainsPerBlock chains of vfmadd231ps zmm (latency 4 x 2 ports = 8).
void Avx512Fp32Blocks(int64_t blocks) {
  __asm__ volatile(
      "vpxord %%zmm30, %%zmm30, %%zmm30\n\t"
      "vpxord %%zmm31, %%zmm31, %%zmm31\n\t"
      "1:\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm0\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm1\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm2\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm3\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm4\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm5\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm6\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm7\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm8\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm9\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm10\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm11\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm12\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm13\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm14\n\t"
      "vfmadd231ps %%zmm30, %%zmm31, %%zmm15\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(blocks)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "xmm30", "xmm31", "cc");
}

}  // namespace dllm::peak_internal
