// Runs a whole generation through the production DenoiseSession with
// scripted logits, and records what each step committed: the harness of the
// sampler tests and the official-run replays.
#ifndef DLLM_TESTS_TESTING_SESSION_TRACE_H_
#define DLLM_TESTS_TESTING_SESSION_TRACE_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/session/denoise_session.h"

namespace dllm::testing {

struct StepRecord {
  int step = 0;
  std::vector<int32_t> positions;  // ascending canvas positions
  std::vector<int32_t> tokens;
};

struct GenerationTrace {
  std::vector<int32_t> canvas;    // final canvas, prompt included
  std::vector<StepRecord> steps;  // one per Advance(), including those that commit nothing
  int n_forward = 0;              // logits calls
  bool early_exited = false;
};

// Advances `session` until done, recording every step.
absl::StatusOr<GenerationTrace> RunToEnd(DenoiseSession& session);

// The same over scripted logits. The session's model facts come from the config: its family and
// shift_logits, with `special`, `n_vocab` and `n_ctx`.
absl::StatusOr<GenerationTrace> RunSessionToEnd(const SamplerConfig& config,
                                                const SpecialTokens& special,
                                                std::span<const int32_t> prompt, int n_vocab,
                                                int64_t n_ctx, LogitsFn logits);

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_SESSION_TRACE_H_
