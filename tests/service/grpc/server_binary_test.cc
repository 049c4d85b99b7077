// The dllm-server binary: --port-file appears once serving, and SIGTERM
// drains (the in-flight stream completes, new calls are UNAVAILABLE, exit 0).
#include <fcntl.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <thread>

#include "dllm/v1/dllm.grpc.pb.h"
#include "grpc/health/v1/health.grpc.pb.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/timing.h"
#include "tests/testing/wait.h"

extern char** environ;

namespace dllm {
namespace {

using Clock = std::chrono::steady_clock;

std::string TinyModel() { return testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf"; }

// A dllm-server child process, its stderr in a file; killed (SIGKILL) if the
// test leaves it running.
class ServerProcess {
 public:
  explicit ServerProcess(const std::vector<std::string>& extra, std::string model = TinyModel(),
                         std::string listen = "127.0.0.1:0", std::string port_file = "") {
    static int instance = 0;
    const std::string tag = std::to_string(instance++);
    port_file_ = port_file.empty() ? testing::TempDir() + "/ports" + tag + ".json" : port_file;
    stderr_file_ = testing::TempDir() + "/stderr" + tag + ".txt";
    std::vector<std::string> args = {testing::BinaryDir() + "/service/dllm-server",
                                     "--model",
                                     model,
                                     "--listen",
                                     listen,
                                     "--metrics-listen",
                                     "127.0.0.1:0",
                                     "--threads",
                                     "1",
                                     "--port-file",
                                     port_file_,
                                     "--http-listen",
                                     "127.0.0.1:0"};
    args.insert(args.end(), extra.begin(), extra.end());
    std::vector<char*> argv;
    for (auto& a : args) argv.push_back(a.data());
    argv.push_back(nullptr);
    posix_spawn_file_actions_t actions;
    posix_spawn_file_actions_init(&actions);
    posix_spawn_file_actions_addopen(&actions, 2, stderr_file_.c_str(),
                                     O_WRONLY | O_CREAT | O_TRUNC, 0644);
    EXPECT_EQ(posix_spawn(&pid_, argv[0], &actions, nullptr, argv.data(), environ), 0);
    posix_spawn_file_actions_destroy(&actions);
  }
  std::string Stderr() const { return testing::ReadFileOrDie(stderr_file_); }
  // Waits until the server printed `text` on stderr.
  bool WaitStderr(const std::string& text, std::chrono::seconds timeout) {
    const auto until = Clock::now() + timeout;
    while (Clock::now() < until) {
      if (Stderr().find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(2));
    }
    return false;
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
        auto json = ParseJson(text);
        if (json.ok()) {
          EXPECT_GT((*json)["metrics"].get<int64_t>(), 0);
          return static_cast<int>((*json)["grpc"].get<int64_t>());
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
  std::string stderr_file_;
};

// One Generate call on its own thread, long enough to be in flight when the
// test signals the server.
class LongCall {
 public:
  explicit LongCall(v1::DiffusionLM::Stub* stub) {
    v1::GenerateRequest req;
    req.mutable_prompt()->set_text("in flight");
    req.mutable_diffusion()->set_gen_length(960);
    req.mutable_diffusion()->set_steps(960);
    req.mutable_diffusion()->set_block_length(960);
    req.mutable_diffusion()->set_early_exit(false);
    thread_ = std::thread([this, stub, req] {
      auto reader = stub->Generate(&ctx_, req);
      v1::GenerateEvent e;
      while (reader->Read(&e)) {
        if (e.has_started()) started_ = true;
      }
      status_ = reader->Finish();
      ended_ = Clock::now();
    });
    EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return started_.load(); }));
  }
  ~LongCall() {
    if (thread_.joinable()) thread_.join();
  }
  grpc::Status Join() {
    thread_.join();
    return status_;
  }
  Clock::time_point ended() const { return ended_; }

 private:
  grpc::ClientContext ctx_;
  std::atomic<bool> started_{false};
  grpc::Status status_;
  Clock::time_point ended_;
  std::thread thread_;
};

std::unique_ptr<v1::DiffusionLM::Stub> Stub(int port) {
  return v1::DiffusionLM::NewStub(
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials()));
}

TEST(ServerBinaryTest, SigtermDrainsThenExitsZero) {
  ServerProcess server({"--drain-seconds", "60"});
  const int port = server.WaitGrpcPort(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  auto channel =
      grpc::CreateChannel("127.0.0.1:" + std::to_string(port), grpc::InsecureChannelCredentials());
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
  EXPECT_TRUE(::dllm::testing::WaitUntil([&] { return started.load(); }));
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

// Past --drain-seconds, a stream still running ends with UNAVAILABLE (which
// clients retry) and a message saying why, and the process exits promptly.
TEST(ServerBinaryTest, DrainDeadlineEndsStreamsUnavailable) {
  ServerProcess server({"--drain-seconds", "1"});
  const int port = server.WaitGrpcPort(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  auto stub = Stub(port);
  LongCall call(stub.get());
  const Clock::time_point signalled = Clock::now();
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  const grpc::Status status = call.Join();
  EXPECT_EQ(status.error_code(), grpc::UNAVAILABLE) << status.error_message();
  EXPECT_NE(status.error_message().find("drain period of 1 s ended"), std::string::npos)
      << status.error_message();
  EXPECT_EQ(server.Wait(std::chrono::seconds(30)), 0);
  const double exit_after = std::chrono::duration<double>(Clock::now() - signalled).count();
  EXPECT_LT(exit_after, 1.0 + 1.5 * testing::kPromptnessSlack)
      << "exit came " << exit_after << " s after SIGTERM";
}

// A second SIGTERM ends the drain at once.
TEST(ServerBinaryTest, SecondSigtermEndsTheDrain) {
  ServerProcess server({"--drain-seconds", "600"});
  const int port = server.WaitGrpcPort(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  auto stub = Stub(port);
  LongCall call(stub.get());
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  ASSERT_TRUE(server.WaitStderr("draining", std::chrono::seconds(10)));
  const Clock::time_point second = Clock::now();
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  EXPECT_EQ(call.Join().error_code(), grpc::UNAVAILABLE);
  EXPECT_EQ(server.Wait(std::chrono::seconds(30)), 0);
  EXPECT_LT(std::chrono::duration<double>(Clock::now() - second).count(),
            3.0 * testing::kPromptnessSlack);
  EXPECT_NE(server.Stderr().find("second signal: ending the drain now"), std::string::npos);
}

// SIGTERM while the model loads ends the process at once, non-zero.
TEST(ServerBinaryTest, SigtermWhileLoadingExits) {
  const std::string model = testing::TempDir() + "/slow-to-load.gguf";
  ASSERT_EQ(testing::RunDllm("synth --arch llada --shape custom:d=1024,l=4,h=8,ff=2816,v=8256 "
                             "--type q8_0 --quiet --out " +
                             model)
                .exit_code,
            0);
  ServerProcess server({}, model);
  ASSERT_TRUE(server.WaitStderr("dllm-server: loading", std::chrono::seconds(30)));
  ASSERT_EQ(kill(server.pid(), SIGTERM), 0);
  EXPECT_EQ(server.Wait(std::chrono::seconds(10)), 128 + SIGTERM);
  EXPECT_NE(server.Stderr().find("SIGTERM before the server was ready: exiting"), std::string::npos)
      << server.Stderr();
}

// A FIFO (or any non-regular file) as --model is refused at once instead of
// blocking the open; `dllm inspect` likewise.
TEST(ServerBinaryTest, NonRegularModelFileIsRefused) {
  const std::string fifo = testing::TempDir() + "/model.fifo";
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  ServerProcess server({}, fifo);
  EXPECT_EQ(server.Wait(std::chrono::seconds(10)), 2);
  EXPECT_NE(server.Stderr().find("not a regular file"), std::string::npos) << server.Stderr();
  const testing::RunResult inspect = testing::RunDllm("inspect " + fifo);
  EXPECT_EQ(inspect.exit_code, 2);
  EXPECT_NE(inspect.err.find("not a regular file"), std::string::npos);
}

// No SO_REUSEPORT: a second server on a taken port fails instead of
// silently sharing it.
TEST(ServerBinaryTest, SecondServerOnTheSamePortFails) {
  ServerProcess first({});
  const int port = first.WaitGrpcPort(std::chrono::seconds(60));
  ASSERT_GT(port, 0);
  ServerProcess second({}, TinyModel(), "127.0.0.1:" + std::to_string(port));
  EXPECT_EQ(second.Wait(std::chrono::seconds(30)), 2);
  EXPECT_NE(second.Stderr().find("address already in use"), std::string::npos) << second.Stderr();
}

// Issue #25: general.name went to the log unescaped (a file could forge log
// lines or send terminal controls), and with the disk full the port file was
// left empty with nothing reported.
TEST(ServerBinaryTest, ModelNameIsEscapedInTheLogAndAPortFileThatCannotBeWrittenFails) {
  std::string bytes = testing::ReadFileOrDie(TinyModel());
  const size_t key = bytes.find("general.name");
  ASSERT_NE(key, std::string::npos);
  const size_t value = key + std::string("general.name").size() + 4 + 8;  // type, length
  const std::string forged("ti\nny\x1b[2Jabc", 12);
  ASSERT_EQ(bytes.substr(value, 12), "tiny-llada-k");
  bytes.replace(value, 12, forged);
  const std::string model = testing::TempDir() + "/forged-name.gguf";
  testing::WriteFileOrDie(model, bytes);
  {
    ServerProcess server({}, model);
    ASSERT_TRUE(server.WaitStderr("ready", std::chrono::seconds(60))) << server.Stderr();
    const std::string log = server.Stderr();
    EXPECT_NE(log.find("(ti\\nny\\x1b[2Jabc, llada)"), std::string::npos) << log;
    EXPECT_EQ(log.find('\x1b'), std::string::npos);
  }
  // /dev/full: every write fails with ENOSPC, as on a full disk.
  const std::string port_file = testing::TempDir() + "/full-disk-ports.json";
  std::remove((port_file + ".tmp").c_str());
  ASSERT_EQ(symlink("/dev/full", (port_file + ".tmp").c_str()), 0);
  ServerProcess server({}, TinyModel(), "127.0.0.1:0", port_file);
  EXPECT_NE(server.Wait(std::chrono::seconds(60)), 0);
  EXPECT_NE(server.Stderr().find("--port-file: cannot write"), std::string::npos)
      << server.Stderr();
  EXPECT_NE(server.Stderr().find("No space left on device"), std::string::npos);
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
  EXPECT_EQ(
      std::system((bin + " --model /nonexistent.gguf --metrics-listen none 2>/dev/null").c_str()),
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
