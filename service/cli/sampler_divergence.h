// How far diffuse-rs's masked stand-in lands from DiffusionGemma's own
// entropy-bound sampler (`dllm eval --divergence --sampler masked` on a
// canvas model). Per prompt both write one canvas after it: the real
// sampler with the file's settings (exact prompt cache), the stand-in as
// masked denoising of canvas_length positions with the given settings, and
// the two answers (each up to its first stop token) are compared position
// by position. The two draw from different random streams, so only an
// agreement a sampler could not reach by chance says the stand-in stands in.
#ifndef DLLM_SERVICE_CLI_SAMPLER_DIVERGENCE_H_
#define DLLM_SERVICE_CLI_SAMPLER_DIVERGENCE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/sampler/entropy_bound_sampler.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

struct SamplerDivergence {
  int runs = 0;
  int canvas_length = 0;
  // Share of canvas positions where the answers agree, all runs (a position
  // past both answers' ends agrees; past one answer's end it differs).
  double identical_tokens = 0;
  int identical_answers = 0;         // runs whose answers are equal
  double first_difference_mean = 0;  // per run; canvas_length when none
  double real_length_mean = 0;       // answer tokens
  double stand_in_length_mean = 0;
  int real_steps = 0;  // steps, all runs
  int stand_in_steps = 0;
};

absl::StatusOr<SamplerDivergence> MeasureSamplerDivergence(
    const std::shared_ptr<const Model>& model, const EntropyBoundConfig& real,
    const SamplerConfig& stand_in, const std::vector<std::vector<int32_t>>& prompts, int threads);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_SAMPLER_DIVERGENCE_H_
