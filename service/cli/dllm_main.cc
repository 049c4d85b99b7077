// `dllm`: the command-line front end (inspect, doctor, ...).
#include <cstdio>
#include <string_view>

#include "absl/strings/string_view.h"
#include "service/cli/bench_command.h"
#include "service/cli/doctor_command.h"
#include "service/cli/eval_command.h"
#include "service/cli/generate_command.h"
#include "service/cli/inspect_command.h"
#include "service/cli/logits_command.h"
#include "service/cli/synth_command.h"
#include "service/cli/tokenize_command.h"

namespace {

void PrintUsage(FILE* to) {
  std::fprintf(to,
               "usage: dllm COMMAND [ARGS]\n"
               "commands:\n"
               "  inspect MODEL.gguf [--json] [--canvas N]\n"
               "                                what the file holds, whether it can run, memory "
               "for N tokens\n"
               "  doctor [MODEL.gguf]           check this machine (and a model) before serving\n"
               "  logits --model M --tokens IDS --out FILE [--rows IDS] [--threads N] [--isa I]\n"
               "                                one forward pass; raw float32 logits to FILE\n"
               "  generate --model M --prompt TEXT [--chat] [--show-canvas] [--json] ...\n"
               "                                denoise a generation\n"
               "  tokenize --model M [--no-special] [--json] [--file F.json] TEXT...\n"
               "                                ids and pieces, as prompts are tokenized\n"
               "  synth --arch A --shape S --type T --out FILE\n"
               "                                random-weight GGUF with a real model's shapes\n"
               "  bench --model M [--threads 1,2,all] [--gen-lengths 128,256,512] [--out F]\n"
               "                                end-to-end ms/step, tokens/s, peak RSS\n"
               "  eval --model M --windows FILE [--baseline F32.gguf] [--json OUT]\n"
               "                                masked-token cross-entropy, top-1 and KL\n"
               "every command answers --help with its own usage\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage(stderr);
    return 2;
  }
  const absl::string_view command = argv[1];
  if (command == "inspect") return dllm::RunInspect(argc - 2, argv + 2);
  if (command == "doctor") return dllm::RunDoctor(argc - 2, argv + 2);
  if (command == "logits") return dllm::RunLogits(argc - 2, argv + 2);
  if (command == "generate") return dllm::RunGenerate(argc - 2, argv + 2);
  if (command == "synth") return dllm::RunSynth(argc - 2, argv + 2);
  if (command == "bench") return dllm::RunBench(argc - 2, argv + 2);
  if (command == "tokenize") return dllm::RunTokenize(argc - 2, argv + 2);
  if (command == "eval") return dllm::RunEval(argc - 2, argv + 2);
  if (command == "--help" || command == "-h" || command == "help") {
    PrintUsage(stdout);
    return 0;
  }
  std::fprintf(stderr, "dllm: unknown command '%s'\n", argv[1]);
  PrintUsage(stderr);
  return 2;
}
