// `dllm tokenize --model M.gguf [--no-special] [--json] [--file F.json] TEXT...`:
// the ids and pieces of each text, as Generate (and the gRPC Tokenize RPC)
// tokenizes a prompt; the counterpart of llama.cpp's `llama-tokenize`.
#ifndef DLLM_SERVICE_CLI_TOKENIZE_COMMAND_H_
#define DLLM_SERVICE_CLI_TOKENIZE_COMMAND_H_

namespace dllm {

int RunTokenize(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_TOKENIZE_COMMAND_H_
