// The dllm-server binary: --port-file appears once serving, and SIGTERM
// drains (the in-flight stream completes, new calls are UNAVAILABLE, exit 0).
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "dllm/v1/dllm.grpc.pb.h"
#include "engine/base/json.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

extern char** environ;

namespace dllm {
namespace {

using Clock = std::chrono::steady_clock;

// A dllm-server child process; killed (SIGKILL) if the test leaves it running.
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra) {
    port_file_ = testing::TempDir() + "/ports.json";
    std::vector<std::string> args = {testing::BinaryDir() + "/service/dllm-server",
                                     "--model",
                                     testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf",
                                     "--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0",
                                     "--threads", "1", "--port-file", port_file_};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], nullptr, nullptr, argv.data(), environ), 0);
  }
  ~ServerProcess() {
    if (pid_ > 0) {
      kill(pid_, SIGKILL);
      waitpid(pid_, nullptr, 0);
    }
  }
  // The gRPC port from --port-file, once the server wrote it.
  int WaitGrpcPort(std::chrono::seconds timeout) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      std::ifstream in(port_file_);
      if (in) {
        std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
        auto json = Json::Parse(text);
        if (json.ok()) {
          EXPECT_GT((*json)["metrics"].as_int(), 0);
          return static_cast<int>((*json)["grpc"].as_int());
        }
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(20));
    }
    return 0;
  }
  // Exit status (or -1 on a signal or timeout).
  int Wait(std::chrono::seconds timeout) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      int status = 0;
      if (waitpid(pid_, &status, WNOHANG) == pid_) {
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
      }
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return -1;
  }
  pid_t pid() const { return pid_; }

 private:
  pid_t pid_ = -1;
  std::string port_file_;
};

TEST(ServerBinaryTest, SigtermDrainsThenExitsZero) {
  ServerProcess server({"--drain-seconds", "60"});
  const int port = server.WaitGrpcPort(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  auto channel = grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                                     grpc::InsecureChannelCredentials());
  auto stub = v1::DiffusionLM::NewStub(channel);
  {
    auto health = grpc::health::v1::Health::NewStub(channel);
    grpc::ClientContext ctx;
    grpc::health::v1::HealthCheckRequest req;
    req.set_service("dllm.v1.DiffusionLM");
    grpc::health::v1::HealthCheckResponse resp;
    ASSERT_TRUE(health->Check(&ctx, req, &resp).ok());
    EXPECT_EQ(resp.status(), grpc::health::v1::HealthCheckResponse::SERVING);
  }

  v1::GenerateRequest req;
  req.mutable_prompt()->set_text("in flight");
  req.mutable_diffusion()->set_gen_length(128);
  req.mutable_diffusion()->set_steps(32);
  req.mutable_diffusion()->set_block_length(128);
  req.mutable_diffusion()->set_early_exit(false);
  std::atomic<bool> started{false};
  grpc::Status in_flight_status;
  int finals = 0;
  std::thread call([&] {
    grpc::ClientContext ctx;
    auto reader = stub->Generate(&ctx, req);
    v1::GenerateEvent e;
    while (reader->Read(&e)) {
      if (e.has_started()) started = true;
      finals += e.has_final();
    }
    in_flight_status = reader->Finish();
  });
  while (!started) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  // New calls are refused from the moment the signal lands.
  grpc::StatusCode code = grpc::OK;
  for (int i = 0; i < 200 && code == grpc::OK; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::ModelInfo info;
    code = stub->GetModelInfo(&ctx, {}, &info).error_code();
    if (code == grpc::OK) std::this_thread::sleep_for(std::chrono::milliseconds(2));
  }
  EXPECT_EQ(code, grpc::UNAVAILABLE);
  call.join();
  EXPECT_TRUE(in_flight_status.ok()) << in_flight_status.error_message();
  EXPECT_EQ(finals, 1);
  EXPECT_EQ(server.Wait(std::chrono::seconds(60)), 0);
}

TEST(ServerBinaryTest, HelpPrintsUsageAndExitsZero) {
  for (const char* flag : {"--help", "-h"}) {
    const testing::RunResult r = testing::RunBinary("service/dllm-server", flag);
    EXPECT_EQ(r.exit_code, 0) << r.err;
    EXPECT_NE(r.out.find("usage: dllm-server"), std::string::npos) << r.out;
  }
}

TEST(ServerBinaryTest, BadFlagsExitTwo) {
  const std::string bin = testing::BinaryDir() + "/service/dllm-server";
  EXPECT_EQ(std::system((bin + " --bogus 2>/dev/null").c_str()), 2 << 8);
  EXPECT_EQ(std::system((bin + " --model /nonexistent.gguf --metrics-listen none 2>/dev/null").c_str()),
            2 << 8);
  const testing::RunResult bad_template = testing::RunBinary(
      "service/dllm-server", "--model " + testing::TestDataDir() +
                                 "/models/tiny-llada-k-q4_k_m.gguf --chat-template jinja");
  EXPECT_EQ(bad_template.exit_code, 2);
  EXPECT_NE(bad_template.err.find("chat template 'jinja' is not one of"), std::string::npos)
      << bad_template.err;
}

}  // namespace
}  // namespace dllm
