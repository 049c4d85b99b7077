#include "tests/testing/run_command.h"

#include <sys/wait.h>

#include <cstdio>
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

int RunCommand(const std::string& command, std::string* out) {
  out->clear();
  std::FILE* p = popen(command.c_str(), "r");
  if (p == nullptr) return -1;
  char buf[4096];
  size_t n;
  while ((n = std::fread(buf, 1, sizeof(buf), p)) > 0) out->append(buf, n);
  return pclose(p);
}

}  // namespace dllm::testing
