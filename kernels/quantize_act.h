// Activations quantized to int8 for the integer GEMM: per row, per block of
// 32 elements, a float scale s = max|x|/127 and codes q = round(x / s) in
// [-127, 127] (symmetric, so negating a code never overflows int8), plus the
// integer sum of the codes of each 16 elements (the GEMM's offset term needs
// sum(x) per weight scale group, 16 or 32 elements).
//
// Error bound: |x - s q| <= s / 2 = max|x_b| / 254 per element (plus float
// rounding of x / s, < 1 ulp of q). Hence for a weight row w,
//     |sum x w - sum s q w| <= sum_blocks (max|x_b| / 254) * sum_b |w|,
// which gemm_test.cc checks against an f64 product.
#ifndef DLLM_KERNELS_QUANTIZE_ACT_H_
#define DLLM_KERNELS_QUANTIZE_ACT_H_

#include <cstddef>
#include <cstdint>

namespace dllm {

constexpr int kActBlock = 32;  // elements per activation scale

// View of quantized activation rows; points into caller-owned memory.
struct QuantizedRows {
  int64_t rows = 0;          // M
  int64_t cols = 0;          // K, a multiple of kActBlock
  int8_t* q = nullptr;       // (rows, cols), row stride cols, 64-byte aligned
  float* scale = nullptr;    // (rows, cols / 32)
  int32_t* sum16 = nullptr;  // (rows, cols / 16): sum of q over each 16

  const int8_t* row_q(int64_t r) const { return q + r * cols; }
  const float* row_scale(int64_t r) const { return scale + r * (cols / kActBlock); }
  const int32_t* row_sum16(int64_t r) const { return sum16 + r * (cols / 16); }
};

// Bytes of a buffer holding `rows` x `cols` quantized activations.
size_t QuantizedRowsBytes(int64_t rows, int64_t cols);

// Lays out a QuantizedRows in `buffer` (64-byte aligned,
// QuantizedRowsBytes(rows, cols) long). Allocates nothing.
QuantizedRows CarveQuantizedRows(void* buffer, int64_t rows, int64_t cols);

// One row's quantizer: `cols` values of `x` into codes `q`, block scales
// `scale` and 16-sums `sum16`.
using QuantizeRowFn = void (*)(const float* x, int64_t cols, int8_t* q, float* scale,
                               int32_t* sum16);
// The scalar quantizer, and the AVX2 one (same bits for finite inputs; the
// test holds it). QuantizeRows uses the AVX2 one where the CPU has AVX2.
void QuantizeRowScalar(const float* x, int64_t cols, int8_t* q, float* scale, int32_t* sum16);
void QuantizeRowAvx2(const float* x, int64_t cols, int8_t* q, float* scale, int32_t* sum16);

// Quantizes rows 0..num_rows of `x` (row stride `x_stride` floats) into
// `out` (out->cols elements each).
void QuantizeRows(const float* x, int64_t x_stride, int64_t num_rows, const QuantizedRows& out);

// Gathers: quantizes x row row_ids[i] into row i of `out`, i < num_rows
// (out->rows >= num_rows), so a GEMM over rows 0..num_rows writes a compact
// Y (e.g. only the canvas rows the sampler can commit).
void QuantizeGatheredRows(const float* x, int64_t x_stride, const int32_t* row_ids,
                          int64_t num_rows, const QuantizedRows& out);

}  // namespace dllm

#endif  // DLLM_KERNELS_QUANTIZE_ACT_H_
