// The one place absl::Status becomes grpc::Status (code and message copied),
// and where a call's cancellation gets its reason.
#ifndef DLLM_SERVICE_SERVER_GRPC_STATUS_H_
#define DLLM_SERVICE_SERVER_GRPC_STATUS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace dllm {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Why gRPC cancelled a call (OnCancel): DEADLINE_EXCEEDED once its deadline
// has passed, else CANCELLED (the client cancelled or went away).
absl::Status WhyCancelled(const grpc::CallbackServerContext& context);

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_GRPC_STATUS_H_
