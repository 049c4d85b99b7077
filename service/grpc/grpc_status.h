// The one place absl::Status becomes grpc::Status (code and message copied),
// and where a call's cancellation gets its reason.
#ifndef DLLM_SERVICE_GRPC_GRPC_STATUS_H_
#define DLLM_SERVICE_GRPC_GRPC_STATUS_H_

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include <chrono>

#include "absl/status/status.h"

namespace dllm {

grpc::Status ToGrpcStatus(const absl::Status& status);

// Why gRPC cancelled a call (OnCancel, or a failed write): DEADLINE_EXCEEDED
// when its deadline has passed or is near, else CANCELLED (the client
// cancelled or went away). A client's deadline and a cancel look alike on the
// wire (RST_STREAM CANCEL), and the server's copy of the deadline is later
// than the client's: gRPC rounds grpc-timeout up (to 10 ms below 10 s, 100 ms
// below 100 s, ...) and the server starts the clock when it reads the
// headers. Measured on a loaded 2-core server, the client's reset arrived up
// to 0.65 ms early for sub-second timeouts and up to 2.3% of the timeout
// early for 12-15 s ones. So "near" is max(50 ms, 5% of the timeout the
// server saw); `call_start` is when the call arrived.
absl::Status WhyCancelled(const grpc::CallbackServerContext& context,
                          std::chrono::system_clock::time_point call_start);

}  // namespace dllm

#endif  // DLLM_SERVICE_GRPC_GRPC_STATUS_H_
