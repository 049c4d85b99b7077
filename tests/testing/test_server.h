// An in-process dllm server on a loopback port for the server tests, with
// the defaults they share (one engine thread, the best ISA).
#ifndef DLLM_TESTS_TESTING_TEST_SERVER_H_
#define DLLM_TESTS_TESTING_TEST_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <memory>
#include <string>

#include "engine/model/model.h"
#include "service/grpc/server.h"

namespace dllm::testing {

// tests/data/models/NAME.
std::string TestModelPath(const std::string& name);
// The test model NAME at the best ISA level; null (and a test failure) if
// it does not load.
std::shared_ptr<const Model> LoadTestModel(const std::string& name);

struct TestServerOptions {
  EngineOptions engine;
  int session_idle_seconds = 300;
  ServiceMetrics* metrics = nullptr;  // non-owning
  std::string tls_cert_file;
  std::string tls_key_file;
};
// Serves `model` (the test model NAME) on 127.0.0.1 with a free port and
// waits until it is ready; null (and a test failure) if it cannot start.
std::unique_ptr<DllmServer> StartTestServer(std::shared_ptr<const Model> model,
                                            const std::string& name,
                                            const TestServerOptions& options = {});

// A plaintext channel to 127.0.0.1:PORT.
std::shared_ptr<grpc::Channel> ConnectLocal(int port);

}  // namespace dllm::testing

#endif  // DLLM_TESTS_TESTING_TEST_SERVER_H_
