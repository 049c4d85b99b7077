// `dllm logits --model M --tokens 1,2,3 --out FILE [--rows 0,5] [--threads N]
// [--isa auto|scalar|avx2|avx512|amx]`: one forward pass, raw logits to FILE
// (little-endian float32, one row of n_vocab per position, row-major,
// unshifted) and a description to FILE.json, so anyone can diff dllm
// against another engine.
#ifndef DLLM_SERVICE_CLI_LOGITS_COMMAND_H_
#define DLLM_SERVICE_CLI_LOGITS_COMMAND_H_

namespace dllm {

int RunLogits(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_LOGITS_COMMAND_H_
