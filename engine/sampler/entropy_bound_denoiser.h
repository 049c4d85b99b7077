// EntropyBoundDenoiser: DiffusionGemma's entropy-bound sampler
// (EntropyBoundSampler, which knows only the canvas after the prompt) as a
// Denoiser over the whole canvas: the prompt, then canvas_length positions
// that every step rewrites. Each step's forward reads every canvas row's
// logits and, from the second step on, self-conditions on the previous
// step's logits at the previous step's temperature.
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

class EntropyBoundDenoiser : public Denoiser {
 public:
  // INVALID_ARGUMENT for settings EntropyBoundConfig::Validate refuses.
  static absl::StatusOr<std::unique_ptr<EntropyBoundDenoiser>> Create(
      const EntropyBoundConfig& config, std::span<const int32_t> prompt, int n_vocab);

  bool done() const override { return sampler_.done(); }
  int step() const override { return sampler_.step(); }
  int prompt_len() const override { return prompt_len_; }
  int gen_end() const override { return static_cast<int>(canvas_.size()); }
  std::span<const int32_t> canvas() const override { return canvas_; }
  DenoiserPlan Plan() const override;
  // Every canvas position is rewritten: the commits are all of them.
  StepCommits Step(std::span<const float> logits, std::span<const float> uncond) override;
  // The argmax canvas of the last step.
  std::span<const int32_t> Output() const override { return sampler_.output(); }

  const EntropyBoundSampler& sampler() const { return sampler_; }

 private:
  EntropyBoundDenoiser(EntropyBoundSampler sampler, std::span<const int32_t> prompt);

  EntropyBoundSampler sampler_;
  int prompt_len_ = 0;
  std::vector<int32_t> canvas_;     // the prompt, then the sampler's canvas
  std::vector<int32_t> rows_;       // the canvas rows: [prompt_len, canvas end)
  std::vector<float> prev_logits_;  // the last step's logits (rows x n_vocab)
};

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_ENTROPY_BOUND_DENOISER_H_
