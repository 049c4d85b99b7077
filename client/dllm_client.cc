#include "client/dllm_client.h"

#include <chrono>

#include <grpcpp/grpcpp.h>

namespace dllm {
namespace {

absl::Status FromGrpc(const grpc::Status& s) {
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()), s.error_message());
}

}  // namespace

DllmClient::DllmClient(const std::string& target)
    : stub_(v1::DiffusionLM::NewStub(
          grpc::CreateChannel(target, grpc::InsecureChannelCredentials()))) {}

absl::StatusOr<v1::ServerInfo> DllmClient::GetServerInfo(double timeout_seconds) {
  grpc::ClientContext context;
  context.set_deadline(std::chrono::system_clock::now() +
                       std::chrono::milliseconds(static_cast<int64_t>(timeout_seconds * 1000)));
  v1::ServerInfo info;
  const grpc::Status status = stub_->GetServerInfo(&context, v1::GetServerInfoRequest(), &info);
  if (!status.ok()) return FromGrpc(status);
  return info;
}

}  // namespace dllm
