// Runs the project's binaries from the build tree and captures what they printed.
#ifndef DLLM_TESTS_TESTING_RUN_COMMAND_H_
#define DLLM_TESTS_TESTING_RUN_COMMAND_H_

#include <string>

namespace dllm::testing {

struct RunResult {
  int exit_code = -1;
  bool signaled = false;  // killed by a signal (or a shell-reported 128+N)
  std::string out, err;
};

// Runs `build/BINARY ARGS` through the shell, e.g. ("client/dllm-client", "--help").
RunResult RunBinary(const std::string& binary, const std::string& args);
// Runs `build/service/dllm ARGS` through the shell.
RunResult RunDllm(const std::string& args);
// Runs `command` through the shell: its exit status (pclose's), its stdout
// in `out`.
int RunCommand(const std::string& command, std::string* out);

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_RUN_COMMAND_H_
