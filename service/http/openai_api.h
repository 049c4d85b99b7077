// OpenAiApi: the OpenAI-compatible HTTP endpoints on the same engine as the
// gRPC API (serving.md): GET /v1/models, POST /v1/completions and
// /v1/chat/completions (whole responses, or server-sent events with the
// stable-text deltas the gRPC stream computes), GET /health (live) and
// /health/ready (warmed up and not draining). Generations go through
// DiffusionLmService::AdmitGeneration, so admission, the engine thread,
// cancellation, draining and metrics are the gRPC API's. A client that
// disconnects cancels its request within one layer, as a gRPC cancel does.
#ifndef DLLM_SERVICE_HTTP_OPENAI_API_H_
#define DLLM_SERVICE_HTTP_OPENAI_API_H_

#include <cstdint>
#include <functional>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "service/http/api_error.h"
#include "service/http/http_server.h"
#include "service/http/openai_request.h"
#include "service/json/json.h"
#include "service/server/diffusion_lm_service.h"

namespace dllm {

struct OpenAiApiOptions {
  // With a non-empty key, every /v1 request needs "Authorization: Bearer KEY".
  std::string api_key;
  // A `: ping` comment at least this often on a stream with nothing else to
  // send, e.g. while its request waits in the queue.
  int heartbeat_seconds = 10;
  // Browsers' cross-origin requests (an Origin header naming another site)
  // are refused unless their origin is listed here ("*": any), so that a
  // page elsewhere cannot drive a key-less local server.
  std::vector<std::string> allowed_origins;
  // Set when the server listens on loopback only: a browser's request (one
  // with an Origin) must then name the loopback as its Host, which defeats
  // DNS rebinding (a page whose own name was made to resolve to 127.0.0.1
  // looks same-origin, and sends its name as Host).
  bool loopback_host_only = false;
};

// Thread-safe.
class OpenAiApi final : public HttpHandler {
 public:
  // `service` (non-owning) outlives the API.
  OpenAiApi(DiffusionLmService* service, OpenAiApiOptions options);

  void Handle(const HttpRequest& request, HttpResponder& responder) override;
  void OnTransportResponse(int status) override;
  void OnConnections(int open, int idle) override;

 private:
  void Models(const HttpRequest& request, HttpResponder& out);
  void Complete(OpenAiEndpoint endpoint, const HttpRequest& request, HttpResponder& out);
  void Infill(const HttpRequest& request, HttpResponder& out);
  // One generation, admitted and relayed to this thread: `admitted` runs
  // once it is in (with its request id; false: the client is gone),
  // `on_event` for each of its events. A call ended early (the client went
  // away, or the caller has all the text it needs) cancels the job. The
  // admission's error, or how the call ended (CANCELLED after an early end).
  enum class Verdict { kGoOn, kClientGone, kTextComplete };
  struct RunHooks {
    std::function<bool(const std::string& request_id)> admitted;
    std::function<Verdict(const v1::GenerateEvent& event)> on_event;
  };
  absl::StatusOr<absl::Status> Run(const v1::GenerateRequest& generate, RpcKind rpc,
                                   HttpResponder& out, const RunHooks& hooks);
  bool Authorized(const HttpRequest& request) const;
  // Logs the first time each field of `fields` is ignored on `path`.
  void WarnIgnoredOnce(const char* path, const std::vector<std::string>& fields);
  // False after answering a request from where it may not come (a Host that
  // is not the loopback, an origin not allowed); true with `*cors` set for
  // an allowed cross-origin request.
  bool CheckWhereFrom(const HttpRequest& request, HttpResponder& out, bool* cors);

  void SendJson(HttpResponder& out, const std::string& path, int status, const Json& body,
                const HttpHeaders& headers = {});
  // `body`: the error in another API's shape (llama-server's for /infill);
  // null: OpenAI's.
  void SendError(HttpResponder& out, const std::string& path, const ApiError& error,
                 const Json& body = nullptr);

  DiffusionLmService* const service_;
  const OpenAiApiOptions options_;
  const std::string model_id_;
  const int64_t created_;  // when the model was loaded (Unix seconds), for /v1/models
  std::mutex warned_mu_;
  std::set<std::string> warned_;  // "path field" already logged
  bool warned_full_ = false;      // the log said that warned_ is full
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_OPENAI_API_H_
