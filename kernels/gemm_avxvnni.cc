// AVX-VNNI (VEX vpdpbusd on ymm) GEMM tiles: gemm_avx2.cc compiled again
// with -mavxvnni; see the scheme there. Used for IsaLevel::kAvx2 when the CPU
// has AVX-VNNI (gemm.cc).
#define DLLM_GEMM_AVXVNNI 1
#include "kernels/gemm_avx2.cc"
