// Per-ISA vector kernel tables (vector_ops_scalar.cc, vector_ops_avx2.cc).
#ifndef DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_
#define DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_

#include "kernels/vector_ops.h"

namespace dllm::vector_internal {

// GELU's tanh form: 0.5 x (1 + tanh(kSqrt2OverPi x (1 + kGeluCubic x^2))).
inline constexpr float kSqrt2OverPi = 0.79788456080286535587989211986876f;
inline constexpr float kGeluCubic = 0.044715f;

void FillScalarVectorKernels(VectorKernels* k);
void FillAvx2VectorKernels(VectorKernels* k);
// The AVX2 table with AVX-512 versions where they pay (vector_ops_avx512.cc).
void FillAvx512VectorKernels(VectorKernels* k);

}  // namespace dllm::vector_internal

#endif  // DLLM_KERNELS_VECTOR_OPS_INTERNAL_H_
