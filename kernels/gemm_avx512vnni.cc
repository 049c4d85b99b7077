// Placeholder until the avx512vnni kernels land: the scalar tiles.
#include "kernels/gemm_internal.h"

namespace dllm::gemm_internal {

void FillAvx512VnniKernels(GemmKernels* k) { FillScalarKernels(k); }

}  // namespace dllm::gemm_internal
