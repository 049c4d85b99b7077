// Placeholder until the avx2 kernels land: the scalar tiles.
#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {

void FillAvx2Kernels(GemmKernels* k) { FillScalarKernels(k); }

}  // namespace dllm::gemm_internal
