// Activations: every buffer one forward pass works in, as one 64-byte
// aligned block cut into named views (gemma.cpp's `Activations`,
// llama2.c's `RunState`). Sized once by a row budget, the most canvas rows
// one pass computes over all its sequences; a pass over fewer rows uses the
// first rows of each view. Widths are the widest any layer needs (a layer
// uses the first `its width` floats of each row, at its own stride). The
// K/V a sequence keeps between passes lives in its own KvCache, not here.
#ifndef DLLM_ENGINE_MODEL_ACTIVATIONS_H_
#define DLLM_ENGINE_MODEL_ACTIVATIONS_H_

#include <cstddef>
#include <cstdint>
#include <cstdlib>
#include <memory>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/model/moe_routing.h"
#include "kernels/attention.h"
#include "kernels/quantize_act.h"

namespace dllm {

// Int8 activation scratch, one per distinct projection input: each input is
// quantized once and read by every int8 projection of it (q/k/v read
// kXqAttnIn, gate/up kXqFfnIn, an expert's gate/up its gathered rows in
// kXqFfnIn). kXqRows holds gathered rows of another input: the last layer's
// query rows (while k/v read kXqAttnIn), then the head's rows, and the
// router's input.
enum XqSlot { kXqAttnIn, kXqRows, kXqO, kXqFfnIn, kXqDown, kNumXq };

class Activations {
 public:
  // INVALID_ARGUMENT for a budget below 1; RESOURCE_EXHAUSTED when the
  // block cannot be allocated.
  static absl::StatusOr<std::unique_ptr<Activations>> Create(const ModelConfig& config,
                                                             int max_rows);
  // The bytes Create(config, max_rows) allocates.
  static size_t Bytes(const ModelConfig& config, int max_rows);

  int max_rows() const { return max_rows_; }
  size_t bytes() const { return bytes_; }

  // Each view is (max_rows, width), row-major.
  float* x = nullptr;     // residual stream (n_embd)
  float* h = nullptr;     // normed block input / projection output (n_embd)
  float* q = nullptr;     // (q_dim)
  float* k = nullptr;     // (kv_dim): this pass's keys, before they go to a cache
  float* v = nullptr;     // (kv_dim)
  float* attn = nullptr;  // attention output (q_dim)
  float* gate = nullptr;  // (n_ff: the dense FFN's, or one expert's for the rows it serves)
  float* up = nullptr;    // (n_ff)
  // The keys each query row of a layer reads, when its sequence's mask or
  // the layer's window limits them.
  KeyRange* row_keys = nullptr;  // (max_rows)
  // MoE only (null for dense models).
  float* router_logits = nullptr;    // (n_expert)
  float* route_weights = nullptr;    // (n_expert_used)
  float* expert_out = nullptr;       // (n_embd): one expert's down projection, compacted
  float* moe_sum = nullptr;          // (n_embd): the weighted sum over the row's experts
  int32_t* route_experts = nullptr;  // (max_rows, n_expert_used)
  ExpertGroups groups;               // spans of `group_ints`
  int32_t* group_ints = nullptr;     // (2 x max_rows x n_expert_used + 2 x n_expert + 1)
  float* route_probs = nullptr;      // (3 n_expert) scratch for RouteRow
  int32_t* route_order = nullptr;    // (n_expert) scratch for RouteRow
  // A second FFN output (Gemma 4's dense branch beside the experts and its
  // self-conditioning MLP; LLaDA2's shared expert), and (Gemma 4) a list of
  // computed rows (those taking self-conditioning).
  float* ffn_out = nullptr;          // (n_embd)
  int32_t* selected_rows = nullptr;  // (max_rows)
  // The batch's rows: per computed row its token and RoPE position, and
  // per logits row the computed row it comes from.
  int32_t* row_tokens = nullptr;       // (max_rows)
  int32_t* row_positions = nullptr;    // (max_rows)
  int32_t* logit_rows = nullptr;       // (max_rows)
  int32_t* logit_positions = nullptr;  // (max_rows)
  QuantizedRows xq[kNumXq];

 private:
  struct Free {
    void operator()(uint8_t* p) const { std::free(p); }
  };
  Activations() = default;
  int max_rows_ = 0;
  size_t bytes_ = 0;
  std::unique_ptr<uint8_t, Free> block_;  // the views start at its first 64-byte boundary
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_ACTIVATIONS_H_
