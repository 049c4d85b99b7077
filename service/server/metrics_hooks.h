// Null-safe calls into ServiceMetrics (service/metrics/service_metrics.h):
// the server runs without metrics when the pointer is null (in-process
// tests).
#ifndef DLLM_SERVICE_SERVER_METRICS_HOOKS_H_
#define DLLM_SERVICE_SERVER_METRICS_HOOKS_H_

#include "absl/status/status.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

#define DLLM_METRICS_CALL(m, call) \
  do {                             \
    if ((m) != nullptr) (m)->call; \
  } while (0)

inline void MetricsSetLoad(ServiceMetrics* m, int running, int waiting, int sessions) {
  DLLM_METRICS_CALL(m, SetLoad(running, waiting, sessions));
}
inline void MetricsSetActivationBytes(ServiceMetrics* m, uint64_t bytes) {
  DLLM_METRICS_CALL(m, SetActivationBytes(bytes));
}
// Counts a refused RPC (dllm_rejections_total and dllm_requests_total{code}).
inline void MetricsRejected(ServiceMetrics* m, RpcKind rpc, RejectReason reason,
                            absl::string_view grpc_code) {
  DLLM_METRICS_CALL(m, OnRejected(rpc, reason, grpc_code));
}
// The dllm_requests_finished_total reason for how a Generate request or Step
// session ended; `eos` tells an OK end by end-of-text from a full canvas.
inline FinishKind FinishKindOf(const absl::Status& status, bool eos) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return eos ? FinishKind::kEos : FinishKind::kLength;
    case absl::StatusCode::kCancelled:
      return FinishKind::kCancelled;
    case absl::StatusCode::kDeadlineExceeded:
      return FinishKind::kDeadline;
    case absl::StatusCode::kUnavailable:
      return FinishKind::kUnavailable;
    default:
      return FinishKind::kError;
  }
}
inline void MetricsCancelled(ServiceMetrics* m, double seconds) {
  DLLM_METRICS_CALL(m, OnCancelled(seconds));
}

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_METRICS_HOOKS_H_
