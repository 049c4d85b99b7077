#include "engine/scheduler/denoise_session.h"

#include <chrono>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace dllm {
namespace {

using Clock = std::chrono::steady_clock;
double Since(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}


}  // namespace

absl::StatusOr<std::unique_ptr<DenoiseSession>> DenoiseSession::Create(
    std::shared_ptr<const Model> model, const SamplerConfig& config, std::vector<int32_t> prompt,
    std::unique_ptr<ForwardPass> pass) {
  const ModelConfig& c = model->config();
  SamplerConfig effective = config;
  effective.family = c.arch;
  for (size_t i = 0; i < prompt.size(); ++i) {
    if (prompt[i] < 0 || prompt[i] >= c.n_vocab) {
      return absl::InvalidArgumentError(absl::StrCat("prompt token ", prompt[i], " at index ", i,
                                                     " is outside the vocabulary of ", c.n_vocab));
    }
  }
  DLLM_ASSIGN_OR_RETURN(DenoiseSampler sampler,
                        DenoiseSampler::Create(effective, c.tokens, prompt,
                                               static_cast<int>(c.n_vocab), c.n_ctx_train));
  const int canvas = static_cast<int>(sampler.canvas().size());
  if (pass == nullptr || pass->max_tokens() < canvas) {
    DLLM_ASSIGN_OR_RETURN(pass, ForwardPass::Create(model, canvas));
  }
  auto session = std::unique_ptr<DenoiseSession>(
      new DenoiseSession(std::move(model), std::move(sampler), std::move(pass)));
  session->logits_.resize(static_cast<size_t>(canvas) * c.n_vocab);
  if (config.cfg_scale > 0) session->uncond_.resize(session->logits_.size());
  return session;
}

DenoiseSession::DenoiseSession(std::shared_ptr<const Model> model, DenoiseSampler sampler,
                               std::unique_ptr<ForwardPass> pass)
    : model_(std::move(model)), sampler_(std::move(sampler)), pass_(std::move(pass)) {}

absl::StatusOr<StepReport> DenoiseSession::Advance(const std::atomic<bool>* cancel) {
  if (sampler_.done()) return absl::FailedPreconditionError("generation already finished");
  StepReport report;
  report.step = sampler_.step();
  const Clock::time_point start = Clock::now();
  const std::span<const int32_t> rows = sampler_.rows();
  const size_t n = rows.size() * static_cast<size_t>(sampler_.n_vocab());
  std::span<const float> logits, uncond;
  if (!rows.empty()) {
    ForwardStats stats;
    DLLM_RETURN_IF_ERROR(pass_->Run(sampler_.canvas(), rows, logits_.data(), cancel, &stats));
    report.forward += stats;
    ++report.forward_passes;
    logits = std::span<const float>(logits_.data(), n);
    if (sampler_.needs_unconditional()) {
      DLLM_RETURN_IF_ERROR(
          pass_->Run(sampler_.unconditional_canvas(), rows, uncond_.data(), cancel, &stats));
      report.forward += stats;
      ++report.forward_passes;
      uncond = std::span<const float>(uncond_.data(), n);
    }
  }
  report.forward_seconds = Since(start);
  const Clock::time_point sample_start = Clock::now();
  const StepCommits commits = sampler_.Step(logits, uncond);
  report.sample_seconds = Since(sample_start);
  positions_.assign(commits.positions.begin(), commits.positions.end());
  tokens_.assign(commits.tokens.begin(), commits.tokens.end());
  report.positions = positions_;
  report.tokens = tokens_;
  const int32_t mask = model_->config().tokens.mask;
  for (size_t p = static_cast<size_t>(sampler_.prompt_len()); p < sampler_.canvas().size(); ++p) {
    report.masked_remaining += sampler_.canvas()[p] == mask;
  }
  forward_passes_ += report.forward_passes;
  report.step_seconds = Since(start);
  return report;
}

std::span<const int32_t> DenoiseSession::OutputTokens() const {
  return dllm::OutputTokens(sampler_.canvas(), sampler_.prompt_len(), sampler_.stop_ids());
}

bool DenoiseSession::exited_early() const { return sampler_.exited_early(); }

}  // namespace dllm
