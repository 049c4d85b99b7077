// The reference driver loop over DenoiseSampler.
#include "engine/sampler/generate_loop.h"

#include <algorithm>

#include "engine/base/status_macros.h"
#include "engine/sampler/denoise_sampler.h"

namespace dllm {

absl::StatusOr<GenerationTrace> RunGeneration(const SamplerConfig& config,
                                              const SpecialTokens& special,
                                              std::span<const int32_t> prompt, int n_vocab,
                                              int64_t n_ctx, const LogitsFn& logits_fn) {
  DLLM_ASSIGN_OR_RETURN(DenoiseSampler sampler,
                        DenoiseSampler::Create(config, special, prompt, n_vocab, n_ctx));
  GenerationTrace trace;
  std::vector<float> logits;
  std::vector<float> uncond;
  while (!sampler.done()) {
    const std::span<const int32_t> rows = sampler.rows();
    logits.resize(rows.size() * static_cast<size_t>(n_vocab));
    if (!rows.empty()) {
      DLLM_RETURN_IF_ERROR(logits_fn(sampler.canvas(), rows, logits));
      ++trace.n_forward;
    }
    if (sampler.needs_unconditional()) {
      uncond.resize(logits.size());
      DLLM_RETURN_IF_ERROR(logits_fn(sampler.unconditional_canvas(), rows, uncond));
      ++trace.n_forward;
    } else {
      uncond.clear();
    }
    const int step = sampler.step();
    const StepCommits commits = sampler.Step(logits, uncond);
    trace.steps.push_back(StepRecord{step, {commits.positions.begin(), commits.positions.end()},
                                     {commits.tokens.begin(), commits.tokens.end()}});
  }
  trace.early_exited = sampler.exited_early();
  trace.canvas.assign(sampler.canvas().begin(), sampler.canvas().end());
  return trace;
}

}  // namespace dllm
