// `dllm-client`: the command-line client of dllm-server (generate, step,
// info, health, tokenize; one file per command in client/cli). Talks gRPC
// only, through DllmClient.
//
// The flag convention of all three clients (this one, Python's and Node's):
// flags go before or after the command, as `--name value` or `--name=value`;
// `--` ends the flags. Usage errors (unknown flags, values that are not what
// the flag takes) print "dllm-client: what is wrong" and the usage, exit 2;
// failures print "error: CODE: message" (the gRPC status code name), exit 1.
#include <cstdio>
#include <string>

#include "absl/strings/str_cat.h"
#include "client/cli/common.h"

namespace dllm::client_cli {
namespace {

bool AsksForHelp(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--") return false;
    if (arg == "--help" || arg == "-h" || (i == 1 && arg == "help")) return true;
  }
  return false;
}

int Main(int argc, char** argv) {
  if (argc < 2 || AsksForHelp(argc, argv)) {
    std::fputs(kUsage, argc < 2 ? stderr : stdout);
    return argc < 2 ? 2 : 0;
  }
  auto flags = ParseFlags(argc - 1, argv + 1, ValueFlags(), kBoolFlags);
  if (!flags.ok()) return UsageError(flags.status());
  if (flags->help) {
    std::printf("%s", kUsage);
    return 0;
  }
  const std::string command = flags->TakeFirstPositional();
  if (command.empty()) return UsageError(absl::InvalidArgumentError("no command given"));
  if (command == "generate") return RunGenerate(*flags);
  if (command == "step") return RunStep(*flags);
  if (command == "info") return RunInfo(*flags);
  if (command == "health") return RunHealth(*flags);
  if (command == "tokenize") return RunTokenize(*flags);
  return UsageError(absl::InvalidArgumentError(absl::StrCat("unknown command ", command)));
}

}  // namespace
}  // namespace dllm::client_cli

int main(int argc, char** argv) { return dllm::client_cli::Main(argc, argv); }
