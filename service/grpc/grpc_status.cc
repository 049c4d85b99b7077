#include "service/grpc/grpc_status.h"

#include <algorithm>
#include <string>

namespace dllm {

grpc::Status ToGrpcStatus(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  // absl's canonical codes are google.rpc.Code, as gRPC's are.
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()), std::string(status.message()));
}

absl::Status WhyCancelled(const grpc::CallbackServerContext& context,
                          std::chrono::system_clock::time_point call_start) {
  const auto deadline = context.deadline();
  const auto slack = std::max<std::chrono::system_clock::duration>(std::chrono::milliseconds(50),
                                                                   (deadline - call_start) / 20);
  if (std::chrono::system_clock::now() + slack >= deadline) {
    return absl::DeadlineExceededError("the call's deadline passed");
  }
  return absl::CancelledError("the client cancelled the call");
}

}  // namespace dllm
