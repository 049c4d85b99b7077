// The generation flags of `dllm generate` (and of eval and bench, which take
// the same settings) as the engine's GenerationRequest, so that the command
// line runs the validation every front end shares (service/engine/
// request_validation.h): a rule written there holds here too. Errors name
// the flag that sets the field ("--cache-refresh: 4 needs a cache (prefix
// or dual)").
//
// What only a command line has: --preset S|Q (LLaDA2.1's model-card
// thresholds, under an explicit --threshold / --editing-threshold),
// --canvases N (an entropy-bound run's canvases: gen_length N canvases),
// and fixed default seeds (0; a canvas model's file seed), so that a run
// repeats.
#ifndef DLLM_SERVICE_CLI_GENERATION_FLAGS_H_
#define DLLM_SERVICE_CLI_GENERATION_FLAGS_H_

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/base/flags.h"
#include "engine/model/model.h"
#include "engine/sampler/entropy_bound_sampler.h"
#include "engine/sampler/sampler_config.h"
#include "service/engine/generation_request.h"
#include "service/engine/request_validation.h"

namespace dllm {

// The diffusion and sampling settings of the flags (no prompt).
absl::StatusOr<GenerationRequest> SettingsFromFlags(const ParsedFlags& flags, const Model& model);
// The whole request: the settings, and the prompt (--prompt TEXT with
// --chat, or --tokens) and infill suffix (--suffix or --suffix-tokens).
absl::StatusOr<GenerationRequest> GenerationRequestFromFlags(const ParsedFlags& flags,
                                                             const Model& model);
// The request validated as a server validates it, errors naming flags.
absl::StatusOr<GenerationSpec> GenerationSpecFromFlags(const ParsedFlags& flags,
                                                       const Model& model);

// The masked samplers' settings alone (eval, bench); errors name flags.
absl::StatusOr<SamplerConfig> SamplerConfigFromFlags(const ParsedFlags& flags, const Model& model);
// `--cache none|prefix|dual|exact` and `--cache-refresh R` for the masked
// samplers; the default is the model's (exact for block diffusion, else none).
absl::StatusOr<CachingOptions> CachingOptionsFromFlags(const ParsedFlags& flags,
                                                       const Model& model);
// The entropy-bound sampler's settings alone: the file's under the --eb-* flags.
absl::StatusOr<EntropyBoundConfig> EntropyBoundConfigFromFlags(const ParsedFlags& flags,
                                                               const Model& model);

// A request path in `status`'s message as the flag that sets it.
absl::Status NameFlags(const absl::Status& status);

// The usage line of the cache flags.
inline constexpr const char* kCacheFlagsUsage = "[--cache none|prefix|dual] [--cache-refresh R]";

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_GENERATION_FLAGS_H_
