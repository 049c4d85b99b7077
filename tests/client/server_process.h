// Test helpers for the client tests: a dllm-server child process on a tiny
// test model (loopback, a free port), and a shell command runner.
#ifndef DLLM_TESTS_CLIENT_SERVER_PROCESS_H_
#define DLLM_TESTS_CLIENT_SERVER_PROCESS_H_

#include <sys/types.h>

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "tests/testing/run_command.h"

namespace dllm::testing {

// build/service/dllm-server --model tests/data/models/MODEL --listen
// 127.0.0.1:0 --port-file ...; Start() returns once the readiness health
// check ("dllm.v1.DiffusionLM") answers SERVING. The destructor sends
// SIGTERM and waits (SIGKILL after 30 s).
class ServerProcess {
 public:
  explicit ServerProcess(std::string model = "tiny-llada-k-q4_k_m.gguf")
      : model_(std::move(model)) {}
  ~ServerProcess();
  ServerProcess(const ServerProcess&) = delete;
  ServerProcess& operator=(const ServerProcess&) = delete;

  // `tls_ca_file`: the CA for the readiness check when `extra_args` turn on
  // TLS (--tls-cert, --tls-key).
  absl::Status Start(const std::vector<std::string>& extra_args = {},
                     const std::string& tls_ca_file = "");
  const std::string& target() const { return target_; }  // "127.0.0.1:PORT"
  std::string Log() const;                               // what the server printed

 private:
  std::string model_;
  std::string dir_;
  std::string target_;
  pid_t pid_ = -1;
};

// Runs `command` through /bin/sh, capturing stdout and stderr apart.
RunResult RunShell(const std::string& command);

// Single-quotes `s` for /bin/sh.
std::string ShellQuote(const std::string& s);

}  // namespace dllm::testing

#endif  // DLLM_TESTS_CLIENT_SERVER_PROCESS_H_
