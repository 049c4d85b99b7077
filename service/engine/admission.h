// Admission: the one door every front end (gRPC, HTTP) takes into the
// serving engine. It holds the served model and the EngineWorker, gates
// every call that computes (draining, warm-up), validates a
// GenerationRequest, reserves its memory and submits its job, and counts the
// streaming calls in flight so that a drain knows when they are over. The
// StreamWatchdog it owns sends the Generate streams' heartbeats, ends idle
// Step sessions and, while draining, ends every session after its current
// op. Front ends never see each other: each holds an Admission.
#ifndef DLLM_SERVICE_ENGINE_ADMISSION_H_
#define DLLM_SERVICE_ENGINE_ADMISSION_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "service/engine/engine_worker.h"
#include "service/engine/generate_job.h"
#include "service/engine/generate_stream.h"
#include "service/engine/generation_request.h"
#include "service/engine/step_outbox.h"
#include "service/engine/stream_watchdog.h"
#include "service/metrics/service_metrics.h"

namespace dllm {

// The tensor type holding the most bytes among the model's 2-D weights,
// e.g. "Q4_K" (ModelInfo.weight_format, the metrics' build info).
std::string WeightFormat(const Model& model);

// A generation that passed admission: the engine runs `job` and posts its
// events to `mailbox`, which writes them to the front end's sink.
struct AdmittedGeneration {
  std::shared_ptr<GenerateMailbox> mailbox;
  std::shared_ptr<GenerateJob> job;
};

// Thread-safe.
class Admission {
 public:
  // Non-owning: `worker` and `metrics` (may be null) outlive the admission.
  Admission(std::shared_ptr<const Model> model, std::string model_path, EngineWorker* worker,
            ServiceMetrics* metrics);
  Admission(const Admission&) = delete;
  Admission& operator=(const Admission&) = delete;

  // The one admission path of every generation (gRPC Generate, the HTTP
  // completions and infill): availability, validation, the reservation,
  // Submit and the heartbeat watch, each refusal counted under `rpc`. On
  // success the call counts as an active stream: the front end calls
  // CallEnded() once its call is over, after Detach()ing the mailbox.
  absl::StatusOr<AdmittedGeneration> AdmitGeneration(const GenerationRequest& request,
                                                     EventSink* sink,
                                                     EngineClock::time_point deadline, RpcKind rpc);

  // The gate every call that computes passes first: UNAVAILABLE while
  // draining ("server is draining") or before the warm-up finished.
  absl::Status CheckAvailable() const;
  // CheckAvailable() with its refusal counted under `rpc`.
  absl::Status CheckAvailableCounted(RpcKind rpc) const;

  // Refuse new calls from now on (UNAVAILABLE); Step sessions end after
  // their current op.
  void StartDraining();
  bool draining() const { return draining_.load(); }

  // Streaming calls in flight (Generate, Step, the HTTP generations): a
  // drain waits until none is left. Pair every CallStarted() with one
  // CallEnded().
  void CallStarted();
  void CallEnded();
  int active_streams() const;
  // Waits until no streaming call is active; true when that happened in time.
  bool WaitNoStreams(std::chrono::milliseconds timeout);

  // How long an idle Step session lives (--session-idle-seconds).
  void set_session_idle_seconds(int seconds) { session_idle_seconds_ = seconds; }
  int session_idle_seconds() const { return session_idle_seconds_; }
  // Idle timeout and drain for a Step session until its call ends.
  void WatchSession(const std::shared_ptr<StepOutbox>& outbox);

  const Model& model() const { return *model_; }
  const std::shared_ptr<const Model>& shared_model() const { return model_; }
  const std::string& model_path() const { return model_path_; }
  EngineWorker* worker() const { return worker_; }
  ServiceMetrics* metrics() const { return metrics_; }

 private:
  std::shared_ptr<const Model> model_;
  std::string model_path_;
  EngineWorker* worker_;
  ServiceMetrics* metrics_;  // ServiceMetrics::NoOp() when none was given
  std::atomic<bool> draining_{false};
  std::atomic<int> session_idle_seconds_{300};

  mutable std::mutex mu_;
  std::condition_variable streams_cv_;
  int active_streams_ = 0;

  StreamWatchdog watchdog_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_ADMISSION_H_
