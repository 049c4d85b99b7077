// The `dllm-client` binary and the Python and Node example clients, each run
// as a process against a real dllm-server on loopback (tiny LLaDA model).
#include <grpcpp/grpcpp.h>

#include <string>
#include <vector>

#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/client/fake_step_service.h"
#include "tests/client/server_process.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::RunResult;
using ::dllm::testing::RunShell;
using ::dllm::testing::ShellQuote;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

// Greedy, 32 positions in one block: a few milliseconds on the tiny model.
constexpr const char* kSmall = " --gen-length 32 --steps 32 --block-length 32 --seed 7";

std::string Client() { return testing::BinaryDir() + "/client/dllm-client"; }

std::vector<std::string> Lines(const std::string& text) {
  return absl::StrSplit(text, '\n', absl::SkipEmpty());
}

class DllmClientMainTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    server_ = new testing::ServerProcess();
    start_status_ = new absl::Status(server_->Start());
  }
  static void TearDownTestSuite() {
    delete server_;
    server_ = nullptr;
    delete start_status_;
    start_status_ = nullptr;
  }
  void SetUp() override { ASSERT_THAT(*start_status_, IsOk()); }

  // `dllm-client COMMAND --target ... ARGS`.
  static RunResult RunClient(const std::string& command, const std::string& args) {
    return RunShell(Client() + " " + command + " --target " + server_->target() + " " + args);
  }

  static testing::ServerProcess* server_;
  static absl::Status* start_status_;
};

testing::ServerProcess* DllmClientMainTest::server_ = nullptr;
absl::Status* DllmClientMainTest::start_status_ = nullptr;

TEST(DllmClientHelpTest, EveryCommandAnswersHelp) {
  for (const char* command : {"", "generate ", "step ", "info ", "health ", "tokenize "}) {
    for (const char* flag : {"--help", "-h"}) {
      SCOPED_TRACE(std::string(command) + flag);
      const testing::RunResult r =
          testing::RunBinary("client/dllm-client", std::string(command) + flag);
      EXPECT_EQ(r.exit_code, 0) << r.err;
      EXPECT_NE(r.out.find("usage: dllm-client"), std::string::npos) << r.out;
    }
  }
}

TEST_F(DllmClientMainTest, GenerateStreamsTheFinalText) {
  const RunResult plain =
      RunClient("generate", std::string(kSmall) + " 'The capital of France is'");
  ASSERT_EQ(plain.exit_code, 0) << plain.err;
  EXPECT_THAT(plain.err, StartsWith("finish: "));

  const RunResult json =
      RunClient("generate", std::string(kSmall) + " --json 'The capital of France is'");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  std::vector<Json> events;
  for (const std::string& line : Lines(json.out)) {
    auto event = ParseJson(line);
    ASSERT_THAT(event.status(), IsOk()) << line;
    events.push_back(*event);
  }
  // Progress heartbeats may come first while queued; then Started.
  size_t first = 0;
  while (first < events.size() && FindMember(events[first], "progress") != nullptr) ++first;
  ASSERT_LT(first, events.size());
  EXPECT_NE(FindMember(events[first], "started"), nullptr);
  const Json* final = FindMember(events.back(), "final");
  ASSERT_NE(final, nullptr) << json.out;
  std::string streamed;
  for (const Json& e : events) {
    if (const Json* step = FindMember(e, "step"))
      streamed += (*step)["text_delta"].get<std::string>();
  }
  const std::string text = (*final)["text"].get<std::string>();
  EXPECT_EQ(streamed, text);
  // The plain run streamed the same text (same seed, greedy), then a newline.
  EXPECT_EQ(plain.out, text + "\n");
  // Without step events the text comes with Final.
  const RunResult final_only =
      RunClient("generate", std::string(kSmall) + " --detail final 'The capital of France is'");
  ASSERT_EQ(final_only.exit_code, 0) << final_only.err;
  EXPECT_EQ(final_only.out, text + "\n");
}

TEST_F(DllmClientMainTest, ShowCanvasOffATerminalPrintsOneLinePerStep) {
  const RunResult r = RunClient("generate", std::string(kSmall) + " --show-canvas 'Hello'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 3u) << r.out;
  EXPECT_THAT(lines[0], StartsWith("started: "));
  EXPECT_THAT(lines[1], StartsWith("step 1/32: committed 1, 31 masked left"));
  EXPECT_THAT(r.out, ::testing::Not(HasSubstr("\x1b[")));
}

TEST_F(DllmClientMainTest, StepSessionFromAPipe) {
  const std::string commands =
      "advance 2\\nforward 2\\ncanvas\\nrewind 1\\n# a comment\\ncanvas\\nadvance 1000\\nclose\\n";
  const RunResult r = RunShell("printf '" + commands + "' | " + Client() + " step --target " +
                               server_->target() + kSmall + " 'Once upon a time'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.err, "");
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 8u) << r.out;
  EXPECT_THAT(lines[0], StartsWith("opened session "));
  EXPECT_THAT(lines[1], StartsWith("step 1/32: committed "));
  EXPECT_THAT(lines[2], StartsWith("step 2/32: committed "));
  EXPECT_THAT(lines[3], StartsWith("forward at step 2"));
  EXPECT_THAT(r.out, HasSubstr("canvas at step 2 (30 masked): "));
  EXPECT_THAT(r.out, HasSubstr("rewound to step 1; 31 masked\ncanvas at step 1 (31 masked): "));
  EXPECT_THAT(r.out, HasSubstr("\nfinal: "));
  EXPECT_EQ(lines.back(), "closed");
}

TEST_F(DllmClientMainTest, StepSessionSurvivesAFailedOpAndExitsNonZero) {
  const RunResult r =
      RunShell("printf 'commit 9999=1\\nadvance\\n' | " + Client() + " step --target " +
               server_->target() + kSmall + " 'Once upon a time'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("error: INVALID_ARGUMENT: "));
  EXPECT_THAT(r.out, HasSubstr("step 1/32: committed "));  // the session went on
  EXPECT_THAT(r.out, HasSubstr("closed"));
}

TEST_F(DllmClientMainTest, Info) {
  const RunResult r = RunClient("info", "");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("architecture: llada"));
  EXPECT_THAT(r.out, HasSubstr("server: dllm "));
  const RunResult json = RunClient("info", "--json");
  ASSERT_EQ(json.exit_code, 0) << json.err;
  auto parsed = ParseJson(json.out);
  ASSERT_THAT(parsed.status(), IsOk()) << json.out;
  EXPECT_EQ((*parsed)["model"]["architecture"].get<std::string>(), "llada");
  EXPECT_NE(FindMember((*parsed)["server"], "version"), nullptr);
}

TEST_F(DllmClientMainTest, Health) {
  RunResult r = RunClient("health", "");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = RunClient("health", "--service dllm.v1.DiffusionLM");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = RunClient("health", "--service no.such.Service");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("error: NOT_FOUND: "));
}

TEST_F(DllmClientMainTest, Tokenize) {
  const RunResult r = RunClient("tokenize", "'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  const std::vector<std::string> lines = Lines(r.out);
  ASSERT_GE(lines.size(), 2u);
  EXPECT_THAT(lines[0], ::testing::EndsWith(" tokens"));
  EXPECT_EQ(lines.size(), 1 + std::stoul(lines[0]));
}

TEST_F(DllmClientMainTest, InvalidArgumentExitsNonZeroWithTheCodeName) {
  const RunResult r = RunClient("generate", "--gen-length 128 --block-length 24 'Hello'");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("error: INVALID_ARGUMENT: "));
  EXPECT_THAT(r.err, HasSubstr("block_length"));
}

TEST_F(DllmClientMainTest, PythonClient) {
  const std::string script =
      ShellQuote(std::string(DLLM_SOURCE_DIR) + "/client/python/dllm_client.py");
  const std::string python = "/usr/bin/python3 " + script + " --stubs " +
                             ShellQuote(testing::BinaryDir() + "/client/python") + " --target " +
                             server_->target() + " --json ";
  RunResult r =
      RunShell(python + "generate --gen-length 32 --steps 32 --seed 7 'The capital of France is'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto parsed = ParseJson(r.out);
  ASSERT_THAT(parsed.status(), IsOk()) << r.out;
  EXPECT_EQ((*parsed)["streamed_text"].get<std::string>(), (*parsed)["text"].get<std::string>());
  EXPECT_GT((*parsed)["steps"].get<int64_t>(), 0);
  EXPECT_FALSE((*parsed)["request_id"].get<std::string>().empty());

  r = RunShell(python + "info");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  parsed = ParseJson(r.out);
  ASSERT_THAT(parsed.status(), IsOk()) << r.out;
  EXPECT_EQ((*parsed)["model"]["architecture"].get<std::string>(), "llada");
}

TEST_F(DllmClientMainTest, NodeClient) {
  if (RunShell("command -v node && command -v npm").exit_code != 0) {
    GTEST_SKIP() << "node/npm not installed: the Node example client is not run";
  }
  const std::string source = DLLM_SOURCE_DIR;
  const RunResult install =
      RunShell(ShellQuote(source + "/tests/tools/install-node-deps") + " 2>&1");
  ASSERT_EQ(install.exit_code, 0) << "tests/tools/install-node-deps failed:\n" << install.out;
  const std::string node = "node " + ShellQuote(source + "/client/node/client.js") + " --target " +
                           server_->target() + " --json ";
  RunResult r =
      RunShell(node + "--gen-length 32 --steps 32 --seed 7 generate 'The capital of France is'");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  auto parsed = ParseJson(r.out);
  ASSERT_THAT(parsed.status(), IsOk()) << r.out;
  EXPECT_EQ((*parsed)["streamed_text"].get<std::string>(), (*parsed)["text"].get<std::string>());
  EXPECT_EQ((*parsed)["seed"].get<std::string>(), "7");

  r = RunShell(node + "info");
  ASSERT_EQ(r.exit_code, 0) << r.out << r.err;
  parsed = ParseJson(r.out);
  ASSERT_THAT(parsed.status(), IsOk()) << r.out;
  EXPECT_EQ((*parsed)["model"]["architecture"].get<std::string>(), "llada");
}

// The three clients' commands, each given the arguments after it; Node's only
// where node and npm are installed (its packages installed here).
std::vector<std::pair<std::string, std::string>> AllClients() {
  const std::string source = DLLM_SOURCE_DIR;
  std::vector<std::pair<std::string, std::string>> clients = {
      {"C++", Client()},
      {"Python", "/usr/bin/python3 " + ShellQuote(source + "/client/python/dllm_client.py") +
                     " --stubs " + ShellQuote(testing::BinaryDir() + "/client/python")},
  };
  if (RunShell("command -v node && command -v npm").exit_code == 0 &&
      RunShell(ShellQuote(source + "/tests/tools/install-node-deps") + " 2>&1").exit_code == 0) {
    clients.push_back({"Node", "node " + ShellQuote(source + "/client/node/client.js")});
  }
  return clients;
}

// One convention: flags before or after the command, usage errors exit 2 with
// a message naming the flag, no stack traces.
TEST_F(DllmClientMainTest, ClientsShareOneFlagConvention) {
  struct UsageCase {
    std::string args;
    std::string message;
  };
  const std::vector<UsageCase> usage_errors = {
      {"generate --gen-length -5 hi", "--gen-length: '-5' is not a whole number"},
      {"generate --gen-length abc hi", "--gen-length: 'abc' is not a whole number"},
      {"--seed abc generate hi", "--seed: 'abc' is not a whole number"},
      {"--timeout-seconds -1 info", "--timeout-seconds: '-1'"},
      {"info --no-such-flag 1", "unknown flag --no-such-flag"},
      {"frobnicate", "unknown command"},
      {"generate", "expected one PROMPT argument"},
  };
  for (const auto& [name, client] : AllClients()) {
    for (const UsageCase& c : usage_errors) {
      const RunResult r = RunShell(client + " " + c.args);
      EXPECT_EQ(r.exit_code, 2) << name << ": " << c.args << "\n" << r.err;
      EXPECT_THAT(r.err, HasSubstr(c.message)) << name << ": " << c.args;
      EXPECT_THAT(r.err, Not(HasSubstr("Traceback"))) << name << ": " << c.args;
      EXPECT_THAT(r.err, Not(HasSubstr("    at "))) << name << ": " << c.args;  // a JS stack
    }
    // The same request with the flags on either side of the command.
    for (const std::string& args : {"--target " + server_->target() + " --json info",
                                    "info --json --target=" + server_->target()}) {
      const RunResult r = RunShell(client + " " + args);
      ASSERT_EQ(r.exit_code, 0) << name << ": " << args << "\n" << r.err;
      auto parsed = ParseJson(r.out);
      ASSERT_THAT(parsed.status(), IsOk()) << name << ": " << r.out;
      EXPECT_EQ((*parsed)["model"]["architecture"].get<std::string>(), "llada") << name;
    }
    const RunResult r = RunShell(client + " --target 127.0.0.1:1 --timeout-seconds 5 info");
    EXPECT_EQ(r.exit_code, 1) << name;
    EXPECT_THAT(r.err, StartsWith("error: UNAVAILABLE: ")) << name;
  }
}

// Without their gRPC packages the example clients say what to install.
TEST(DllmClientMainOfflineTest, ClientsNameTheirMissingPackages) {
  const std::string source = DLLM_SOURCE_DIR;
  // -S leaves out site-packages, where Debian's python3-grpcio lives.
  RunResult r = RunShell("/usr/bin/python3 -S " +
                         ShellQuote(source + "/client/python/dllm_client.py") + " info");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("python3-grpcio"));
  EXPECT_THAT(r.err, Not(HasSubstr("Traceback")));
  if (RunShell("command -v node").exit_code != 0) GTEST_SKIP() << "node not installed";
  // A copy of the Node client away from its node_modules.
  const std::string dir = testing::TempDir() + "/node-client-alone";
  ASSERT_EQ(RunShell("mkdir -p " + ShellQuote(dir) + " && cp " +
                     ShellQuote(source + "/client/node/client.js") + " " + ShellQuote(dir))
                .exit_code,
            0);
  r = RunShell("cd / && NODE_PATH= node " + ShellQuote(dir + "/client.js") + " info");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("@grpc/grpc-js is not installed"));
  EXPECT_THAT(r.err, Not(HasSubstr("    at ")));
}

// A server with a self-signed certificate for 127.0.0.1: `--tls-ca` with that
// certificate connects, a plaintext client does not.
TEST_F(DllmClientMainTest, TlsWithCaFile) {
  if (RunShell("command -v openssl").exit_code != 0) GTEST_SKIP() << "openssl not installed";
  const std::string dir = testing::TempDir();
  const std::string cert = dir + "/cert.pem", key = dir + "/key.pem";
  const RunResult made = RunShell(
      "openssl req -x509 -newkey rsa:2048 -nodes -days 1 -subj /CN=localhost -addext "
      "subjectAltName=IP:127.0.0.1,DNS:localhost -keyout " +
      key + " -out " + cert + " 2>&1");
  ASSERT_EQ(made.exit_code, 0) << made.out;
  testing::ServerProcess tls_server;
  ASSERT_THAT(tls_server.Start({"--tls-cert", cert, "--tls-key", key}, cert), IsOk());
  const std::string target = " --target " + tls_server.target();
  RunResult r = RunShell(Client() + " health --tls-ca " + cert + target);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "SERVING\n");
  r = RunShell(Client() + " generate --tls-ca " + cert + target + kSmall + " Hello");
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = RunShell(Client() + " health --timeout-seconds 5" + target);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("error: UNAVAILABLE: "));
}

// The `step` command's parsing and printing, against the in-process fake of
// the Step RPC (runs without dllm-server).
TEST(DllmClientMainOfflineTest, StepCommandsAgainstAFakeServer) {
  testing::FakeStepService service;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const std::string commands =
      "advance\\nforward 1 1\\ncommit 2=7\\ncanvas\\nrewind 1\\ncanvas\\ncommit 99=1\\n"
      "bogus\\nadvance 10\\nclose\\nadvance\\n";
  const RunResult r = RunShell("printf '" + commands + "' | " + Client() +
                               " step --target 127.0.0.1:" + std::to_string(port) + " hello");
  server->Shutdown();
  EXPECT_EQ(r.exit_code, 1);  // two commands failed
  EXPECT_EQ(r.out,
            "opened session s1: 0 prompt tokens, gen_length 4, block_length 0, 4 steps, "
            "unspecified, seed 0\n"
            "step 1/4: committed 0=100't0'; 3 masked\n"
            "forward at step 1 (0.0 ms):\n"
            "  1: 201'' 0.500\n"
            "step 2/4: committed 2=7't2'; 2 masked\n"
            "canvas at step 2 (2 masked): t0\u2591t2\u2591\n"
            "ids: 100 9 7 9\n"
            "rewound to step 1; 3 masked\n"
            "canvas at step 1 (3 masked): t0\u2591\u2591\u2591\n"
            "ids: 100 9 9 9\n"
            "step 2/4: committed 1=101't1'; 2 masked\n"
            "step 3/4: committed 2=102't2'; 1 masked\n"
            "step 4/4: committed 3=103't3'; 0 masked\n"
            "final: LENGTH, 0 tokens, 0 steps: done\n"
            "closed\n");
  const std::vector<std::string> errors = Lines(r.err);
  ASSERT_EQ(errors.size(), 2u) << r.err;
  EXPECT_EQ(errors[0], "error: INVALID_ARGUMENT: commit.tokens.position: 99 is not masked");
  EXPECT_THAT(errors[1], StartsWith("error: INVALID_ARGUMENT: unknown command bogus"));
}

// An early exit on the last requested step: its Final is printed with that
// command, before anything the next command prints (it once came after the
// next command's error).
TEST(DllmClientMainOfflineTest, StepCommandPrintsAnEarlyFinalWithItsCommand) {
  testing::FakeStepService service;
  service.early_exit_step_ = 2;
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort("127.0.0.1:0", grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(&service);
  std::unique_ptr<grpc::Server> server = builder.BuildAndStart();
  ASSERT_NE(server, nullptr);
  const RunResult r = RunShell("printf 'advance 2\\nadvance\\n' | " + Client() +
                               " step --target 127.0.0.1:" + std::to_string(port) + " hello 2>&1");
  server->Shutdown();
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.out, HasSubstr("step 2/4: committed 1=101't1'; 2 masked\nfinal: LENGTH, 0 tokens, "
                               "0 steps: done\nerror: FAILED_PRECONDITION: advance: the canvas "
                               "is complete"));
}

TEST(DllmClientMainOfflineTest, UnreachableServerPrintsUnavailable) {
  const RunResult r = RunShell(Client() + " info --target 127.0.0.1:1");
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, StartsWith("error: UNAVAILABLE: "));
}

TEST(DllmClientMainOfflineTest, UsageErrorsExitTwo) {
  RunResult r = RunShell(Client() + " generate --no-such-flag 1 hello");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("unknown flag --no-such-flag"));
  r = RunShell(Client() + " generate --algorithm nope hello");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--algorithm: unknown nope"));
  r = RunShell(Client() + " generate --cache fast hello");
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, HasSubstr("--cache: unknown fast (none, prefix, dual)"));
  r = RunShell(Client() + " frobnicate");
  EXPECT_EQ(r.exit_code, 2);
}

}  // namespace
}  // namespace dllm
