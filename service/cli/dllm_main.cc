// `dllm`: the command-line front end (inspect, doctor, ...).
#include <cstdio>
#include <string_view>

#include "absl/strings/string_view.h"
#include "service/cli/doctor_command.h"
#include "service/cli/generate_command.h"
#include "service/cli/inspect_command.h"
#include "service/cli/logits_command.h"
#include "service/cli/synth_command.h"

namespace {

void PrintUsage() {
  std::fprintf(stderr,
               "usage: dllm COMMAND [ARGS]\n"
               "commands:\n"
               "  inspect MODEL.gguf [--json] [--canvas N]\n"
               "                                what the file holds, whether it can run, memory for N tokens\n"
               "  doctor [MODEL.gguf]           check this machine (and a model) before serving\n"
               "  logits --model M --tokens IDS --out FILE [--rows IDS] [--threads N] [--isa I]\n"
               "                                one forward pass; raw float32 logits to FILE\n"
               "  generate --model M --prompt TEXT [--chat] [--show-canvas] [--json] ...\n"
               "                                denoise a generation (dllm generate --help)\n"
               "  synth --arch A --shape S --type T --out FILE\n"
               "                                random-weight GGUF with a real model's shapes\n");
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 2) {
    PrintUsage();
    return 2;
  }
  const absl::string_view command = argv[1];
  if (command == "inspect") return dllm::RunInspect(argc - 2, argv + 2);
  if (command == "doctor") return dllm::RunDoctor(argc - 2, argv + 2);
  if (command == "logits") return dllm::RunLogits(argc - 2, argv + 2);
  if (command == "generate") return dllm::RunGenerate(argc - 2, argv + 2);
  if (command == "synth") return dllm::RunSynth(argc - 2, argv + 2);
  if (command == "--help" || command == "-h" || command == "help") {
    PrintUsage();
    return 0;
  }
  std::fprintf(stderr, "dllm: unknown command '%s'\n", argv[1]);
  PrintUsage();
  return 2;
}
