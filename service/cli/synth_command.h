// `dllm synth --arch llada|dream --shape 8b|7b|1b|tiny|custom:... --type
// q4_k_m|q5_k_m|q6_k|q8_0|q4_0|f16 --seed S --out FILE`: a random-weight
// GGUF with a real model's shapes and quantization layout, for benchmarks.
#ifndef DLLM_SERVICE_CLI_SYNTH_COMMAND_H_
#define DLLM_SERVICE_CLI_SYNTH_COMMAND_H_

namespace dllm {

int RunSynth(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_SYNTH_COMMAND_H_
