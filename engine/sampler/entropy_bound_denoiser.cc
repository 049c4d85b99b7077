#include "engine/sampler/entropy_bound_denoiser.h"

#include <algorithm>
#include <numeric>

#include "engine/base/status_macros.h"

namespace dllm {

absl::StatusOr<std::unique_ptr<EntropyBoundDenoiser>> EntropyBoundDenoiser::Create(
    const EntropyBoundConfig& config, std::span<const int32_t> prompt, int n_vocab) {
  DLLM_ASSIGN_OR_RETURN(EntropyBoundSampler sampler, EntropyBoundSampler::Create(config, n_vocab));
  return std::unique_ptr<EntropyBoundDenoiser>(
      new EntropyBoundDenoiser(std::move(sampler), prompt));
}

EntropyBoundDenoiser::EntropyBoundDenoiser(EntropyBoundSampler sampler,
                                           std::span<const int32_t> prompt)
    : sampler_(std::move(sampler)), prompt_len_(static_cast<int>(prompt.size())) {
  canvas_.assign(prompt.begin(), prompt.end());
  canvas_.insert(canvas_.end(), sampler_.canvas().begin(), sampler_.canvas().end());
  rows_.resize(sampler_.canvas().size());
  std::iota(rows_.begin(), rows_.end(), prompt_len_);
}

DenoiserPlan EntropyBoundDenoiser::Plan() const {
  DenoiserPlan plan;
  plan.canvas = canvas_;
  plan.logit_rows = rows_;
  if (sampler_.step() > 0) {
    plan.self_conditioning = prev_logits_;
    plan.self_conditioning_temp_inv = sampler_.prev_temp_inv();
  }
  return plan;
}

StepCommits EntropyBoundDenoiser::Step(std::span<const float> logits, std::span<const float>) {
  sampler_.Step(logits);
  prev_logits_.assign(logits.begin(), logits.end());
  std::copy(sampler_.canvas().begin(), sampler_.canvas().end(), canvas_.begin() + prompt_len_);
  return {rows_, std::span<const int32_t>(canvas_).subspan(static_cast<size_t>(prompt_len_))};
}

}  // namespace dllm
