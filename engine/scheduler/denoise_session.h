// DenoiseSession: one generation request end to end — the sampler's canvas,
// the forward pass that feeds it, and per-step timings. The CLI's
// `generate` and the gRPC service both drive generations through it.
#ifndef DLLM_ENGINE_SCHEDULER_DENOISE_SESSION_H_
#define DLLM_ENGINE_SCHEDULER_DENOISE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/forward.h"
#include "engine/model/model.h"
#include "engine/sampler/denoise_sampler.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

// What one Advance() did. Spans are valid until the next Advance().
struct StepReport {
  int step = 0;                         // 0-based
  std::span<const int32_t> positions;   // committed this step, ascending
  std::span<const int32_t> tokens;
  int masked_remaining = 0;             // in the generated region
  int forward_passes = 0;               // 0 (nothing to commit), 1, or 2 (CFG)
  double forward_seconds = 0;
  double sample_seconds = 0;
  double step_seconds = 0;
  ForwardStats forward;                 // summed over this step's passes
};

// One thread at a time. The ForwardPass must have been created in the task
// arena that Advance() runs in.
class DenoiseSession {
 public:
  // Validates `config` against the prompt and the model's context, then
  // sizes the sampler and (when `pass` is null) a ForwardPass for the canvas.
  static absl::StatusOr<std::unique_ptr<DenoiseSession>> Create(
      std::shared_ptr<const Model> model, const SamplerConfig& config,
      std::vector<int32_t> prompt, std::unique_ptr<ForwardPass> pass = nullptr);

  bool done() const { return sampler_.done(); }
  // Runs one denoising step. CANCELLED if `cancel` is set during the forward
  // (the session is then unusable).
  absl::StatusOr<StepReport> Advance(const std::atomic<bool>* cancel = nullptr);

  std::span<const int32_t> canvas() const { return sampler_.canvas(); }
  int prompt_len() const { return sampler_.prompt_len(); }
  const DenoiseSampler& sampler() const { return sampler_; }
  // Generated tokens up to the first stop token (EOS/EoT).
  std::span<const int32_t> OutputTokens() const;
  // Whether the loop stopped before its last scheduled step (early exit).
  bool exited_early() const;
  int forward_passes() const { return forward_passes_; }

 private:
  DenoiseSession(std::shared_ptr<const Model> model, DenoiseSampler sampler,
                 std::unique_ptr<ForwardPass> pass);

  std::shared_ptr<const Model> model_;
  DenoiseSampler sampler_;
  std::unique_ptr<ForwardPass> pass_;
  std::vector<float> logits_;  // (canvas, n_vocab): the most rows a step can ask for
  std::vector<float> uncond_;  // CFG only
  std::vector<int32_t> positions_, tokens_;
  int forward_passes_ = 0;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SCHEDULER_DENOISE_SESSION_H_
