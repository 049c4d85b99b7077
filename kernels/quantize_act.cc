// Per-32-block symmetric int8 quantization of activation rows (see
// quantize_act.h for the scheme and its error bound): the scalar quantizer
// and the dispatch (the AVX2 one is quantize_act_avx2.cc).
#include "kernels/quantize_act.h"

#include <algorithm>
#include <cmath>

#include "kernels/cpu_features.h"

namespace dllm {
namespace {

size_t Align64(size_t n) { return (n + 63) / 64 * 64; }

// The quantizer for this CPU, chosen once.
QuantizeRowFn BestQuantizeRow() {
  static const QuantizeRowFn fn =
      IsaLevelSupported(IsaLevel::kAvx2) ? &QuantizeRowAvx2 : &QuantizeRowScalar;
  return fn;
}

}  // namespace

void QuantizeRowScalar(const float* x, int64_t cols, int8_t* q, float* scale, int32_t* sum16) {
  for (int64_t b = 0; b < cols / kActBlock; ++b) {
    const float* xb = x + b * kActBlock;
    float amax = 0.0f;
    for (int j = 0; j < kActBlock; ++j) amax = std::max(amax, std::fabs(xb[j]));
    const float s = amax / 127.0f;
    const float inv = s > 0.0f ? 127.0f / amax : 0.0f;
    scale[b] = s;
    for (int h = 0; h < 2; ++h) {
      int32_t sum = 0;
      for (int j = 16 * h; j < 16 * h + 16; ++j) {
        const int v = std::clamp(static_cast<int>(std::nearbyint(xb[j] * inv)), -127, 127);
        q[b * kActBlock + j] = static_cast<int8_t>(v);
        sum += v;
      }
      sum16[2 * b + h] = sum;
    }
  }
}

size_t QuantizedRowsBytes(int64_t rows, int64_t cols) {
  return Align64(rows * cols) + Align64(rows * (cols / kActBlock) * sizeof(float)) +
         Align64(rows * (cols / 16) * sizeof(int32_t));
}

QuantizedRows CarveQuantizedRows(void* buffer, int64_t rows, int64_t cols) {
  QuantizedRows r;
  r.rows = rows;
  r.cols = cols;
  auto* p = static_cast<uint8_t*>(buffer);
  r.q = reinterpret_cast<int8_t*>(p);
  p += Align64(rows * cols);
  r.scale = reinterpret_cast<float*>(p);
  p += Align64(rows * (cols / kActBlock) * sizeof(float));
  r.sum16 = reinterpret_cast<int32_t*>(p);
  return r;
}

void QuantizeRows(const float* x, int64_t x_stride, int64_t num_rows, const QuantizedRows& out) {
  const QuantizeRowFn quantize = BestQuantizeRow();
  for (int64_t r = 0; r < num_rows; ++r) {
    quantize(x + r * x_stride, out.cols, out.q + r * out.cols,
             out.scale + r * (out.cols / kActBlock), out.sum16 + r * (out.cols / 16));
  }
}

void QuantizeGatheredRows(const float* x, int64_t x_stride, const int32_t* row_ids,
                          int64_t num_rows, const QuantizedRows& out) {
  const QuantizeRowFn quantize = BestQuantizeRow();
  for (int64_t i = 0; i < num_rows; ++i) {
    quantize(x + row_ids[i] * x_stride, out.cols, out.q + i * out.cols,
             out.scale + i * (out.cols / kActBlock), out.sum16 + i * (out.cols / 16));
  }
}

}  // namespace dllm
