// Command-line settings of DiffusionGemma's entropy-bound sampler, over the
// file's own (diffusion.eb_* keys, EntropyBoundConfigFromGguf), as the
// reference's llama-diffusion-cli takes them: each flag overrides its key.
#ifndef DLLM_SERVICE_CLI_ENTROPY_BOUND_FLAGS_H_
#define DLLM_SERVICE_CLI_ENTROPY_BOUND_FLAGS_H_

#include "absl/status/statusor.h"
#include "engine/base/flags.h"
#include "engine/model/model.h"
#include "engine/sampler/entropy_bound_denoiser.h"
#include "engine/sampler/entropy_bound_sampler.h"

namespace dllm {

// The file's settings, then --eb-max-steps, --eb-t-min, --eb-t-max,
// --eb-entropy-bound, --eb-stability, --eb-confidence and --seed over them.
absl::StatusOr<EntropyBoundConfig> EntropyBoundConfigFromFlags(const ParsedFlags& flags,
                                                               const Model& model);

// How many canvases: --canvases N, or as the reference's -n does,
// ceil(--gen-length / canvas_length); one when neither is given.
absl::StatusOr<CanvasRun> CanvasRunFromFlags(const ParsedFlags& flags, int canvas_length);

// Whether `generate` runs the entropy-bound sampler: on a canvas model
// (diffusion.canvas_length) unless --sampler masked asks for the masked
// stand-in. INVALID_ARGUMENT for a --sampler the model cannot take.
absl::StatusOr<bool> UsesEntropyBound(const ParsedFlags& flags, const ModelConfig& config);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_ENTROPY_BOUND_FLAGS_H_
