// Multi-head attention over a canvas, computed blockwise with an online
// softmax: no L x L score matrix exists in memory, only a per-call scratch
// of `kAttnKeyBlock` scores per query row. Each query row reads every key
// of the canvas, or the range of keys its caller gives it (masks: causal,
// block-causal, a sliding window), and the keys outside every row's range
// of a call cost nothing.
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

constexpr int kAttnQueryBlock = 16;  // query rows computed together (a vector's lanes)
constexpr int kAttnKeyBlock = 64;    // keys scored at a time
// Query rows a caller hands one call (a task's work): the head's K and V are
// staged once per call and read by all its query blocks.
constexpr int kAttnRowsPerCall = 64;

struct AttentionShape {
  int n_tokens = 0;  // canvas length L (keys and values)
  int n_head = 0;
  int n_head_kv = 0;
  int head_dim = 0;
  int q_stride = 0;    // floats between consecutive rows of q
  int kv_stride = 0;   // floats between consecutive rows of k and v
  int out_stride = 0;  // floats between consecutive rows of out
  float scale = 0;     // usually 1/sqrt(head_dim)
};

// The keys [begin, end) one query row reads; never empty.
struct KeyRange {
  int32_t begin = 0;
  int32_t end = 0;
};

// Floats of scratch one call needs over a canvas of up to s.n_tokens
// positions: Q^T, O^T and P^T for one query block, and the head's K and V
// rows staged contiguously, plus 64-byte alignment.
inline int64_t AttentionScratchFloats(const AttentionShape& s) {
  return int64_t{kAttnQueryBlock} * (kAttnKeyBlock + 2 * s.head_dim + 2) +
         2 * int64_t{s.head_dim} * (s.n_tokens + kAttnKeyBlock) + 16;
}

// Writes out[i, head*head_dim .. +head_dim) for query rows
// i in [q_begin, q_end) of `q` (any number; kAttnRowsPerCall is the size
// callers split work into), over the keys and values of rows [0, n_tokens)
// of `k` and `v`, or when `row_keys` is set, query row i over the keys
// [row_keys[i].begin, row_keys[i].end) (indexed like `q`; each inside
// [0, n_tokens) and non-empty). A row whose range is the whole canvas gets
// the same bits either way. The last layer passes only the rows whose
// logits are needed, compacted into `q`. `scratch` holds
// AttentionScratchFloats(shape).
using AttentionFn = void (*)(const AttentionShape& shape, const float* q, const float* k,
                             const float* v, float* out, int head, int q_begin, int q_end,
                             const KeyRange* row_keys, float* scratch);

// The implementation for `level` (AMX uses the AVX-512 one).
AttentionFn SelectAttention(IsaLevel level);

}  // namespace dllm

#endif  // DLLM_KERNELS_ATTENTION_H_
