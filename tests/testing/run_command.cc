#include "tests/testing/run_command.h"

#include <sys/wait.h>

#include <cstdlib>

#include "tests/testing/test_paths.h"

namespace dllm::testing {

RunResult RunDllm(const std::string& args) { return RunBinary("service/dllm", args); }

RunResult RunBinary(const std::string& binary, const std::string& args) {
  const std::string dir = TempDir();
  const std::string cmd =
      BinaryDir() + "/" + binary + " " + args + " >" + dir + "/out.txt 2>" + dir + "/err.txt";
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.signaled = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) >= 128);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFileOrDie(dir + "/out.txt");
  r.err = ReadFileOrDie(dir + "/err.txt");
  return r;
}

}  // namespace dllm::testing
