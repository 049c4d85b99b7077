// The one place absl::Status becomes grpc::Status (code and message copied),
// and where a call's cancellation gets its reason.
#ifndef DLLM_SERVICE_SERVER_GRPC_STATUS_H_
#define DLLM_SERVICE_SERVER_GRPC_STATUS_H_

#include <chrono>

#include <grpcpp/server_context.h>
#include <grpcpp/support/status.h>

#include "absl/status/status.h"

namespace dllm {

grpc::Status ToGrpcStatus(const absl::Status& status);

// A cancellation this close to the call's deadline is the deadline. The
// client's deadline timer sends RST_STREAM at its deadline, which arrives
// about when the server's copy (set from grpc-timeout on arrival) passes,
// give or take the latency's jitter: on loopback the client's reset wins by
// 30-650 us, and on the wire a reset for a deadline looks like a cancel.
inline constexpr std::chrono::milliseconds kDeadlineSlack{50};

// Why gRPC cancelled a call (OnCancel, or a failed write): DEADLINE_EXCEEDED
// once its deadline is within kDeadlineSlack, else CANCELLED (the client
// cancelled or went away).
absl::Status WhyCancelled(const grpc::CallbackServerContext& context);

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_GRPC_STATUS_H_
