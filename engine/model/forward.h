// One forward pass of a LLaDA or Dream model over a whole canvas
// (bidirectional attention, no KV cache), producing logits only for the
// rows asked for. Activations are allocated once per canvas-size class and
// reused; Forward() itself allocates nothing after the first call per thread.
#ifndef DLLM_ENGINE_MODEL_FORWARD_H_
#define DLLM_ENGINE_MODEL_FORWARD_H_

#include <atomic>
#include <cstdint>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/types/span.h"
#include "engine/model/model.h"

namespace dllm {

// Every buffer one forward pass needs for canvases of up to `max_tokens`.
// One thread at a time.
class Activations {
 public:
  static absl::StatusOr<Activations> Create(const ModelConfig& config, int max_tokens);
  // Bytes `Create(config, max_tokens)` would allocate (for `inspect --canvas`).
  static size_t BytesFor(const ModelConfig& config, int max_tokens);

  int max_tokens() const { return max_tokens_; }
  size_t bytes() const { return buffer_.size() * sizeof(float); }

 private:
  friend absl::Status Forward(const Model&, Activations&, absl::Span<const int32_t>,
                              absl::Span<const int32_t>, float*, const std::atomic<bool>*);
  int max_tokens_ = 0;
  std::vector<float> buffer_;
  // Views into `buffer_`, each (max_tokens, width).
  float* x_ = nullptr;     // residual stream (n_embd)
  float* h_ = nullptr;     // normed input of a block (n_embd)
  float* q_ = nullptr;     // (q_dim)
  float* k_ = nullptr;     // (kv_dim)
  float* v_ = nullptr;     // (kv_dim)
  float* attn_ = nullptr;  // attention output (q_dim)
  float* gate_ = nullptr;  // (n_ff)
  float* up_ = nullptr;    // (n_ff)
  float* rope_cos_ = nullptr;  // (max_tokens, head_dim / 2)
  float* rope_sin_ = nullptr;
};

// Runs the model over `tokens` (the canvas) and writes logits for the
// positions in `logit_rows` (ascending, unique) to `logits`
// (logit_rows.size() x n_vocab, row-major). Unshifted: row i is the output at
// position i. Returns CANCELLED when `cancel` is set (checked between
// layers), INVALID_ARGUMENT for out-of-range tokens or rows.
absl::Status Forward(const Model& model, Activations& act, absl::Span<const int32_t> tokens,
                     absl::Span<const int32_t> logit_rows, float* logits,
                     const std::atomic<bool>* cancel = nullptr);

}  // namespace dllm

#endif  // DLLM_ENGINE_MODEL_FORWARD_H_
