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

#include <atomic>
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
  // Where its logits go: logit_rows.size() rows of n_vocab floats, in order.
  float* logits = nullptr;
  // When set and true at a layer boundary, the pass drops the sequence:
  // from then on it reads nothing of it (canvas, cache) and writes nothing
  // to it (cache, logits), so its owner may free them as soon as it has
  // set the flag and the pass has reached the boundary. Its rows still
  // ride through the GEMMs, which changes no other row's result.
  const std::atomic<bool>* stop = nullptr;
};

struct ForwardBatch {
  std::vector<SequenceInput> sequences;

  // Points the sequences' logits at `base`, one after the other (each its
  // logit rows of n_vocab floats): one buffer for the whole batch.
  void PackLogits(float* base, int64_t n_vocab) {
    for (SequenceInput& s : sequences) {
      s.logits = base;
      base += static_cast<int64_t>(s.logit_rows.size()) * n_vocab;
    }
  }

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
