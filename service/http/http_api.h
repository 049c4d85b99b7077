// HttpApi: the HTTP front end's router, on the serving engine's Admission.
// It decides where a request may come from (API key, browsers' origins and
// the loopback Host, CORS), answers what needs no generation (GET /health
// live, /health/ready warmed up and not draining, /v1/models, the canvas
// page) and hands the rest to its endpoint: /v1/completions and
// /v1/chat/completions (completions_endpoint.h), /infill
// (infill_endpoint.h).
#ifndef DLLM_SERVICE_HTTP_HTTP_API_H_
#define DLLM_SERVICE_HTTP_HTTP_API_H_

#include <cstdint>
#include <string>
#include <vector>

#include "service/engine/admission.h"
#include "service/http/completions_endpoint.h"
#include "service/http/http_server.h"
#include "service/http/infill_endpoint.h"

namespace dllm {

struct HttpApiOptions {
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
class HttpApi final : public HttpHandler {
 public:
  // `admission` (non-owning) outlives the API.
  HttpApi(Admission* admission, HttpApiOptions options);

  void Handle(const HttpRequest& request, HttpResponder& responder) override;
  void OnTransportResponse(int status) override;
  void OnConnections(int open, int idle) override;

  // A path and the method it takes.
  struct Route {
    const char* path;
    const char* method;
  };

 private:
  // False after answering a request from where it may not come (a Host that
  // is not the loopback, an origin not allowed); true with `*cors` set for
  // an allowed cross-origin request.
  bool CheckWhereFrom(const HttpRequest& request, HttpResponder& out, bool* cors);
  // False after answering a preflight or a method the route does not take.
  bool CheckMethod(const HttpRequest& request, const Route& route, bool cors, HttpResponder& out);
  // True after answering what needs no key: health and the canvas page.
  bool ServeOpen(const HttpRequest& request, HttpResponder& out);
  bool Authorized(const HttpRequest& request) const;
  void Models(const HttpRequest& request, HttpResponder& out);

  Admission* const admission_;
  const HttpApiOptions options_;
  const std::string model_id_;
  const int64_t created_;  // when the model was loaded (Unix seconds), for /v1/models
  CompletionsEndpoint completions_;
  InfillEndpoint infill_;
};

}  // namespace dllm

#endif  // DLLM_SERVICE_HTTP_HTTP_API_H_
