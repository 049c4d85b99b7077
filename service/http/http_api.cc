#include "service/http/http_api.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>

#include <ctime>
#include <string_view>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "service/http/api_reply.h"
#include "service/http/embedded_files.h"
#include "service/http/openai_request.h"

namespace dllm {
namespace {

constexpr HttpApi::Route kRoutes[] = {
    {"/health", "GET"},
    {"/health/ready", "GET"},
    {"/v1/models", "GET"},
    {"/v1/completions", "POST"},
    {"/v1/chat/completions", "POST"},
    {"/infill", "POST"},
    {"/", "GET"},
    {"/canvas.css", "GET"},
    {"/canvas.js", "GET"},
};

// The host part of a Host header or an origin's authority, lower-cased,
// without its port ("[::1]:8080" -> "[::1]").
std::string HostName(absl::string_view authority) {
  if (!authority.empty() && authority.front() == '[') {
    const size_t close = authority.find(']');
    // Only a port may follow the bracket ("[::1].evil.example" is no IPv6
    // literal): anything else stays in the name, which then matches nothing.
    if (close != absl::string_view::npos &&
        (close + 1 == authority.size() || authority[close + 1] == ':')) {
      authority = authority.substr(0, close + 1);
    }
  } else {
    authority = authority.substr(0, authority.find(':'));
  }
  return absl::AsciiStrToLower(authority);
}

// "localhost", "[::1]", or an IPv4 literal in 127.0.0.0/8: the names a page
// served from this loopback-only server can have. Anything else is a name
// that merely resolves here ("127.0.0.1.evil.example" starts like one).
bool IsLoopbackName(const std::string& host) {
  if (host == "localhost" || host == "[::1]") return true;
  in_addr v4{};
  return inet_pton(AF_INET, host.c_str(), &v4) == 1 && (ntohl(v4.s_addr) >> 24) == 127;
}

// Adds the CORS headers of an allowed cross-origin request to every answer.
class CorsResponder final : public HttpResponder {
 public:
  CorsResponder(HttpResponder& inner, std::string origin)
      : inner_(inner), origin_(std::move(origin)) {}
  bool Send(int status, absl::string_view content_type, std::string body,
            const HttpHeaders& headers) override {
    return inner_.Send(status, content_type, std::move(body), With(headers));
  }
  bool StartEvents(const HttpHeaders& headers) override {
    return inner_.StartEvents(With(headers));
  }
  bool SendEvents(absl::string_view text) override { return inner_.SendEvents(text); }
  void EndEvents() override { inner_.EndEvents(); }
  bool ClientGone() override { return inner_.ClientGone(); }

 private:
  HttpHeaders With(HttpHeaders headers) const {
    headers.emplace_back("Access-Control-Allow-Origin", origin_);
    headers.emplace_back("Vary", "Origin");
    return headers;
  }
  HttpResponder& inner_;
  const std::string origin_;
};

}  // namespace

HttpApi::HttpApi(Admission* admission, HttpApiOptions options)
    : admission_(admission),
      options_(std::move(options)),
      model_id_(ServedModelId(admission->model(), admission->model_path())),
      created_(static_cast<int64_t>(std::time(nullptr))),
      completions_(admission, model_id_, options_.heartbeat_seconds),
      infill_(admission, model_id_) {}

void HttpApi::OnTransportResponse(int status) {
  admission_->metrics()->OnHttpResponse("other", status);
}

void HttpApi::OnConnections(int open, int idle) {
  admission_->metrics()->SetHttpConnections(open, idle);
}

bool HttpApi::Authorized(const HttpRequest& request) const {
  if (options_.api_key.empty()) return true;
  // "Bearer" SP token (RFC 6750 2.1); the scheme is case-insensitive and
  // may be followed by more than one space (RFC 9110 11.4).
  absl::string_view given = request.authorization;
  const size_t space = given.find(' ');
  if (space == absl::string_view::npos ||
      !absl::EqualsIgnoreCase(given.substr(0, space), "bearer")) {
    return false;
  }
  given.remove_prefix(space);
  while (absl::ConsumePrefix(&given, " ")) {
  }
  // Constant time in the key's bytes: the comparison reveals only the length.
  return given.size() == options_.api_key.size() &&
         CRYPTO_memcmp(given.data(), options_.api_key.data(), options_.api_key.size()) == 0;
}

bool HttpApi::CheckWhereFrom(const HttpRequest& request, HttpResponder& out, bool* cors) {
  *cors = false;
  // Browsers send Origin with every POST and every cross-origin request;
  // other clients (curl, SDKs, proxies without browsers behind them) do not.
  if (request.origin.empty()) return true;
  for (const std::string& allowed : options_.allowed_origins) {
    if (allowed == "*" || allowed == request.origin) {
      *cors = true;
      return true;
    }
  }
  const size_t scheme = request.origin.find("://");
  const std::string origin_authority =
      scheme == std::string::npos ? "" : absl::AsciiStrToLower(request.origin.substr(scheme + 3));
  if (origin_authority.empty() || origin_authority != absl::AsciiStrToLower(request.host)) {
    SendError(out, *admission_->metrics(), "other",
              MakeApiError(403,
                           absl::StrCat("cross-origin requests from '", request.origin,
                                        "' are refused; start the server with "
                                        "--http-allow-origin ",
                                        request.origin, " to allow them"),
                           "origin_not_allowed"));
    return false;
  }
  // Same origin: a page this server's address served, unless a page's own
  // name was made to resolve to the loopback (DNS rebinding), which its
  // Host then shows.
  if (options_.loopback_host_only && !IsLoopbackName(HostName(request.host))) {
    SendError(out, *admission_->metrics(), "other",
              MakeApiError(403,
                           absl::StrCat("a page from '", request.origin,
                                        "' reached this loopback-only server under a name that "
                                        "is not the loopback (DNS rebinding?); allow it with "
                                        "--http-allow-origin"),
                           "host_not_allowed"));
    return false;
  }
  return true;
}

bool HttpApi::CheckMethod(const HttpRequest& request, const Route& route, bool cors,
                          HttpResponder& out) {
  // HEAD is GET without the body (the transport leaves it out).
  const bool get = std::string_view(route.method) == "GET";
  ServiceMetrics& metrics = *admission_->metrics();
  if (cors && request.method == "OPTIONS") {  // an allowed origin's preflight
    metrics.OnHttpResponse(request.path, 204);
    out.Send(204, "text/plain", "",
             {{"Access-Control-Allow-Methods", get ? "GET, HEAD" : route.method},
              {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
              {"Access-Control-Max-Age", "600"}});
    return false;
  }
  if (request.method != route.method && !(get && request.method == "HEAD")) {
    metrics.OnHttpResponse(request.path, 405);
    out.Send(405, kJsonContentType,
             DumpJson(ApiErrorBody(MakeApiError(
                 405, absl::StrCat(request.path, " takes ", route.method, ", not ", request.method),
                 "method_not_allowed"))),
             {{"Allow", get ? "GET, HEAD" : route.method}});
    return false;
  }
  return true;
}

bool HttpApi::ServeOpen(const HttpRequest& request, HttpResponder& out) {
  const std::string& path = request.path;
  ServiceMetrics& metrics = *admission_->metrics();
  if (path == "/health") {
    SendJson(out, metrics, path, 200, {{"status", "live"}});
    return true;
  }
  if (path == "/health/ready") {
    const absl::Status available = admission_->CheckAvailable();
    if (available.ok()) {
      SendJson(out, metrics, path, 200, {{"status", "ready"}});
    } else {
      SendJson(out, metrics, path, 503,
               {{"status", "not ready"}, {"reason", std::string(available.message())}});
    }
    return true;
  }
  // The canvas page loads without a key: it asks for one when the API does.
  for (const EmbeddedFile& file : kEmbeddedFiles) {
    if (path != file.path) continue;
    const char* type = absl::EndsWith(path, ".css")  ? "text/css; charset=utf-8"
                       : absl::EndsWith(path, ".js") ? "text/javascript; charset=utf-8"
                                                     : "text/html; charset=utf-8";
    metrics.OnHttpResponse(path == "/" ? "/" : "other", 200);
    out.Send(200, type, std::string(file.bytes),
             {{"Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"},
              {"X-Content-Type-Options", "nosniff"},
              {"Cache-Control", "no-cache"}});
    return true;
  }
  return false;
}

void HttpApi::Handle(const HttpRequest& request, HttpResponder& raw_out) {
  bool cors = false;
  if (!CheckWhereFrom(request, raw_out, &cors)) return;
  CorsResponder cors_out(raw_out, request.origin);
  HttpResponder& out = cors ? static_cast<HttpResponder&>(cors_out) : raw_out;
  const std::string& path = request.path;
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (path == r.path) route = &r;
  }
  if (route == nullptr) {
    SendError(out, *admission_->metrics(), "other",
              MakeApiError(404, absl::StrCat("no such path: ", path), "unknown_url"));
    return;
  }
  if (!CheckMethod(request, *route, cors, out) || ServeOpen(request, out)) return;
  if (!Authorized(request)) {
    SendError(out, *admission_->metrics(), path,
              MakeApiError(401,
                           request.authorization.empty()
                               ? "missing API key: send Authorization: Bearer <key>"
                               : "incorrect API key",
                           "invalid_api_key"));
    return;
  }
  if (path == "/v1/models") {
    Models(request, out);
  } else if (path == "/infill") {
    infill_.Handle(request, out);
  } else {
    completions_.Handle(
        path == "/v1/completions" ? OpenAiEndpoint::kCompletions : OpenAiEndpoint::kChatCompletions,
        request, out);
  }
}

void HttpApi::Models(const HttpRequest& request, HttpResponder& out) {
  Json model = {
      {"id", model_id_}, {"object", "model"}, {"created", created_}, {"owned_by", "dllm"}};
  // What a client (the canvas page) needs to know to ask for the right
  // settings: the model's default sampler and, for a canvas model, its
  // canvas length; for a block-diffusion model its block length.
  const ModelConfig& c = admission_->model().config();
  Json dllm = {{"architecture", std::string(ArchName(c.arch))},
               {"sampler", c.canvas_length > 0  ? "entropy_bound"
                           : c.block_length > 0 ? "llada2"
                                                : "masked"}};
  if (c.canvas_length > 0) dllm["canvas_length"] = c.canvas_length;
  if (c.block_length > 0) dllm["block_length"] = c.block_length;
  model["dllm"] = std::move(dllm);
  SendJson(out, *admission_->metrics(), request.path, 200,
           {{"object", "list"}, {"data", Json::array({model})}});
}

}  // namespace dllm
