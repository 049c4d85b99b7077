// Per-ISA vector kernel tables (vector_ops_scalar.cc, vector_ops_avx2.cc).
#ifndef DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_
#define DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_

#include "kernels/vector_ops.h"

namespace dllm::vector_internal {

void FillScalarVectorKernels(VectorKernels* k);
void FillAvx2VectorKernels(VectorKernels* k);

// Shared by both paths: RoPE's rotation is memory-bound and its angles are
// per token, so the scalar loop is used everywhere.
void RopeScalar(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
                const int32_t* pos, float theta_base, RopeLayout layout);

}  // namespace dllm::vector_internal

#endif  // DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_
