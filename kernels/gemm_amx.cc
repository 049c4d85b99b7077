// Placeholder until the amx kernels land: the scalar tiles.
#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {

void FillAmxKernels(GemmKernels* k) { FillScalarKernels(k); }

}  // namespace dllm::gemm_internal
