// Null-safe calls into ServiceMetrics (service/metrics/service_metrics.h).
// The server runs without metrics when the pointer is null (tests, or
// --metrics-listen none), and builds without the metrics library at all
// until it is linked in (DLLM_HAVE_SERVICE_METRICS, set by CMake).
#ifndef DLLM_SERVICE_SERVER_METRICS_HOOKS_H_
#define DLLM_SERVICE_SERVER_METRICS_HOOKS_H_

#include "service/metrics/service_metrics.h"

namespace dllm {

#if DLLM_HAVE_SERVICE_METRICS
#define DLLM_METRICS_CALL(m, call) \
  do {                             \
    if ((m) != nullptr) (m)->call; \
  } while (0)
#else
// Unevaluated: keeps the arguments "used" without needing the library.
#define DLLM_METRICS_CALL(m, call) static_cast<void>(sizeof(decltype((m)->call)*))
#endif

inline void MetricsSetLoad(ServiceMetrics* m, int running, int waiting, int sessions) {
  DLLM_METRICS_CALL(m, SetLoad(running, waiting, sessions));
}
inline void MetricsSetActivationBytes(ServiceMetrics* m, uint64_t bytes) {
  DLLM_METRICS_CALL(m, SetActivationBytes(bytes));
}
inline void MetricsRejected(ServiceMetrics* m, RejectReason reason) {
  DLLM_METRICS_CALL(m, OnRejected(reason));
}
inline void MetricsCancelled(ServiceMetrics* m, double seconds) {
  DLLM_METRICS_CALL(m, OnCancelled(seconds));
}

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_METRICS_HOOKS_H_
