// Per-ISA vector kernel tables (vector_ops_scalar.cc, vector_ops_avx2.cc).
#ifndef DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_
#define DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_

#include "kernels/vector_ops.h"

namespace dllm::vector_internal {

void FillScalarVectorKernels(VectorKernels* k);
void FillAvx2VectorKernels(VectorKernels* k);

}  // namespace dllm::vector_internal

#endif  // DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_
