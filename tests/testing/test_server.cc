#include "tests/testing/test_server.h"

#include <chrono>
#include <utility>

#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm::testing {

std::string TestModelPath(const std::string& name) { return TestDataDir() + "/models/" + name; }

std::shared_ptr<const Model> LoadTestModel(const std::string& name) {
  auto model = Model::Load(TestModelPath(name), {BestIsaLevel()});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

std::unique_ptr<DllmServer> StartTestServer(std::shared_ptr<const Model> model,
                                            const std::string& name,
                                            const TestServerOptions& options) {
  ServerOptions o;
  o.model_path = TestModelPath(name);
  o.listen = "127.0.0.1:0";
  o.engine = options.engine;
  o.plan.threads = 1;
  o.facts.isa = IsaLevelName(BestIsaLevel());
  o.session_idle_seconds = options.session_idle_seconds;
  o.metrics = options.metrics;
  o.tls_cert_file = options.tls_cert_file;
  o.tls_key_file = options.tls_key_file;
  auto server = DllmServer::Start(std::move(model), o);
  EXPECT_TRUE(server.ok()) << server.status();
  if (!server.ok()) return nullptr;
  EXPECT_TRUE((*server)->WaitReady(std::chrono::seconds(60)).ok());
  return std::move(*server);
}

std::shared_ptr<grpc::Channel> ConnectLocal(int port) {
  return grpc::CreateChannel("127.0.0.1:" + std::to_string(port),
                             grpc::InsecureChannelCredentials());
}

}  // namespace dllm::testing
