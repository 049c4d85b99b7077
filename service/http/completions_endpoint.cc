#include "service/http/completions_endpoint.h"

#include <cmath>
#include <ctime>
#include <map>
#include <optional>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "service/http/api_reply.h"
#include "service/http/generation_relay.h"
#include "service/http/openai_response.h"
#include "service/http/text_relay.h"

namespace dllm {
namespace {

const char* PathOf(OpenAiEndpoint endpoint) {
  return endpoint == OpenAiEndpoint::kCompletions ? "/v1/completions" : "/v1/chat/completions";
}

// One generation's events turned into the API's text (TextRelay) and
// logprobs; the same for a stream and a whole response, so that the deltas,
// concatenated, are the whole response's text.
class CompletionRun {
 public:
  CompletionRun(const OpenAiRequest& request, const Model& model, CompletionHeader header)
      : request_(request), model_(model), header_(std::move(header)), text_(request.stop) {}

  // The text to send for a StepEvent (possibly empty).
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
    return text_.OnDelta(step.text_delta());
  }

  // The rest of the text at the Final.
  std::string OnFinal(const v1::Final& final) {
    final_ = final;
    return text_.OnFinal(final.text());
  }

  const std::string& text() const { return text_.text(); }
  const v1::Final& final() const { return final_; }
  const CompletionHeader& header() const { return header_; }

  const char* FinishReason() const {
    return text_.stopped() || final_.finish_reason() == v1::FINISH_REASON_EOS ? "stop" : "length";
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
  TextRelay text_;
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

// One request's call: what it has sent, and how it answers each event.
class CompletionCall {
 public:
  CompletionCall(const OpenAiRequest& api, Admission& admission, const std::string& model_id,
                 HttpResponder& out)
      : api_(api), admission_(admission), out_(out), path_(PathOf(api.endpoint)) {
    header_.endpoint = api.endpoint;
    header_.model = model_id;
    header_.created = static_cast<int64_t>(std::time(nullptr));
  }

  GenerationHooks Hooks() {
    GenerationHooks hooks;
    hooks.admitted = [this](const std::string& id) { return Admitted(id); };
    hooks.on_event = [this](const v1::GenerateEvent& event) { return OnEvent(event); };
    return hooks;
  }

  // How the call ended: the error, or the last of the stream or the whole
  // response.
  void End(const absl::Status& end) {
    if (!end.ok()) {
      const ApiError error = ApiErrorFromStatus(end, api_.endpoint);
      if (!api_.stream) return SendError(out_, *admission_.metrics(), path_, error);
      Send(EventData(ApiErrorBody(error)));
      if (client_ok_) out_.EndEvents();
      return;
    }
    Json extras = DllmExtras(run_->final(), request_id_);
    if (api_.stream) {
      Json finish = FinishChunk(header_, run_->FinishReason(), run_->Logprobs());
      finish["dllm"] = std::move(extras);
      if (api_.include_usage) finish["usage"] = nullptr;
      Send(EventData(finish));
      if (api_.include_usage) Send(EventData(UsageChunk(header_, run_->final().usage())));
      Send("data: [DONE]\n\n");
      if (client_ok_) out_.EndEvents();
      return;
    }
    Json whole = WholeResponse(header_, run_->text(), run_->FinishReason(), run_->Logprobs(),
                               run_->final().usage());
    whole["dllm"] = std::move(extras);
    SendJson(out_, *admission_.metrics(), path_, 200, whole, {{"X-Request-Id", request_id_}});
  }

 private:
  bool Admitted(const std::string& id) {
    request_id_ = id;
    header_.id =
        absl::StrCat(api_.endpoint == OpenAiEndpoint::kCompletions ? "cmpl-" : "chatcmpl-", id);
    run_.emplace(api_, admission_.model(), header_);
    if (api_.stream) {
      admission_.metrics()->OnHttpResponse(path_, 200);
      client_ok_ = out_.StartEvents({{"X-Request-Id", id}});
    }
    return client_ok_;
  }

  Verdict OnEvent(const v1::GenerateEvent& event) {
    if (event.has_progress()) {
      // Comment lines keep proxies from closing a stream that waits.
      Send(": ping\n\n");
    } else if (event.has_step()) {
      if (api_.canvas) Send(CanvasEvent(event.step(), admission_.model().config().tokens.mask));
      SendDelta(run_->OnStep(event.step()));
    } else if (event.has_final()) {
      SendDelta(run_->OnFinal(event.final()));
    }
    return client_ok_ ? Verdict::kGoOn : Verdict::kClientGone;
  }

  // One chunk of a stream; a failed write cancels the request.
  void Send(const std::string& text) {
    if (!api_.stream || text.empty() || !client_ok_) return;
    client_ok_ = out_.SendEvents(text);
  }
  void SendDelta(const std::string& delta) {
    if (delta.empty()) return;
    Send(EventData(DeltaChunk(header_, delta, first_delta_)));
    first_delta_ = false;
  }

  const OpenAiRequest& api_;
  Admission& admission_;
  HttpResponder& out_;
  const std::string path_;
  CompletionHeader header_;
  std::optional<CompletionRun> run_;
  std::string request_id_;
  bool client_ok_ = true;
  bool first_delta_ = true;
};

}  // namespace

CompletionsEndpoint::CompletionsEndpoint(Admission* admission, std::string model_id,
                                         int heartbeat_seconds)
    : admission_(admission),
      model_id_(std::move(model_id)),
      heartbeat_seconds_(heartbeat_seconds) {}

void CompletionsEndpoint::Handle(OpenAiEndpoint endpoint, const HttpRequest& request,
                                 HttpResponder& out) {
  ServiceMetrics& metrics = *admission_->metrics();
  const std::string path = PathOf(endpoint);
  const RpcKind rpc =
      endpoint == OpenAiEndpoint::kCompletions ? RpcKind::kHttpCompletions : RpcKind::kHttpChat;
  absl::StatusOr<Json> body = ParseJson(request.body, JsonLimits{});
  if (!body.ok()) {
    metrics.OnRejected(rpc, RejectReason::kMalformed, absl::StatusCode::kInvalidArgument);
    SendError(out, metrics, path,
              MakeApiError(400, absl::StrCat("the body is not JSON: ", body.status().message()),
                           "invalid_json"));
    return;
  }
  absl::StatusOr<OpenAiRequest> parsed =
      ParseOpenAiRequest(endpoint, *body, admission_->model(), admission_->model_path());
  if (!parsed.ok()) {
    metrics.OnRejected(rpc, RejectReason::kInvalid, parsed.status().code());
    SendError(out, metrics, path, ApiErrorFromStatus(parsed.status(), endpoint));
    return;
  }
  parsed->generate.stream.heartbeat_seconds = static_cast<uint32_t>(heartbeat_seconds_);
  CompletionCall call(*parsed, *admission_, model_id_, out);
  absl::StatusOr<absl::Status> ran =
      RunGeneration(*admission_, parsed->generate, rpc, out, call.Hooks());
  if (!ran.ok()) {
    SendError(out, metrics, path, ApiErrorFromStatus(ran.status(), endpoint));
    return;
  }
  call.End(*ran);
}

}  // namespace dllm
