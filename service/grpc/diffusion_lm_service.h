// DiffusionLmService: the dllm.v1.DiffusionLM callback service, the gRPC
// front end on the serving engine's Admission. RPC threads decode, admit
// and enqueue; all model work runs on the EngineWorker's thread. Generate streams through a
// GenerateMailbox (one write in flight, coalescing when the client is slow, heartbeats from the
// StreamWatchdog); GetModelInfo, GetServerInfo and Tokenize answer inline. While draining, every
// new call is UNAVAILABLE "server is draining". Step sessions run in StepReactor (step_reactor.h);
// the admission's StreamWatchdog sends Generate's heartbeats, ends idle sessions
// (DEADLINE_EXCEEDED) and, while draining, ends every session after its current op (UNAVAILABLE).
#ifndef DLLM_SERVICE_GRPC_DIFFUSION_LM_SERVICE_H_
#define DLLM_SERVICE_GRPC_DIFFUSION_LM_SERVICE_H_

#include <chrono>
#include <map>
#include <memory>
#include <mutex>
#include <string>

#include "dllm/v1/dllm.grpc.pb.h"
#include "engine/base/stopwatch.h"
#include "service/engine/admission.h"

namespace dllm {

// What GetServerInfo reports besides live load.
struct ServerFacts {
  std::string isa;         // kernel path, e.g. "avx2"
  std::string cpu;         // CPU brand string
  std::string cpu_policy;  // "auto", "performance", "all"
  int performance_cores = 0;
  int efficiency_cores = 0;
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
  // Non-owning: `admission` outlives the service.
  DiffusionLmService(Admission* admission, ServerFacts facts);
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

  Admission& admission() const { return *admission_; }

 private:
  class GenerateReactor;
  friend class GenerateReactor;

  // The unary methods on parsed messages.
  absl::Status ModelInfo(v1::ModelInfo* info) const;
  absl::Status ServerInfo(v1::ServerInfo* info) const;
  absl::Status TokenizeText(const v1::TokenizeRequest& request, v1::TokenizeResponse* response);

  Admission* admission_;
  ServerFacts facts_;
  const Stopwatch uptime_;  // since construction

  std::mutex malformed_mu_;
  // When each client (peer address) last had a malformed request logged.
  std::map<std::string, std::chrono::steady_clock::time_point> malformed_logged_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_GRPC_DIFFUSION_LM_SERVICE_H_
