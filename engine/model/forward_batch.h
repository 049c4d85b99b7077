// ForwardBatch: the sequences one forward pass computes. Their computed rows
// are stacked for every GEMM (projections, FFN, MoE experts, the output
// head); attention, RoPE positions and the K/V caches stay per sequence, so
// a row's result never depends on the other sequences in the batch.
//
// Each sequence carries its attention mask: which keys a query row at
// canvas position p may read. A layer of the sliding kind (LayerConfig)
// narrows that further to its window. The attention kernel gets each row's
// key range, so a mask costs no work on the keys it hides.
#ifndef DLLM_ENGINE_MODEL_FORWARD_BATCH_H_
#define DLLM_ENGINE_MODEL_FORWARD_BATCH_H_

#include <atomic>
#include <cstdint>
#include <span>
#include <vector>

#include "absl/strings/string_view.h"
#include "engine/model/kv_cache.h"
#include "kernels/attention.h"

namespace dllm {

// Each mask splits the canvas into bidirectional regions read in order:
// a row reads its own region and every position before it.
enum class MaskKind {
  // One region, the whole canvas (LLaDA, Dream).
  kBidirectional,
  // Regions of `block_length` positions: row p reads
  // [0, (p / block_length + 1) * block_length) (LLaDA2).
  kBlockCausal,
  // Each prompt row p < prompt_length is a region of its own (it reads
  // [0, p]), then the canvas after the prompt is one region (it reads
  // everything): DiffusionGemma's causal prompt encoder.
  kPromptCausal,
};
absl::string_view MaskKindName(MaskKind kind);  // "bidirectional", "block-causal", "prompt-causal"

struct AttentionMask {
  MaskKind kind = MaskKind::kBidirectional;
  int32_t block_length = 0;   // kBlockCausal, >= 1
  int32_t prompt_length = 0;  // kPromptCausal, in [0, canvas]
};

// The keys row `p` of a canvas of `n` positions reads under `mask` in a
// layer whose sliding window is `window` (0: none). A window never cuts
// the row's own region; it keeps only the last window - 1 positions before
// the region (llama.cpp's standard window, q - k < window, for a causal
// row; for DiffusionGemma's canvas, the last window - 1 prompt positions).
// Never empty: a row always reads itself.
KeyRange KeysOf(const AttentionMask& mask, int32_t window, int32_t p, int32_t n);
// Whether every row of a canvas of `n` reads the whole canvas whatever the
// window (one region), so the kernel need not be given ranges.
bool ReadsWholeCanvas(const AttentionMask& mask, int32_t n);

struct SequenceInput {
  // The sequence's canvas: the token at every position, which is also its
  // RoPE position. Attention reads keys for as much of it as `mask` allows.
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
  // Which keys each row reads (bidirectional: the whole canvas).
  AttentionMask mask;
  // Self-conditioning (DiffusionGemma): the previous step's logits of
  // `logit_rows` (rows x n_vocab), which the model folds into the inputs of
  // those rows at `self_conditioning_temp_inv`; empty: none. A model without
  // self-conditioning weights refuses it.
  std::span<const float> self_conditioning;
  float self_conditioning_temp_inv = 1.0f;
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
