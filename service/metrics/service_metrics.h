// ServiceMetrics: the server's Prometheus series (prometheus-cpp), served on
// their own HTTP port by service/http/metrics_endpoint.h. Engine and gRPC threads report events
// through the methods below; nothing else in the service touches prometheus-cpp. Names, units and
// buckets follow /work/shared/docs/serving.md section 6.2; every dllm_* family carries the constant
// label model="<general.name>".
#ifndef DLLM_SERVICE_METRICS_SERVICE_METRICS_H_
#define DLLM_SERVICE_METRICS_SERVICE_METRICS_H_

#include <cstdint>
#include <memory>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/cord.h"
#include "absl/strings/string_view.h"
#include "engine/model/forward.h"
#include "engine/session/denoise_session.h"

namespace dllm {

struct MetricsOptions {
  std::string model_name;     // constant label `model`
  std::string arch;           // "llada" | "dream" (dllm_build_info)
  std::string weight_format;  // e.g. "Q4_K" (dllm_build_info)
  std::string isa;            // kernel path (dllm_build_info)
  std::string cpu_policy;     // dllm_build_info
  int engine_threads = 1;
  int performance_cores = 0;  // dllm_cpu_cores{kind}
  int efficiency_cores = 0;
  uint64_t weights_mapped_bytes = 0;    // dllm_model_weights_bytes{storage="mmap"}: the
                                        // file's bytes still read, copied at load
  uint64_t weights_repacked_bytes = 0;  // dllm_model_weights_bytes{storage="heap"}
  // dllm_model_parameters{kind}: the layers' weights, all of them ("total")
  // and those one token's forward reads ("active": MoE uses only the
  // routed experts; embeddings and head excluded from both).
  uint64_t layer_parameters = 0;
  uint64_t active_layer_parameters = 0;
  int experts = 0;       // dllm_model_experts{kind="total"}; 0 for dense models
  int experts_used = 0;  // dllm_model_experts{kind="active"}
};

// Closed label sets, so series never explode.
// kOther: the unary RPCs (GetModelInfo, GetServerInfo, Tokenize).
// kHttpCompletions / kHttpChat: the OpenAI-compatible HTTP endpoints, and
// kHttpInfill llama-server's /infill, whose requests run as Generate
// requests do.
enum class RpcKind { kGenerate, kStep, kOther, kHttpCompletions, kHttpChat, kHttpInfill };
// kMalformed: request bytes that do not parse as the method's message.
enum class RejectReason {
  kQueueFull,
  kSessionsFull,
  kInvalid,
  kMemory,
  kDraining,
  kNotReady,
  kMalformed
};
// How a request ended (dllm_requests_finished_total{finish_reason}). kClosed:
// a Step session the client closed (or half-closed) before its canvas was
// complete; kUnavailable: ended by the server shutting down.
// kStop: the client stopped it because its text was complete (an /infill
// stop string, n_indent or time limit), with TextCompleteStatus().
enum class FinishKind {
  kEos,
  kLength,
  kCancelled,
  kDeadline,
  kError,
  kClosed,
  kUnavailable,
  kStop
};

// The payload that tells a stop for a complete text from a cancel.
inline constexpr absl::string_view kTextCompletePayload = "dllm.dev/text-complete";
// The status a job is stopped with when its text is complete: CANCELLED
// (the engine lets go of it as of any cancel), counted as kStop.
inline absl::Status TextCompleteStatus(absl::string_view why) {
  absl::Status s = absl::CancelledError(why);
  s.SetPayload(kTextCompletePayload, absl::Cord("1"));
  return s;
}

// The dllm_requests_finished_total reason for how a Generate request or Step
// session ended; `eos` tells an OK end by end-of-text from a full canvas.
inline FinishKind FinishKindOf(const absl::Status& status, bool eos) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
      return eos ? FinishKind::kEos : FinishKind::kLength;
    case absl::StatusCode::kCancelled:
      return status.GetPayload(kTextCompletePayload).has_value() ? FinishKind::kStop
                                                                 : FinishKind::kCancelled;
    case absl::StatusCode::kDeadlineExceeded:
      return FinishKind::kDeadline;
    case absl::StatusCode::kUnavailable:
      return FinishKind::kUnavailable;
    default:
      return FinishKind::kError;
  }
}

class ServiceMetrics {
 public:
  // The HTTP endpoint is apart (service/http/metrics_endpoint.h).
  static absl::StatusOr<std::unique_ptr<ServiceMetrics>> Create(const MetricsOptions& options);
  // The object that records nothing, for a server run without metrics (the
  // in-process tests): callers always have an object to call.
  static ServiceMetrics* NoOp();
  static ServiceMetrics* OrNoOp(ServiceMetrics* metrics);  // `metrics`, or NoOp() for null
  ~ServiceMetrics();

  // The exposition text a scrape of /metrics returns.
  std::string Serialize() const;

  // Load (gauges).
  void SetLoad(int running, int waiting, int sessions_open);
  void SetActivationBytes(uint64_t bytes);  // reserved: the engine's pass and admitted requests
  // The HTTP API's connections: open, and of those waiting idle.
  void SetHttpConnections(int open, int idle);

  // Request lifecycle.
  void OnRejected(RejectReason reason);
  // Also counts the refused RPC in dllm_requests_total{rpc,code} (which
  // OnFinished fills for requests that ran), labelled with the code's
  // canonical name.
  void OnRejected(RpcKind rpc, RejectReason reason, absl::StatusCode code);
  void OnStarted(double queue_seconds, int prompt_tokens, int canvas_tokens);
  // One forward pass of the engine, whoever's steps it carried (several
  // requests' under batching): its op times (dllm_op_duration_seconds) and
  // duration (dllm_forward_duration_seconds), once.
  void OnForward(const ForwardStats& ops, double forward_seconds);
  // One request's step: `rows` the canvas rows of its own that the step's
  // forward computed (dllm_forward_rows, when it ran one), `cache` how it
  // used its K/V cache, and its sampling time (op "sample").
  void OnStep(int64_t rows, double step_seconds, double sample_seconds, int forward_passes,
              int committed, CacheUse cache = CacheUse::kNone);
  // The same from a DenoiseSession's report.
  void OnStep(const StepReport& step);
  void OnFirstStep(double seconds_since_arrival);
  void OnFirstToken(double seconds_since_arrival);
  void OnFinished(RpcKind rpc, FinishKind finish, absl::StatusCode code, double duration_seconds,
                  int steps, int generated_tokens);
  // An RPC that ran no request (a Step stream that never opened a session):
  // dllm_requests_total{rpc,code} only.
  void OnCallEnded(RpcKind rpc, absl::StatusCode code);
  void OnCancelled(double cancel_to_idle_seconds);
  // One engine forward pass over the steps of `requests` jobs, `rows` rows
  // in all (dllm_batch_requests, dllm_batch_rows).
  void OnBatch(int requests, int64_t rows);
  // How long one ready step waited for its forward (dllm_batch_wait_seconds).
  void OnBatchWait(double seconds);
  void OnEventsSent(RpcKind rpc, int sent, int coalesced);
  // One HTTP response: dllm_http_responses_total{path,status}. `path` is one
  // of the served paths ("other" for the rest, so the label set stays small).
  void OnHttpResponse(absl::string_view path, int status);

 private:
  struct Impl;
  explicit ServiceMetrics(std::unique_ptr<Impl> impl);
  std::unique_ptr<Impl> impl_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_METRICS_SERVICE_METRICS_H_
