// kernels/gemm_avx512vnni.cc built against emu/immintrin.h, renamed into
// namespace `gemm_internal_emu` (see gemm_emulated_test.cc).
#define gemm_internal gemm_internal_emu
#include "kernels/gemm_avx512vnni.cc"
