// Elementwise and row kernels of the forward pass: RMSNorm, SwiGLU, GeGLU and add,
// one table per ISA like gemm.h. (RoPE is table-driven in the forward pass,
// forward.cc; attention keeps its own online softmax, attention_impl.h.) Scalar
// and AVX2 paths; AVX-512 levels use the AVX2 table but for add_weighted_rows. No alignment needed;
// tails are finished by a scalar loop continuing the SIMD index.
#ifndef DLLM_KERNELS_VECTOR_OPS_H_
#define DLLM_KERNELS_VECTOR_OPS_H_

#include <cstdint>

#include "kernels/cpu_features.h"

namespace dllm {

struct VectorKernels {
  IsaLevel isa = IsaLevel::kScalar;
  // y = x * w / sqrt(mean(x^2) + eps) over n elements (w null: no weight);
  // y may alias x.
  void (*rms_norm)(const float* x, const float* w, float eps, int64_t n, float* y) = nullptr;
  // y = silu(g) * u = g / (1 + exp(-g)) * u; y may alias g or u.
  void (*swiglu)(const float* g, const float* u, int64_t n, float* y) = nullptr;
  // y = gelu(g) * u with GELU's tanh form, 0.5 g (1 + tanh(sqrt(2/pi) (g +
  // 0.044715 g^3))) (ggml_gelu's formula); y may alias g or u.
  void (*geglu)(const float* g, const float* u, int64_t n, float* y) = nullptr;
  // y = a + b; y may alias a or b.
  void (*add)(const float* a, const float* b, int64_t n, float* y) = nullptr;
  // acc[r * ldacc + j] += sum over i < k of w[r * ldw + i] * e[i * lde + j],
  // for r < rows, j < n: a small float GEMM that adds k weighted rows of e
  // to each accumulator row (self-conditioning's probability-weighted
  // embedding). Each row's sum runs in the same order whatever `rows`.
  void (*add_weighted_rows)(const float* w, int64_t ldw, int64_t rows, const float* e, int64_t lde,
                            int64_t k, int64_t n, float* acc, int64_t ldacc) = nullptr;
};

// The table for `level` (must be supported by this CPU). Filled once.
const VectorKernels& SelectVectorKernels(IsaLevel level);

}  // namespace dllm

#endif  // DLLM_KERNELS_VECTOR_OPS_H_
