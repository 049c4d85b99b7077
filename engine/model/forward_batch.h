// ForwardBatch: the sequences one forward pass computes. Their computed rows
// are stacked for every GEMM (projections, FFN, MoE experts, the output
// head); attention, RoPE positions and the K/V caches stay per sequence, so
// a row's result never depends on the other sequences in the batch.
//
// Every sequence today attends bidirectionally to its whole canvas, and
// every layer is of its model's one kind. Models that mix layer kinds
// (sliding and global attention) or need per-sequence masks (block-causal,
// a causal prompt before a bidirectional canvas) add a kind per layer in
// the model and a mask kind here, read by the layer function: not as
// branches in the shared layer.
#ifndef DLLM_ENGINE_MODEL_FORWARD_BATCH_H_
#define DLLM_ENGINE_MODEL_FORWARD_BATCH_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/model/kv_cache.h"

namespace dllm {

struct SequenceInput {
  // The sequence's canvas: the token at every position, which is also its
  // RoPE position. Attention reads keys for all of it.
  std::span<const int32_t> tokens;
  // The positions computed in this pass: [row_begin, row_end). Their keys
  // and values are written to `cache` (when set) before attention reads it.
  int32_t row_begin = 0;
  int32_t row_end = 0;
  // The positions whose logits are wanted: ascending, unique, inside the
  // computed rows. Unshifted: row p's logits are the output at position p.
  std::span<const int32_t> logit_rows;
  // Null: the keys are this pass's own rows, which must then be the whole
  // canvas (exact decoding). Set: the rows not computed are read from the
  // cache as the pass that last wrote them left them; `n_pos` >= canvas.
  KvCache* cache = nullptr;
};

// The logits come back in one buffer: sequence after sequence, each its
// logit rows in order, n_vocab floats a row.
struct ForwardBatch {
  std::vector<SequenceInput> sequences;

  int64_t rows() const {
    int64_t n = 0;
    for (const SequenceInput& s : sequences) n += s.row_end - s.row_begin;
    return n;
  }
  int64_t logit_rows() const {
    int64_t n = 0;
    for (const SequenceInput& s : sequences) n += static_cast<int64_t>(s.logit_rows.size());
    return n;
  }
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_FORWARD_BATCH_H_
