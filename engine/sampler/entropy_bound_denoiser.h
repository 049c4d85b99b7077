// EntropyBoundDenoiser: DiffusionGemma's entropy-bound sampler
// (EntropyBoundSampler, which knows only one canvas) as a Denoiser over the
// whole sequence: the prompt, then canvas after canvas of canvas_length
// positions that every step rewrites. Each step's forward reads every
// canvas row's logits and, from the second step on, self-conditions on the
// previous step's logits at the previous step's temperature.
//
// Canvas after canvas, as the reference's llama-diffusion-cli does: when a
// canvas is done its argmax tokens are trimmed (TrimCanvas); the kept
// tokens join the response, and if the whole canvas was kept and more
// canvases are allowed (and fit the context), it joins the prompt, a fresh
// sampler with the same seed starts the next canvas after it, and the
// forward encodes it as prompt (causal, the encoder's layer scalars).
#ifndef DLLM_ENGINE_SAMPLER_ENTROPY_BOUND_DENOISER_H_
#define DLLM_ENGINE_SAMPLER_ENTROPY_BOUND_DENOISER_H_

#include <cstdint>
#include <memory>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/sampler/denoiser.h"
#include "engine/sampler/entropy_bound_sampler.h"

namespace dllm {

// How far a generation may run past its first canvas.
struct CanvasRun {
  int max_canvases = 1;  // >= 1; the reference CLI's ceil(n_predict / canvas_length)
  // No canvas starts unless prompt + canvas fits (the model's context).
  int64_t context = 0;
  // Tokens that end the response (SpecialTokens::StopIds).
  std::vector<int32_t> stop_ids;
};

// The canvases an answer of up to `tokens` tokens may take (the reference
// CLI's ceil(n_predict / canvas_length)); at least one.
int CanvasesFor(int64_t tokens, int canvas_length);

// How much of a finished canvas's argmax tokens the response keeps: up to
// the first stop token, and then up to where a repetition loop begins (a
// token that repeats at stride 1 or 2 at least six times in a row, the
// count running to the canvas end). The reference CLI's rule.
size_t TrimCanvas(std::span<const int32_t> canvas, std::span<const int32_t> stop_ids);

// What one Step() did to its canvas (stream events show it).
struct CanvasStepSummary {
  int canvas = 0;          // 0-based: the canvas the step rewrote
  float temperature = 0;   // the step's
  int accepted = 0;        // positions that took their sample (the rest were renoised)
  float mean_entropy = 0;  // nats, over the canvas
  // The canvas's argmax tokens after the step: what it outputs if it ends here.
  std::span<const int32_t> argmax;
};

class EntropyBoundDenoiser : public Denoiser {
 public:
  // INVALID_ARGUMENT for settings EntropyBoundConfig::Validate refuses, or
  // a run of no canvas.
  static absl::StatusOr<std::unique_ptr<EntropyBoundDenoiser>> Create(
      const EntropyBoundConfig& config, std::span<const int32_t> prompt, int n_vocab,
      CanvasRun run = {});

  bool done() const override { return done_; }
  int step() const override { return steps_; }
  // The prompt and the canvases already finished.
  int prompt_len() const override { return prompt_len_; }
  int gen_end() const override { return static_cast<int>(canvas_.size()); }
  std::span<const int32_t> canvas() const override { return canvas_; }
  DenoiserPlan Plan() const override;
  // Every canvas position is rewritten: the commits are all of them.
  StepCommits Step(std::span<const float> logits, std::span<const float> uncond) override;
  // The response: the finished canvases as trimmed, then the current
  // canvas's argmax tokens.
  std::span<const int32_t> Output() const override { return output_; }

  const EntropyBoundSampler& sampler() const { return sampler_; }
  const CanvasRun& run() const { return run_; }
  // The finished canvases as kept: the part of Output() no later step changes.
  std::span<const int32_t> response() const { return response_; }
  int canvases() const { return canvases_; }  // started so far
  // The last Step()'s (valid until the next; empty before the first).
  const CanvasStepSummary& last_step() const { return last_step_; }
  // The prompt's length (before any canvas joined it).
  int original_prompt_len() const { return original_prompt_len_; }

 private:
  EntropyBoundDenoiser(EntropyBoundSampler sampler, std::span<const int32_t> prompt, CanvasRun run);
  // Starts the canvas after the current prompt.
  void StartCanvas();
  // The canvas finished: trims it and starts the next or ends the run.
  void FinishCanvas();

  EntropyBoundSampler sampler_;
  CanvasRun run_;
  int original_prompt_len_ = 0;
  int prompt_len_ = 0;
  int canvases_ = 0;
  int steps_ = 0;
  bool done_ = false;
  std::vector<int32_t> canvas_;     // the prompt, then the sampler's canvas
  std::vector<int32_t> rows_;       // the canvas rows: [prompt_len, canvas end)
  std::vector<float> prev_logits_;  // the last step's logits (rows x n_vocab)
  std::vector<int32_t> response_;   // the finished canvases, trimmed
  std::vector<int32_t> output_;     // response_, then the current argmax canvas
  std::vector<int32_t> commit_positions_, commit_tokens_;  // the last Step()'s
  std::vector<int32_t> last_argmax_;                       // last_step_.argmax
  CanvasStepSummary last_step_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_ENTROPY_BOUND_DENOISER_H_
