#include "tests/testing/session_trace.h"

#include <utility>

#include "engine/base/status_macros.h"

namespace dllm::testing {

absl::StatusOr<GenerationTrace> RunSessionToEnd(const SamplerConfig& config,
                                                const SpecialTokens& special,
                                                std::span<const int32_t> prompt, int n_vocab,
                                                int64_t n_ctx, LogitsFn logits) {
  const SessionModel model{config.family, config.shift_logits, special, n_vocab, n_ctx};
  DLLM_ASSIGN_OR_RETURN(
      std::unique_ptr<DenoiseSession> session,
      DenoiseSession::Create(model, config, std::vector<int32_t>(prompt.begin(), prompt.end()),
                             FunctionLogits(std::move(logits), n_vocab)));
  return RunToEnd(*session);
}

absl::StatusOr<GenerationTrace> RunToEnd(DenoiseSession& session) {
  GenerationTrace trace;
  while (!session.done()) {
    DLLM_ASSIGN_OR_RETURN(StepReport report, session.Advance());
    trace.steps.push_back(StepRecord{report.step,
                                     {report.positions.begin(), report.positions.end()},
                                     {report.tokens.begin(), report.tokens.end()}});
  }
  trace.canvas.assign(session.canvas().begin(), session.canvas().end());
  trace.n_forward = session.forward_passes();
  trace.early_exited = session.exited_early();
  return trace;
}

}  // namespace dllm::testing
