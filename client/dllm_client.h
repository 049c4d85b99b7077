// `DllmClient`: a thin C++ wrapper over the dllm.v1 stub that returns
// absl::StatusOr. Depends only on the generated proto code.
#ifndef DLLM_CLIENT_DLLM_CLIENT_H_
#define DLLM_CLIENT_DLLM_CLIENT_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "dllm/v1/dllm.grpc.pb.h"

namespace dllm {

class DllmClient {
 public:
  // Connects lazily to `target` ("127.0.0.1:50051") without TLS.
  explicit DllmClient(const std::string& target);

  absl::StatusOr<v1::ServerInfo> GetServerInfo(double timeout_seconds = 5.0);

 private:
  std::unique_ptr<v1::DiffusionLM::Stub> stub_;
};

}  // namespace dllm

#endif  // DLLM_CLIENT_DLLM_CLIENT_H_
