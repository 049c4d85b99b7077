// DllmServer: a running dllm.v1 gRPC server around one loaded model: the
// EngineWorker, the Admission every front end goes through (the HTTP API is
// given it too), the DiffusionLM service, the standard health service
// ("" = live, "dllm.v1.DiffusionLM" = ready: warmed up and not draining),
// reflection, message-size limits, keepalive settings (serving.md 1.8) and
// optional TLS. Tests start it in-process on 127.0.0.1:0; service/bin/dllm_server_main.cc
// wraps it with flags and signals.
#ifndef DLLM_SERVICE_GRPC_SERVER_H_
#define DLLM_SERVICE_GRPC_SERVER_H_

#include <grpcpp/server.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/parallel/cpu_topology.h"
#include "service/engine/admission.h"
#include "service/engine/engine_worker.h"
#include "service/grpc/diffusion_lm_service.h"

namespace dllm {

inline constexpr const char* kReadinessService = "dllm.v1.DiffusionLM";

struct ServerOptions {
  std::string model_path;                  // for GetModelInfo and the `model` field
  std::string listen = "127.0.0.1:50051";  // port 0 picks a free one
  EngineOptions engine;
  ThreadPlan plan;            // engine threads
  ServerFacts facts;          // isa, cpu, policy, core counts
  std::string tls_cert_file;  // PEM; both or neither
  std::string tls_key_file;
  int drain_seconds = 30;             // in-flight streams may finish this long
  int session_idle_seconds = 300;     // Step sessions close after this long idle
  int max_message_bytes = 4 << 20;    // receive and send limits
  int max_concurrent_streams = 64;    // per connection
  ServiceMetrics* metrics = nullptr;  // non-owning, may be null; outlives the server
};

// Thread-safe.
class DllmServer {
 public:
  // Binds, starts serving (readiness NOT_SERVING) and starts the engine's
  // warm-up; readiness turns SERVING when it finishes.
  static absl::StatusOr<std::unique_ptr<DllmServer>> Start(std::shared_ptr<const Model> model,
                                                           const ServerOptions& options);
  ~DllmServer();  // Shutdown()

  int port() const { return port_; }
  // Waits for the warm-up; its status (DEADLINE_EXCEEDED on timeout).
  absl::Status WaitReady(std::chrono::milliseconds timeout);

  // SIGTERM behaviour: readiness NOT_SERVING, new calls UNAVAILABLE,
  // in-flight streams finish for up to `grace` (or until EndDrainNow()),
  // the rest end with UNAVAILABLE (clients retry it), then the server shuts
  // down. Idempotent; blocks until done.
  void Drain(std::chrono::milliseconds grace);
  // A second SIGTERM: a Drain() in progress stops waiting at once.
  void EndDrainNow();
  // Stops at once (cancels everything).
  void Shutdown();
  // Blocks until Shutdown/Drain completed.
  void Wait();

  Admission& admission() { return *admission_; }
  DiffusionLmService& service() { return *service_; }
  EngineWorker& worker() { return *worker_; }
  grpc::Server* grpc_server() { return server_.get(); }

 private:
  DllmServer() = default;
  void SetReady(bool ready);

  ServerOptions options_;
  std::unique_ptr<EngineWorker> worker_;
  std::unique_ptr<Admission> admission_;
  std::unique_ptr<DiffusionLmService> service_;
  std::unique_ptr<grpc::Server> server_;
  int port_ = 0;

  std::mutex mu_;
  std::condition_variable cv_;
  bool warm_done_ = false;
  absl::Status warm_status_;
  bool draining_ = false;
  bool end_drain_ = false;
  bool shut_down_ = false;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_GRPC_SERVER_H_
