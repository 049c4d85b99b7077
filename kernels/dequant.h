// Scalar dequantization of every GGUF weight type dllm runs: the oracle the
// SIMD kernels and tests compare against. Values match ggml's
// `dequantize_row_*` / `ggml_fp16_to_fp32` bit for bit.
#ifndef DLLM_KERNELS_DEQUANT_H_
#define DLLM_KERNELS_DEQUANT_H_

#include <cstdint>

#include "kernels/ggml_types.h"

namespace dllm {

// IEEE half and bfloat16 <-> float, exactly as ggml converts them
// (round-to-nearest-even on the way down; bf16 NaNs stay quiet NaNs).
float Fp16ToFp32(uint16_t h);
uint16_t Fp32ToFp16(float f);
float Bf16ToFp32(uint16_t h);
uint16_t Fp32ToBf16(float f);

// Dequantizes `n` elements (a multiple of the type's block size) starting at
// the block-aligned `src` into `dst`. `type` must be supported
// (`TraitsOf(type).supported`).
void DequantizeRow(GgmlType type, const void* src, float* dst, int64_t n);

}  // namespace dllm

#endif  // DLLM_KERNELS_DEQUANT_H_
