// `dllm generate`: a local generation from a GGUF file, with a live canvas
// (`--show-canvas`) or a JSON trace (`--json`) whose field names match the
// official-sampler runs in shared/reference/official.
#ifndef DLLM_SERVICE_CLI_GENERATE_COMMAND_H_
#define DLLM_SERVICE_CLI_GENERATE_COMMAND_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model_config.h"
#include "engine/sampler/sampler_config.h"
#include "service/cli/flags.h"

namespace dllm {

// Sampler settings from generate's flags, with defaults for `family`
// (LLaDA: block 32, low_confidence; Dream: entropy, eps 1e-3; both 128
// positions in 128 steps, temperature 0, early exit on).
absl::StatusOr<SamplerConfig> SamplerConfigFromFlags(const ParsedFlags& flags, Arch family);

int RunGenerate(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_GENERATE_COMMAND_H_
