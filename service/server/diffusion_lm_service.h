// DiffusionLmService: the dllm.v1.DiffusionLM callback service. RPC threads
// validate, admit and enqueue; all model work runs on the EngineWorker's
// thread. Generate streams through a GenerateMailbox (one write in flight,
// coalescing when the client is slow, heartbeats from the StreamWatchdog);
// GetModelInfo, GetServerInfo and Tokenize answer inline. While draining,
// every new call is UNAVAILABLE "server is draining". Step sessions run in
// StepReactor (step_reactor.h); the service's StreamWatchdog sends
// Generate's heartbeats, ends idle sessions (DEADLINE_EXCEEDED) and, while
// draining, ends every session after its current op (UNAVAILABLE).
#ifndef DLLM_SERVICE_SERVER_DIFFUSION_LM_SERVICE_H_
#define DLLM_SERVICE_SERVER_DIFFUSION_LM_SERVICE_H_

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "dllm/v1/dllm.grpc.pb.h"
#include "engine/base/stopwatch.h"
#include "engine/model/model.h"
#include "service/metrics/service_metrics.h"
#include "service/server/engine_worker.h"
#include "service/server/generate_job.h"
#include "service/server/generate_stream.h"
#include "service/server/step_outbox.h"
#include "service/server/stream_watchdog.h"

namespace dllm {

// What GetServerInfo reports besides live load.
struct ServerFacts {
  std::string isa;         // kernel path, e.g. "avx2"
  std::string cpu;         // CPU brand string
  std::string cpu_policy;  // "auto", "performance", "all"
  int performance_cores = 0;
  int efficiency_cores = 0;
};

// The tensor type holding the most bytes among the model's 2-D weights,
// e.g. "Q4_K" (ModelInfo.weight_format, the metrics' build info).
std::string WeightFormat(const Model& model);

// A Generate request that passed admission: the engine runs `job` and posts
// its events to `mailbox`, which writes them to the front end's sink.
struct AdmittedGeneration {
  std::shared_ptr<GenerateMailbox> mailbox;
  std::shared_ptr<GenerateJob> job;
};

// Every method takes its request as bytes (gRPC's raw callback methods) and
// parses it with DecodeRequest, so malformed bytes are INVALID_ARGUMENT
// naming what could not be parsed (request_decoder.h).
using RawDiffusionLmService = v1::DiffusionLM::WithRawCallbackMethod_Generate<
    v1::DiffusionLM::WithRawCallbackMethod_Step<v1::DiffusionLM::WithRawCallbackMethod_GetModelInfo<
        v1::DiffusionLM::WithRawCallbackMethod_GetServerInfo<
            v1::DiffusionLM::WithRawCallbackMethod_Tokenize<v1::DiffusionLM::Service>>>>>;

// Thread-safe; outlives the grpc::Server it is registered with.
class DiffusionLmService final : public RawDiffusionLmService {
 public:
  // Non-owning: `worker` and `metrics` (may be null) outlive the service.
  DiffusionLmService(std::shared_ptr<const Model> model, std::string model_path,
                     EngineWorker* worker, ServerFacts facts, ServiceMetrics* metrics);
  ~DiffusionLmService() override;

  grpc::ServerWriteReactor<grpc::ByteBuffer>* Generate(grpc::CallbackServerContext* context,
                                                       const grpc::ByteBuffer* request) override;
  grpc::ServerBidiReactor<grpc::ByteBuffer, grpc::ByteBuffer>* Step(
      grpc::CallbackServerContext* context) override;
  grpc::ServerUnaryReactor* GetModelInfo(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* request,
                                         grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* GetServerInfo(grpc::CallbackServerContext* context,
                                          const grpc::ByteBuffer* request,
                                          grpc::ByteBuffer* response) override;
  grpc::ServerUnaryReactor* Tokenize(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* request,
                                     grpc::ByteBuffer* response) override;

  // A request whose bytes did not parse: counted as rejected (malformed) and
  // logged, at most once a minute per client.
  void OnMalformed(const grpc::CallbackServerContext& context, RpcKind rpc, const char* method,
                   const absl::Status& status);

  // The one admission path of every Generate-like request (gRPC Generate, the
  // HTTP completions): availability, validation, the reservation, Submit and
  // the heartbeat watch, each refusal counted under `rpc`. On success the
  // call counts as an active stream: the front end calls CallEnded() once
  // its call is over, after Detach()ing the mailbox.
  absl::StatusOr<AdmittedGeneration> AdmitGeneration(const v1::GenerateRequest& request,
                                                     EventSink* sink,
                                                     EngineClock::time_point deadline, RpcKind rpc);

  // Refuse new calls from now on (UNAVAILABLE); Step sessions end after
  // their current op.
  void StartDraining();
  bool draining() const { return draining_.load(); }
  // The admission gate every RPC that computes passes first: UNAVAILABLE
  // while draining ("server is draining") or before the warm-up finished.
  absl::Status CheckAvailable() const;

  // Streaming calls in flight (Generate and Step): a drain waits until none
  // is left. Pair every CallStarted()
  // with one CallEnded() (in the reactor's OnDone).
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
  class GenerateReactor;
  friend class GenerateReactor;

  // The unary methods on parsed messages.
  absl::Status ModelInfo(v1::ModelInfo* info) const;
  absl::Status ServerInfo(v1::ServerInfo* info) const;
  absl::Status TokenizeText(const v1::TokenizeRequest& request, v1::TokenizeResponse* response);

  std::shared_ptr<const Model> model_;
  std::string model_path_;
  EngineWorker* worker_;
  ServerFacts facts_;
  ServiceMetrics* metrics_;
  const Stopwatch uptime_;  // since construction
  std::atomic<bool> draining_{false};
  std::atomic<int> session_idle_seconds_{300};

  mutable std::mutex mu_;
  std::condition_variable streams_cv_;
  int active_streams_ = 0;

  // Heartbeats, session idle timeouts and the drain of open streams.
  StreamWatchdog watchdog_;

  std::mutex malformed_mu_;
  // When each client (peer address) last had a malformed request logged.
  std::map<std::string, std::chrono::steady_clock::time_point> malformed_logged_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_SERVER_DIFFUSION_LM_SERVICE_H_
