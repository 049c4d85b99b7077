// `dllm inspect MODEL.gguf [--json] [--canvas N]`: what a GGUF file holds and whether
// this build can run it.
#ifndef DLLM_SERVICE_CLI_INSPECT_COMMAND_H_
#define DLLM_SERVICE_CLI_INSPECT_COMMAND_H_

#include <string>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"
#include "service/json/json.h"

namespace dllm {

// The report `inspect --json` prints. Fails only when the file cannot be
// parsed at all; model-level problems are listed under "compatibility".
// With `canvas` > 0 it adds a "memory" section: the activation and logits
// buffers for a canvas of that many tokens and the resulting peak estimate.
absl::StatusOr<Json> InspectReport(const GgufFile& file, int canvas = 0);

// Human-readable rendering of `InspectReport`.
std::string RenderInspectReport(const Json& report);

int RunInspect(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_INSPECT_COMMAND_H_
