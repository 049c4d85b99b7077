// Non-causal multi-head attention over a whole canvas, computed blockwise
// with an online softmax: no L x L score matrix exists in memory, only a
// per-call scratch of `kAttnKeyBlock` scores per query row.
//
// Numerics: scores, the running max/normaliser and the accumulator are
// float32; exp uses a polynomial accurate to ~2 ulp over the range softmax
// needs (arguments <= 0). Grouped-query attention maps query head h to kv
// head h / (n_head / n_head_kv).
#ifndef DLLM_KERNELS_ATTENTION_H_
#define DLLM_KERNELS_ATTENTION_H_

#include <cstdint>

#include "kernels/cpu_features.h"

namespace dllm {

constexpr int kAttnQueryBlock = 16;  // query rows per call (a task's work)
constexpr int kAttnKeyBlock = 64;    // keys scored at a time

struct AttentionShape {
  int n_tokens = 0;   // canvas length L (keys and values)
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int q_stride = 0;    // floats between consecutive rows of q
  int kv_stride = 0;   // floats between consecutive rows of k and v
  int out_stride = 0;  // floats between consecutive rows of out
  float scale = 0;     // usually 1/sqrt(head_dim)
};

// Floats of scratch one call needs: the most any path uses (the AVX-512
// one: Q^T, O^T, P^T and a key block's K and V rows, plus 64-byte alignment).
inline int64_t AttentionScratchFloats(const AttentionShape& s) {
  return int64_t{kAttnQueryBlock} * (kAttnKeyBlock + 2 * s.head_dim + 2) +
         2 * int64_t{s.head_dim} * kAttnKeyBlock + 16;
}

// Writes out[i, head*head_dim .. +head_dim) for query rows
// i in [q_begin, q_end) of `q`, q_end - q_begin <= kAttnQueryBlock, over
// the keys and values of rows [0, n_tokens) of `k` and `v`. The last layer
// passes only the rows whose logits are needed, compacted into `q`.
using AttentionFn = void (*)(const AttentionShape& shape, const float* q, const float* k,
                             const float* v, float* out, int head, int q_begin, int q_end,
                             float* scratch);

// The implementation for `level` (AMX uses the AVX-512 one).
AttentionFn SelectAttention(IsaLevel level);

}  // namespace dllm

#endif  // DLLM_KERNELS_ATTENTION_H_
