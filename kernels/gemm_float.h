// Y = X · Wᵀ for float weights (F32, F16, BF16) with float32 activations and
// float32 accumulation: the path that keeps F32/F16 models within 1e-3 of
// exact math (int8 activations would not). Weights stay in their file type;
// each call converts one panel of `kFloatGemmTileN` weight rows to float,
// transposed, and runs every selected activation row over it.
#ifndef DLLM_KERNELS_GEMM_FLOAT_H_
#define DLLM_KERNELS_GEMM_FLOAT_H_

#include <cstddef>
#include <cstdint>

#include "kernels/cpu_features.h"
#include "kernels/ggml_types.h"

namespace dllm {

constexpr int kFloatGemmTileN = 16;  // weight rows per tile: one zmm of outputs

struct FloatGemmArgs {
  GgmlType type = GgmlType::kF32;  // F32, F16 or BF16
  const void* w = nullptr;         // n rows of k elements, `w_row_bytes` apart
  size_t w_row_bytes = 0;
  int64_t n = 0, k = 0;
  const float* x = nullptr;  // activation rows, `ldx` floats apart
  int64_t ldx = 0;
  const int32_t* rows = nullptr;  // rows of x to use (nullptr: 0..m-1)
  int64_t m = 0;
  float* y = nullptr;  // m rows of n outputs, `ldy` floats apart
  int64_t ldy = 0;
};

inline int64_t FloatGemmTiles(const FloatGemmArgs& a) {
  return (a.n + kFloatGemmTileN - 1) / kFloatGemmTileN;
}
inline int64_t FloatGemmScratchFloats(int64_t k) { return int64_t{kFloatGemmTileN} * k; }

// Computes output columns [tile * 16, min(n, tile * 16 + 16)) for all m rows.
using FloatGemmTileFn = void (*)(const FloatGemmArgs& args, int64_t tile, float* scratch);

FloatGemmTileFn SelectFloatGemm(IsaLevel level);

}  // namespace dllm

#endif  // DLLM_KERNELS_GEMM_FLOAT_H_
