// Scalar reference quantizers: float rows to GGUF blocks, byte for byte in
// the layout `DequantizeRow` (dequant.h) reads. Round-to-nearest with a small
// per-block scale search in the spirit of ggml's `quantize_row_*_ref`; the
// bytes are not promised to equal ggml's, only to be valid blocks whose
// dequantized values are close to the input (see quantize_test.cc for the
// error each type reaches). Used to write test models and by tools; not on
// any hot path.
#ifndef DLLM_ENGINE_SYNTH_QUANTIZE_H_
#define DLLM_ENGINE_SYNTH_QUANTIZE_H_

#include <cstdint>

#include "kernels/ggml_types.h"

namespace dllm {

// True when `QuantizeRow` can produce `type`.
bool CanQuantize(GgmlType type);

// Quantizes `n` floats (a multiple of the type's block size) from `src` into
// `RowBytes(type, n)` bytes at `dst`. `type` must satisfy `CanQuantize`:
// F32, F16, BF16, Q4_0, Q4_1, Q5_0, Q5_1, Q8_0, Q4_K, Q5_K, Q6_K.
// Inputs must be finite.
void QuantizeRow(GgmlType type, const float* src, void* dst, int64_t n);

}  // namespace dllm

#endif  // DLLM_ENGINE_SYNTH_QUANTIZE_H_
