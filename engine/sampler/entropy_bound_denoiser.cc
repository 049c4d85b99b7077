#include "engine/sampler/entropy_bound_denoiser.h"

#include <algorithm>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace dllm {

int CanvasesFor(int64_t tokens, int canvas_length) {
  return static_cast<int>(std::max<int64_t>(1, (tokens + canvas_length - 1) / canvas_length));
}

size_t TrimCanvas(std::span<const int32_t> canvas, std::span<const int32_t> stop_ids) {
  const size_t n = canvas.size();
  size_t cut = n;
  for (size_t i = 0; i < n; ++i) {
    if (std::find(stop_ids.begin(), stop_ids.end(), canvas[i]) != stop_ids.end()) {
      cut = i;
      break;
    }
  }
  constexpr size_t kLoopRepeats = 6;
  for (size_t i = 0; i + 1 < cut; ++i) {
    for (size_t stride = 1; stride <= 2; ++stride) {
      size_t repeats = 0;
      for (size_t j = i; j + stride < n && canvas[j] == canvas[j + stride]; j += stride) ++repeats;
      if (repeats >= kLoopRepeats) return i;
    }
  }
  return cut;
}

absl::StatusOr<std::unique_ptr<EntropyBoundDenoiser>> EntropyBoundDenoiser::Create(
    const EntropyBoundConfig& config, std::span<const int32_t> prompt, int n_vocab, CanvasRun run) {
  if (run.max_canvases < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("canvases: ", run.max_canvases, " must be >= 1"));
  }
  DLLM_ASSIGN_OR_RETURN(EntropyBoundSampler sampler, EntropyBoundSampler::Create(config, n_vocab));
  return std::unique_ptr<EntropyBoundDenoiser>(
      new EntropyBoundDenoiser(std::move(sampler), prompt, std::move(run)));
}

EntropyBoundDenoiser::EntropyBoundDenoiser(EntropyBoundSampler sampler,
                                           std::span<const int32_t> prompt, CanvasRun run)
    : sampler_(std::move(sampler)),
      run_(std::move(run)),
      original_prompt_len_(static_cast<int>(prompt.size())),
      prompt_len_(static_cast<int>(prompt.size())) {
  canvas_.assign(prompt.begin(), prompt.end());
  StartCanvas();
}

void EntropyBoundDenoiser::StartCanvas() {
  if (canvases_ > 0) {
    // The reference builds a new sampler per canvas: the same seed again.
    absl::StatusOr<EntropyBoundSampler> fresh =
        EntropyBoundSampler::Create(sampler_.config(), sampler_.n_vocab());
    sampler_ = std::move(*fresh);  // the config validated at Create()
  }
  ++canvases_;
  canvas_.resize(static_cast<size_t>(prompt_len_));
  canvas_.insert(canvas_.end(), sampler_.canvas().begin(), sampler_.canvas().end());
  rows_.resize(sampler_.canvas().size());
  std::iota(rows_.begin(), rows_.end(), prompt_len_);
  prev_logits_.clear();
  output_ = response_;
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
  const EntropyBoundStep step = sampler_.Step(logits);
  ++steps_;
  last_argmax_.assign(step.argmax.begin(), step.argmax.end());
  int accepted = 0;
  double entropy = 0;
  for (size_t p = 0; p < step.accepted.size(); ++p) {
    accepted += step.accepted[p];
    entropy += step.entropy[p];
  }
  last_step_ = {canvases_ - 1, step.temperature, accepted,
                static_cast<float>(entropy / std::max<size_t>(1, step.entropy.size())),
                last_argmax_};
  prev_logits_.assign(logits.begin(), logits.end());
  std::copy(sampler_.canvas().begin(), sampler_.canvas().end(), canvas_.begin() + prompt_len_);
  output_ = response_;
  output_.insert(output_.end(), sampler_.output().begin(), sampler_.output().end());
  // Kept apart: a finished canvas may start the next one before the caller reads them.
  commit_positions_ = rows_;
  commit_tokens_.assign(canvas_.begin() + prompt_len_, canvas_.end());
  if (sampler_.done()) FinishCanvas();
  return {commit_positions_, commit_tokens_};
}

void EntropyBoundDenoiser::FinishCanvas() {
  const std::span<const int32_t> argmax = sampler_.output();
  const size_t cut = TrimCanvas(argmax, run_.stop_ids);
  response_.insert(response_.end(), argmax.begin(), argmax.begin() + static_cast<ptrdiff_t>(cut));
  output_ = response_;
  const int64_t next_end = int64_t{prompt_len_} + 2 * static_cast<int64_t>(argmax.size());
  if (cut < argmax.size() || canvases_ >= run_.max_canvases ||
      (run_.context > 0 && next_end > run_.context)) {
    done_ = true;
    return;
  }
  // The whole argmax canvas joins the prompt (what the reference commits).
  std::copy(argmax.begin(), argmax.end(), canvas_.begin() + prompt_len_);
  prompt_len_ += static_cast<int>(argmax.size());
  StartCanvas();
}

}  // namespace dllm
