// Elementwise and row kernels of the forward pass: RMSNorm, RoPE (both
// layouts), SwiGLU, softmax and add, one table per ISA like gemm.h. Scalar
// and AVX2 paths; AVX-512 levels use the AVX2 table. No alignment needed;
// tails are finished by a scalar loop continuing the SIMD index.
#ifndef DLLM_KERNELS_VECTOR_OPS_H_
#define DLLM_KERNELS_VECTOR_OPS_H_

#include <cstdint>

#include "kernels/cpu_features.h"

namespace dllm {

// RoPE pairings: kNorm rotates (x[2i], x[2i+1]) (LLaDA, llama.cpp
// LLAMA_ROPE_TYPE_NORM); kNeox rotates (x[i], x[i + n_rot/2]) (Dream/Qwen2).
enum class RopeLayout { kNorm = 0, kNeox = 1 };

struct VectorKernels {
  IsaLevel isa = IsaLevel::kScalar;
  // y = x * w / sqrt(mean(x^2) + eps) over n elements; y may alias x.
  void (*rms_norm)(const float* x, const float* w, float eps, int64_t n, float* y) = nullptr;
  // In place on x (n_tokens, n_head, head_dim): the first n_rot dims of each
  // head rotated by angle pos[t] * theta_base^(-2i/n_rot) for pair i
  // (n_rot even, <= head_dim). Angles are computed in double.
  void (*rope)(float* x, int64_t n_tokens, int64_t n_head, int64_t head_dim, int64_t n_rot,
               const int32_t* pos, float theta_base, RopeLayout layout) = nullptr;
  // y = silu(g) * u = g / (1 + exp(-g)) * u; y may alias g or u.
  void (*swiglu)(const float* g, const float* u, int64_t n, float* y) = nullptr;
  // In place softmax over n elements (max-subtracted). n >= 1.
  void (*softmax)(float* x, int64_t n) = nullptr;
  // y = a + b; y may alias a or b.
  void (*add)(const float* a, const float* b, int64_t n, float* y) = nullptr;
};

// The table for `level` (must be supported by this CPU). Filled once.
const VectorKernels& SelectVectorKernels(IsaLevel level);

}  // namespace dllm

#endif  // DLLM_KERNELS_VECTOR_OPS_H_
