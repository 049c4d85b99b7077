// RunGeneration: a whole denoising generation driven by a logits callback.
// It is the reference driver for DenoiseSampler (the engine's scheduler runs
// the same loop with its own forward) and the replay harness for tests: a
// fake or recorded LogitsFn exercises the sampler without a model.
#ifndef DLLM_ENGINE_SAMPLER_GENERATE_LOOP_H_
#define DLLM_ENGINE_SAMPLER_GENERATE_LOOP_H_

#include <cstdint>
#include <functional>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

// Computes the logits of `rows` (ascending canvas positions) for `canvas`
// into `out` (rows.size() x n_vocab, row-major), unshifted: raw model output
// at each row. Called twice per step under CFG (conditional, then the
// unconditional canvas).
using LogitsFn = std::function<absl::Status(std::span<const int32_t> canvas,
                                            std::span<const int32_t> rows, std::span<float> out)>;

struct StepRecord {
  int step = 0;
  std::vector<int32_t> positions;  // ascending
  std::vector<int32_t> tokens;
};

struct GenerationTrace {
  std::vector<int32_t> canvas;  // final canvas, prompt included
  std::vector<StepRecord> steps;  // one per Step(), including those that commit nothing
  int n_forward = 0;              // LogitsFn calls
  bool early_exited = false;      // stopped by config.early_exit before the schedule ended
};

absl::StatusOr<GenerationTrace> RunGeneration(const SamplerConfig& config,
                                              const SpecialTokens& special,
                                              std::span<const int32_t> prompt, int n_vocab,
                                              int64_t n_ctx, const LogitsFn& logits_fn);

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_GENERATE_LOOP_H_
