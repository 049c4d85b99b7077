// Attention kernel compiled for the avx2 level (flags in kernels/CMakeLists.txt):
// kernels/attention_impl.h on 8-float vectors, 4 keys or columns per inner loop.
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>

#include "kernels/attention.h"

namespace dllm {
namespace {
#define DLLM_ATTN_WIDTH 8
#define DLLM_ATTN_UNROLL 4
#include "kernels/attention_impl.h"
}  // namespace

void AttentionAvx2(const AttentionShape& shape, const float* q, const float* k, const float* v,
                   float* out, int head, int q_begin, int q_end, const KeyRange* row_keys,
                   float* scratch) {
  AttentionBlock(shape, q, k, v, out, head, q_begin, q_end, row_keys, scratch);
}

}  // namespace dllm
