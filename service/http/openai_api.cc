#include "service/http/openai_api.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <openssl/crypto.h>

#include <chrono>
#include <cmath>
#include <ctime>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/base/status_macros.h"
#include "service/http/embedded_files.h"
#include "service/http/generation_relay.h"
#include "service/http/openai_response.h"
#include "service/http/stop_text.h"
#include "service/server/stream_events.h"

namespace dllm {
namespace {

constexpr const char* kJson = "application/json";
// How often a request waiting for the engine looks at its client.
constexpr auto kClientCheck = std::chrono::milliseconds(20);

std::string EventData(const Json& chunk) { return absl::StrCat("data: ", DumpJson(chunk), "\n\n"); }

// One generation's events turned into the API's text, stop handling and
// logprobs; the same for a stream and a whole response, so that the deltas,
// concatenated, are the whole response's text.
class CompletionRun {
 public:
  CompletionRun(const OpenAiRequest& request, const Model& model, CompletionHeader header)
      : request_(request), model_(model), header_(std::move(header)), stop_(request.stop) {}

  // The text to send for a StepEvent (possibly empty), after `stop`.
  std::string OnStep(const v1::StepEvent& step) {
    for (const v1::CommittedToken& t : step.committed()) {
      if (t.has_logprob()) logprob_[t.position()] = t.logprob();
    }
    for (const v1::PositionCandidates& c : step.candidates()) {
      auto& top = top_[c.position()];
      top.clear();
      for (const v1::Candidate& k : c.candidates()) {
        top.emplace_back(model_.tokenizer().TokenPiece(static_cast<int32_t>(k.token_id())),
                         k.prob() > 0 ? std::log(static_cast<double>(k.prob())) : -INFINITY);
      }
    }
    raw_ += step.text_delta();
    return stop_.Add(step.text_delta());
  }

  // The rest of the text at the Final: what no StepEvent carried, then
  // whatever the stop handling held back.
  std::string OnFinal(const v1::Final& final) {
    final_ = final;
    std::string rest;
    if (absl::StartsWith(final.text(), raw_)) {
      rest = stop_.Add(absl::string_view(final.text()).substr(raw_.size()));
    }
    return rest + stop_.Finish();
  }

  const std::string& text() const { return stop_.text(); }
  const v1::Final& final() const { return final_; }
  const CompletionHeader& header() const { return header_; }

  const char* FinishReason() const {
    return stop_.stopped() || final_.finish_reason() == v1::FINISH_REASON_EOS ? "stop" : "length";
  }

  // The logprobs of the tokens whose text is in the (stop-cut) text; null
  // when not asked for.
  Json Logprobs() const {
    if (!request_.logprobs) return nullptr;
    std::vector<TokenLogprob> tokens;
    size_t offset = 0;
    for (int i = 0; i < final_.token_ids_size() && offset < text().size(); ++i) {
      TokenLogprob t;
      t.text = model_.tokenizer().TokenPiece(static_cast<int32_t>(final_.token_ids(i)));
      const auto lp = logprob_.find(static_cast<uint32_t>(i));
      // Unknown (JSON null) rather than 0, which would claim probability 1.
      t.logprob = lp == logprob_.end() ? std::nan("") : lp->second;
      if (const auto top = top_.find(static_cast<uint32_t>(i)); top != top_.end())
        t.top = top->second;
      offset += t.text.size();
      tokens.push_back(std::move(t));
    }
    return LogprobsJson(header_.endpoint, tokens);
  }

 private:
  const OpenAiRequest& request_;
  const Model& model_;
  const CompletionHeader header_;
  StopText stop_;
  std::string raw_;  // every text delta, before the stop handling
  v1::Final final_;
  std::map<uint32_t, double> logprob_;  // by generated position
  std::map<uint32_t, std::vector<std::pair<std::string, double>>> top_;
};

// `event: canvas` for dllm_canvas: the canvas after the step, its masked
// positions and what the step committed (an edit with the token it
// replaced); under the entropy-bound sampler (no masks) its canvas_step too.
std::string CanvasEvent(const v1::StepEvent& step, int32_t mask) {
  Json canvas = Json::object();
  canvas["step"] = step.step();
  canvas["planned_steps"] = step.planned_steps();
  canvas["merged_steps"] = step.merged_steps();
  canvas["masked_remaining"] = step.masked_remaining();
  Json masked = Json::array();
  for (int i = 0; i < step.canvas_size() && !step.has_canvas_step(); ++i) {
    if (static_cast<int32_t>(step.canvas(i)) == mask) masked.push_back(i);
  }
  canvas["masked"] = std::move(masked);
  if (step.has_canvas_step()) {
    const v1::CanvasStep& c = step.canvas_step();
    canvas["canvas_step"] = {
        {"canvas", c.canvas()},
        {"temperature", c.temperature()},
        {"accepted", c.accepted()},
        {"mean_entropy", c.mean_entropy()},
        {"argmax", std::vector<uint32_t>(c.argmax().begin(), c.argmax().end())}};
  }
  Json committed = Json::array();
  for (const v1::CommittedToken& t : step.committed()) {
    Json entry = {{"position", t.position()}, {"token_id", t.token_id()}, {"text", t.piece()}};
    // LLaDA2.1's edit of a written token: what it replaced.
    if (t.has_replaced_token_id()) entry["replaced"] = t.replaced_token_id();
    committed.push_back(std::move(entry));
  }
  canvas["committed"] = std::move(committed);
  canvas["canvas"] = Json(std::vector<uint32_t>(step.canvas().begin(), step.canvas().end()));
  return absl::StrCat("event: canvas\ndata: ", DumpJson(canvas), "\n\n");
}

const char* PathOf(OpenAiEndpoint endpoint) {
  return endpoint == OpenAiEndpoint::kCompletions ? "/v1/completions" : "/v1/chat/completions";
}

}  // namespace

OpenAiApi::OpenAiApi(DiffusionLmService* service, OpenAiApiOptions options)
    : service_(service),
      options_(std::move(options)),
      model_id_(ServedModelId(service->model(), service->model_path())),
      created_(static_cast<int64_t>(std::time(nullptr))) {}

void OpenAiApi::OnTransportResponse(int status) {
  service_->metrics()->OnHttpResponse("other", status);
}

void OpenAiApi::OnConnections(int open, int idle) {
  service_->metrics()->SetHttpConnections(open, idle);
}

void OpenAiApi::SendJson(HttpResponder& out, const std::string& path, int status, const Json& body,
                         const HttpHeaders& headers) {
  service_->metrics()->OnHttpResponse(path, status);
  out.Send(status, kJson, DumpJson(body), headers);
}

void OpenAiApi::SendError(HttpResponder& out, const std::string& path, const ApiError& error,
                          const Json& body) {
  HttpHeaders headers;
  // As gRPC's retry-after-ms: when to try again after a refusal for load.
  if (error.status == 429 || error.status == 503) headers.emplace_back("Retry-After", "1");
  if (error.status == 401) headers.emplace_back("WWW-Authenticate", "Bearer");
  SendJson(out, path, error.status, body.is_null() ? ApiErrorBody(error) : body, headers);
}

bool OpenAiApi::Authorized(const HttpRequest& request) const {
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

namespace {

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

bool OpenAiApi::CheckWhereFrom(const HttpRequest& request, HttpResponder& out, bool* cors) {
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
    SendError(out, "other",
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
    SendError(out, "other",
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

void OpenAiApi::Handle(const HttpRequest& request, HttpResponder& raw_out) {
  bool cors = false;
  if (!CheckWhereFrom(request, raw_out, &cors)) return;
  CorsResponder cors_out(raw_out, request.origin);
  HttpResponder& out = cors ? static_cast<HttpResponder&>(cors_out) : raw_out;
  const std::string& path = request.path;
  struct Route {
    const char* path;
    const char* method;
  };
  static constexpr Route kRoutes[] = {
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
  const Route* route = nullptr;
  for (const Route& r : kRoutes) {
    if (path == r.path) route = &r;
  }
  if (route == nullptr) {
    SendError(out, "other", MakeApiError(404, absl::StrCat("no such path: ", path), "unknown_url"));
    return;
  }
  // HEAD is GET without the body (the transport leaves it out).
  const bool get = std::string_view(route->method) == "GET";
  if (cors && request.method == "OPTIONS") {  // an allowed origin's preflight
    service_->metrics()->OnHttpResponse(path, 204);
    out.Send(204, "text/plain", "",
             {{"Access-Control-Allow-Methods", get ? "GET, HEAD" : route->method},
              {"Access-Control-Allow-Headers", "Authorization, Content-Type"},
              {"Access-Control-Max-Age", "600"}});
    return;
  }
  if (request.method != route->method && !(get && request.method == "HEAD")) {
    service_->metrics()->OnHttpResponse(path, 405);
    out.Send(405, kJson,
             DumpJson(ApiErrorBody(MakeApiError(
                 405, absl::StrCat(path, " takes ", route->method, ", not ", request.method),
                 "method_not_allowed"))),
             {{"Allow", get ? "GET, HEAD" : route->method}});
    return;
  }
  if (path == "/health") {
    SendJson(out, path, 200, {{"status", "live"}});
    return;
  }
  if (path == "/health/ready") {
    const absl::Status available = service_->CheckAvailable();
    if (available.ok()) {
      SendJson(out, path, 200, {{"status", "ready"}});
    } else {
      SendJson(out, path, 503,
               {{"status", "not ready"}, {"reason", std::string(available.message())}});
    }
    return;
  }
  // The canvas page loads without a key: it asks for one when the API does.
  for (const EmbeddedFile& file : kEmbeddedFiles) {
    if (path != file.path) continue;
    const char* type = absl::EndsWith(path, ".css")  ? "text/css; charset=utf-8"
                       : absl::EndsWith(path, ".js") ? "text/javascript; charset=utf-8"
                                                     : "text/html; charset=utf-8";
    service_->metrics()->OnHttpResponse(path == "/" ? "/" : "other", 200);
    out.Send(200, type, std::string(file.bytes),
             {{"Content-Security-Policy", "default-src 'self'; frame-ancestors 'none'"},
              {"X-Content-Type-Options", "nosniff"},
              {"Cache-Control", "no-cache"}});
    return;
  }
  if (!Authorized(request)) {
    SendError(out, path,
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
    Infill(request, out);
  } else {
    Complete(
        path == "/v1/completions" ? OpenAiEndpoint::kCompletions : OpenAiEndpoint::kChatCompletions,
        request, out);
  }
}

void OpenAiApi::Models(const HttpRequest& request, HttpResponder& out) {
  Json model = {
      {"id", model_id_}, {"object", "model"}, {"created", created_}, {"owned_by", "dllm"}};
  // What a client (the canvas page) needs to know to ask for the right
  // settings: the model's default sampler and, for a canvas model, its
  // canvas length; for a block-diffusion model its block length.
  const ModelConfig& c = service_->model().config();
  Json dllm = {{"architecture", std::string(ArchName(c.arch))},
               {"sampler", c.canvas_length > 0  ? "entropy_bound"
                           : c.block_length > 0 ? "llada2"
                                                : "masked"}};
  if (c.canvas_length > 0) dllm["canvas_length"] = c.canvas_length;
  if (c.block_length > 0) dllm["block_length"] = c.block_length;
  model["dllm"] = std::move(dllm);
  SendJson(out, request.path, 200, {{"object", "list"}, {"data", Json::array({model})}});
}

absl::StatusOr<absl::Status> OpenAiApi::Run(const v1::GenerateRequest& generate, RpcKind rpc,
                                            HttpResponder& out, const RunHooks& hooks) {
  GenerationRelay relay;
  DLLM_ASSIGN_OR_RETURN(
      AdmittedGeneration admitted,
      service_->AdmitGeneration(generate, &relay, EngineClock::time_point::max(), rpc));
  // However this function ends (an exception included), the job stops, the
  // mailbox lets go of the relay and the drain stops waiting for the call.
  struct CallEnd {
    CallEnd(DiffusionLmService* s, AdmittedGeneration& a) : service(s), admitted(a) {}
    CallEnd(const CallEnd&) = delete;
    DiffusionLmService* service;
    AdmittedGeneration& admitted;
    ~CallEnd() {
      admitted.job->Cancel(absl::CancelledError("the HTTP request ended"));
      admitted.mailbox->Detach();
      service->CallEnded();
    }
  };
  CallEnd call_end(service_, admitted);
  GenerateMailbox& mailbox = *admitted.mailbox;
  EngineJob& job = *admitted.job;
  Verdict verdict = hooks.admitted(mailbox.request_id()) ? Verdict::kGoOn : Verdict::kClientGone;
  for (;;) {
    if (verdict == Verdict::kClientGone) {
      job.Cancel(absl::CancelledError("the HTTP client disconnected"));
    } else if (verdict == Verdict::kTextComplete) {
      job.Cancel(TextCompleteStatus("the text is complete"));
    }
    std::optional<GenerationRelay::Item> item = relay.Next(kClientCheck);
    if (!item) {
      if (verdict == Verdict::kGoOn && out.ClientGone()) verdict = Verdict::kClientGone;
      continue;
    }
    if (item->end) return *item->end;
    if (verdict == Verdict::kGoOn) verdict = hooks.on_event(*item->event);
    mailbox.OnWriteDone(verdict != Verdict::kClientGone);
  }
}

void OpenAiApi::Complete(OpenAiEndpoint endpoint, const HttpRequest& request, HttpResponder& out) {
  const std::string path = PathOf(endpoint);
  const RpcKind rpc =
      endpoint == OpenAiEndpoint::kCompletions ? RpcKind::kHttpCompletions : RpcKind::kHttpChat;
  absl::StatusOr<Json> body = ParseJson(request.body, JsonLimits{});
  if (!body.ok()) {
    service_->metrics()->OnRejected(rpc, RejectReason::kMalformed,
                                    absl::StatusCode::kInvalidArgument);
    SendError(out, path,
              MakeApiError(400, absl::StrCat("the body is not JSON: ", body.status().message()),
                           "invalid_json"));
    return;
  }
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(endpoint, *body, service_->model(), service_->model_path());
  if (!parsed.ok()) {
    service_->metrics()->OnRejected(rpc, RejectReason::kInvalid, parsed.status().code());
    SendError(out, path, ApiErrorFromStatus(parsed.status(), endpoint));
    return;
  }
  OpenAiRequest& api = *parsed;
  api.generate.mutable_stream()->set_heartbeat_seconds(
      static_cast<uint32_t>(options_.heartbeat_seconds));

  CompletionHeader header;
  header.endpoint = endpoint;
  header.model = model_id_;
  header.created = static_cast<int64_t>(std::time(nullptr));
  std::optional<CompletionRun> run;
  const int32_t mask = service_->model().config().tokens.mask;
  bool client_ok = true;
  bool first_delta = true;
  // Sends one chunk of a stream; a failed write cancels the request.
  const auto send = [&](const std::string& text) {
    if (!api.stream || text.empty() || !client_ok) return;
    client_ok = out.SendEvents(text);
  };
  const auto send_delta = [&](const std::string& delta) {
    if (delta.empty()) return;
    send(EventData(DeltaChunk(header, delta, first_delta)));
    first_delta = false;
  };
  std::string request_id;
  RunHooks hooks;
  hooks.admitted = [&](const std::string& id) {
    request_id = id;
    header.id = absl::StrCat(endpoint == OpenAiEndpoint::kCompletions ? "cmpl-" : "chatcmpl-", id);
    run.emplace(api, service_->model(), header);
    if (api.stream) {
      service_->metrics()->OnHttpResponse(path, 200);
      client_ok = out.StartEvents({{"X-Request-Id", id}});
    }
    return client_ok;
  };
  hooks.on_event = [&](const v1::GenerateEvent& event) {
    if (event.has_progress()) {
      // Comment lines keep proxies from closing a stream that waits.
      send(": ping\n\n");
    } else if (event.has_step()) {
      if (api.canvas) send(CanvasEvent(event.step(), mask));
      send_delta(run->OnStep(event.step()));
    } else if (event.has_final()) {
      send_delta(run->OnFinal(event.final()));
    }
    return client_ok ? Verdict::kGoOn : Verdict::kClientGone;
  };
  absl::StatusOr<absl::Status> ran = Run(api.generate, rpc, out, hooks);
  if (!ran.ok()) {
    SendError(out, path, ApiErrorFromStatus(ran.status(), endpoint));
    return;
  }
  const absl::Status& end = *ran;

  if (!end.ok()) {
    const ApiError error = ApiErrorFromStatus(end, endpoint);
    if (api.stream) {
      send(EventData(ApiErrorBody(error)));
      if (client_ok) out.EndEvents();
    } else {
      SendError(out, path, error);
    }
    return;
  }
  Json extras = DllmExtras(run->final(), request_id);
  if (api.stream) {
    Json finish = FinishChunk(header, run->FinishReason(), run->Logprobs());
    finish["dllm"] = std::move(extras);
    if (api.include_usage) finish["usage"] = nullptr;
    send(EventData(finish));
    if (api.include_usage) send(EventData(UsageChunk(header, run->final().usage())));
    send("data: [DONE]\n\n");
    if (client_ok) out.EndEvents();
    return;
  }
  Json whole = WholeResponse(header, run->text(), run->FinishReason(), run->Logprobs(),
                             run->final().usage());
  whole["dllm"] = std::move(extras);
  SendJson(out, path, 200, whole, {{"X-Request-Id", request_id}});
}

}  // namespace dllm
