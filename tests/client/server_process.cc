// ServerProcess: spawns dllm-server and waits until it is ready.
#include "tests/client/server_process.h"

#include <fcntl.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <thread>

#include "absl/strings/str_cat.h"
#include "client/dllm_client.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

extern char** environ;

namespace dllm::testing {
namespace {

using Clock = std::chrono::steady_clock;

bool Exited(pid_t pid, int* status) { return waitpid(pid, status, WNOHANG) == pid; }

}  // namespace

ServerProcess::~ServerProcess() {
  if (pid_ <= 0) return;
  kill(pid_, SIGTERM);
  const auto until = Clock::now() + std::chrono::seconds(30);
  int status = 0;
  while (!Exited(pid_, &status)) {
    if (Clock::now() > until) {
      kill(pid_, SIGKILL);
      waitpid(pid_, &status, 0);
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
}

std::string ServerProcess::Log() const {
  std::ifstream in(dir_ + "/server.log");
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

absl::Status ServerProcess::Start(const std::vector<std::string>& extra_args,
                                  const std::string& tls_ca_file) {
  const std::string binary = BinaryDir() + "/service/dllm-server";
  if (!std::filesystem::exists(binary)) return absl::NotFoundError(binary + " is not built");
  dir_ = TempDir() + "/server-" + std::to_string(getpid());
  std::filesystem::create_directories(dir_);
  const std::string port_file = dir_ + "/ports.json";
  std::vector<std::string> args = {
      binary,        "--model",     TestDataDir() + "/models/" + model_,
      "--listen",    "127.0.0.1:0", "--metrics-listen",
      "none",        "--threads",   "1",
      "--port-file", port_file,     "--http-listen",
      "127.0.0.1:0"};
  args.insert(args.end(), extra_args.begin(), extra_args.end());
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  argv.push_back(nullptr);
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  const std::string log = dir_ + "/server.log";
  posix_spawn_file_actions_addopen(&actions, STDOUT_FILENO, log.c_str(),
                                   O_WRONLY | O_CREAT | O_TRUNC, 0644);
  posix_spawn_file_actions_adddup2(&actions, STDOUT_FILENO, STDERR_FILENO);
  const int rc = posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ);
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    pid_ = -1;
    return absl::InternalError(absl::StrCat("posix_spawn ", binary, ": error ", rc));
  }

  const auto until = Clock::now() + std::chrono::seconds(120);
  int port = 0;
  while (port == 0) {
    int status = 0;
    if (Exited(pid_, &status)) {
      pid_ = -1;
      return absl::InternalError(absl::StrCat("dllm-server exited early:\n", Log()));
    }
    if (Clock::now() > until)
      return absl::DeadlineExceededError("no --port-file after 120 s:\n" + Log());
    std::ifstream in(port_file);
    if (in) {
      const std::string text((std::istreambuf_iterator<char>(in)),
                             std::istreambuf_iterator<char>());
      auto json = ParseJson(text);
      if (json.ok() && (*json)["grpc"].is_number())
        port = static_cast<int>((*json)["grpc"].get<int64_t>());
    }
    if (port == 0) std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  target_ = absl::StrCat("127.0.0.1:", port);

  ClientOptions options;
  options.target = target_;
  options.tls_ca_file = tls_ca_file;
  auto client = DllmClient::Create(options);
  if (!client.ok()) return client.status();
  while (true) {
    auto health = (*client)->CheckHealth("dllm.v1.DiffusionLM");
    if (health.ok() && *health == grpc::health::v1::HealthCheckResponse::SERVING)
      return absl::OkStatus();
    if (Clock::now() > until) {
      return absl::DeadlineExceededError(absl::StrCat(
          "not ready after 120 s (last: ", health.ok() ? "NOT_SERVING" : health.status().ToString(),
          "):\n", Log()));
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
}

RunResult RunShell(const std::string& command) {
  const std::string dir = TempDir();
  const std::string out = dir + "/shell-out.txt", err = dir + "/shell-err.txt";
  const std::string cmd = "(" + command + ") >" + out + " 2>" + err;
  const int status = std::system(cmd.c_str());
  RunResult r;
  r.signaled = WIFSIGNALED(status) || (WIFEXITED(status) && WEXITSTATUS(status) >= 128);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  r.out = ReadFileOrDie(out);
  r.err = ReadFileOrDie(err);
  return r;
}

std::string ShellQuote(const std::string& s) {
  std::string out = "'";
  for (char c : s) {
    if (c == '\'') {
      out += "'\\''";
    } else {
      out += c;
    }
  }
  return out + "'";
}

}  // namespace dllm::testing
