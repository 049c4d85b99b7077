// One forward pass of a diffusion LM (dense or MoE) over a whole canvas
// (bidirectional attention, no KV cache), producing logits only for the
// rows asked for. A `ForwardPass` owns the activation buffers of one
// canvas-size class and the per-layer task graph, both built once; Run()
// allocates nothing after its first call.
#ifndef DLLM_ENGINE_MODEL_FORWARD_H_
#define DLLM_ENGINE_MODEL_FORWARD_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include <span>
#include "engine/model/model.h"

namespace dllm {

// Wall time per kind of work, summed over layers (seconds). Concurrent nodes
// of one kind (q/k/v, gate/up) count once; nodes of different kinds never
// overlap, so the parts add up to `total` less scheduling overhead.
struct ForwardStats {
  double embed = 0;
  double norm = 0;         // RMSNorms (attention, FFN, output)
  double projections = 0;  // q, k, v, o GEMMs plus bias and RoPE
  double attention = 0;
  double ffn = 0;          // gate, up, SwiGLU, down (MoE: routing and the experts too)
  double head = 0;         // output projection to the vocabulary
  double total = 0;

  ForwardStats& operator+=(const ForwardStats& o) {
    embed += o.embed, norm += o.norm, projections += o.projections;
    attention += o.attention, ffn += o.ffn, head += o.head, total += o.total;
    return *this;
  }
};

// What a forward pass checks between layers, on the calling thread: first
// `poll` (when set), then `cancel`; a set `cancel` ends the pass with
// CANCELLED. The server's poll ends other requests' cancellations and
// deadlines while this one runs, and sets `cancel` when this request's own
// deadline passes, so neither waits behind a step.
struct LayerCheck {
  const std::atomic<bool>* cancel = nullptr;
  std::function<void()> poll;
};

class ForwardPass {
 public:
  // Allocates buffers for canvases of up to `max_tokens` and builds the
  // layer graph. Call from the tbb::task_arena that will call Run().
  static absl::StatusOr<std::unique_ptr<ForwardPass>> Create(std::shared_ptr<const Model> model,
                                                             int max_tokens);
  // Activation bytes `Create(model, max_tokens)` allocates (for `inspect --canvas`).
  static size_t ActivationBytes(const ModelConfig& config, int max_tokens);

  ~ForwardPass();

  // Runs the model over `tokens` and writes logits for the positions in
  // `logit_rows` (ascending, unique) to `logits` (logit_rows.size() x n_vocab,
  // row-major, unshifted: row i is the output at position i). CANCELLED when
  // `check` stops it (between layers); INVALID_ARGUMENT for bad tokens or
  // rows. One thread at a time.
  absl::Status Run(std::span<const int32_t> tokens, std::span<const int32_t> logit_rows,
                   float* logits, const LayerCheck* check = nullptr,
                   ForwardStats* stats = nullptr);

  int max_tokens() const;
  size_t activation_bytes() const;

 private:
  struct Impl;
  explicit ForwardPass(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_FORWARD_H_
