// Per-ISA GEMM tile kernels, one translation unit each (gemm_scalar.cc,
// gemm_avx2.cc, gemm_avx512vnni.cc, gemm_amx.cc), each compiled with only
// its own ISA flags. Only gemm.cc includes this.
#ifndef DLLM_KERNELS_GEMM_INTERNAL_H_
#define DLLM_KERNELS_GEMM_INTERNAL_H_

#include "kernels/gemm.h"

namespace dllm::gemm_internal {

void FillScalarKernels(GemmKernels* k);
void FillAvx2Kernels(GemmKernels* k);
void FillAvxVnniKernels(GemmKernels* k);  // AVX2 + AVX-VNNI
void FillAvx512VnniKernels(GemmKernels* k);
void FillAmxKernels(GemmKernels* k);

// Sum of the activation codes over `group` (16 or 32) elements starting at
// element `k0` of a row's sum16 array.
inline int32_t ActGroupSum(const int32_t* sum16, int64_t k0, int group) {
  return group == 16 ? sum16[k0 / 16] : sum16[k0 / 16] + sum16[k0 / 16 + 1];
}

}  // namespace dllm::gemm_internal

#endif  // DLLM_KERNELS_GEMM_INTERNAL_H_
