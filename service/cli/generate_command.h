// `dllm generate`: a local generation from a GGUF file, with a live canvas
// (`--show-canvas`) or a JSON trace (`--json`) whose field names match the
// official-sampler runs in shared/reference/official.
#ifndef DLLM_SERVICE_CLI_GENERATE_COMMAND_H_
#define DLLM_SERVICE_CLI_GENERATE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/base/flags.h"
#include "engine/model/model_config.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

// Sampler settings from generate's flags over DefaultSamplerConfig(model).
// LLaDA2 adds --steps-per-block, --editing-threshold, --max-post-steps and
// --preset S|Q (LLaDA2.1's model-card thresholds; each flag overrides).
absl::StatusOr<SamplerConfig> SamplerConfigFromFlags(const ParsedFlags& flags,
                                                     const ModelConfig& model);

// `--cache none|prefix|dual|exact` and `--cache-refresh R` (generate, eval
// and bench take them alike); errors name the flag. The default is the
// model's: exact for a block-causal model (LLaDA2), whose cache is exact,
// none (exact decoding) for the others.
absl::StatusOr<CachingOptions> CachingOptionsFromFlags(const ParsedFlags& flags,
                                                       const ModelConfig& model);
// The usage line of those flags.
inline constexpr const char* kCacheFlagsUsage = "[--cache none|prefix|dual] [--cache-refresh R]";

int RunGenerate(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_GENERATE_COMMAND_H_
