// AVX2 peak loops (built with -mavx2 -mfma -mavxvnni; each runs only where
// PeakLoopSupported says so). See peak.h for why they are written in asm.
#include <cstdint>

#include "kernels/peak_internal.h"

namespace dllm::peak_internal {
namespace {
alignas(32) const uint8_t kOnes[32] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1,
                                       1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1};
}  // namespace

// kAvx2Int8PerBlock independent vpmaddubsw ymm: the instruction has no
// accumulator, so there is no chain to hide.
void Avx2Int8Blocks(int64_t blocks) {
  __asm__ volatile(
      "vpcmpeqb %%ymm14, %%ymm14, %%ymm14\n\t"
      "vpabsb %%ymm14, %%ymm15\n\t"
      "1:\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm0\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm1\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm2\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm3\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm4\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm5\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm6\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm7\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm8\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm9\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm10\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm11\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm12\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm13\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm14\n\t"
      "vpmaddubsw %%ymm14, %%ymm15, %%ymm15\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(blocks)
      :
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
}

// kYmmChainsPerBlock accumulator chains of {vex} vpdpbusd ymm (AVX-VNNI;
// latency 5 x 2 ports = 10 needed), one source from memory.
void AvxVnniInt8Blocks(int64_t blocks) {
  __asm__ volatile(
      "vpcmpeqb %%ymm15, %%ymm15, %%ymm15\n\t"
      "vpabsb %%ymm15, %%ymm15\n\t"
      "1:\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm0\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm1\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm2\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm3\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm4\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm5\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm6\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm7\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm8\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm9\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm10\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm11\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm12\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm13\n\t"
      "%{vex%} vpdpbusd (%1), %%ymm15, %%ymm14\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(blocks)
      : "r"(kOnes)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
}

// kYmmChainsPerBlock chains of vfmadd231ps ymm (latency 4 x 2 ports = 8
// needed), one source from memory.
void Avx2Fp32Blocks(int64_t blocks) {
  __asm__ volatile(
      "vxorps %%ymm15, %%ymm15, %%ymm15\n\t"
      "1:\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm0\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm1\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm2\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm3\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm4\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm5\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm6\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm7\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm8\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm9\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm10\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm11\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm12\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm13\n\t"
      "vfmadd231ps (%1), %%ymm15, %%ymm14\n\t"
      "dec %0\n\t"
      "jnz 1b\n\t"
      "vzeroupper\n\t"
      : "+r"(blocks)
      : "r"(kOnes)
      : "xmm0", "xmm1", "xmm2", "xmm3", "xmm4", "xmm5", "xmm6", "xmm7", "xmm8", "xmm9", "xmm10",
        "xmm11", "xmm12", "xmm13", "xmm14", "xmm15", "cc", "memory");
}

}  // namespace dllm::peak_internal
