// `dllm generate`: a local generation from a GGUF file, with a live canvas
// (`--show-canvas`) or a JSON trace (`--json`) whose field names match the
// official-sampler runs in shared/reference/official.
#ifndef DLLM_SERVICE_CLI_GENERATE_COMMAND_H_
#define DLLM_SERVICE_CLI_GENERATE_COMMAND_H_

namespace dllm {

int RunGenerate(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_GENERATE_COMMAND_H_
