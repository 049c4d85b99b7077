// The one place absl::Status becomes grpc::Status: code and message copied.
#ifndef DLLM_SERVICE_SERVER_GRPC_STATUS_H_
#define DLLM_SERVICE_SERVER_GRPC_STATUS_H_

#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace dllm {

grpc::Status ToGrpcStatus(const absl::Status& status);

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_GRPC_STATUS_H_
