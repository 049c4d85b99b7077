#include "service/http/infill_endpoint.h"

#include <cstdio>
#include <optional>
#include <utility>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/http/api_reply.h"
#include "service/http/generation_relay.h"
#include "service/http/infill_request.h"
#include "service/http/infill_run.h"
#include "service/http/openai_response.h"

namespace dllm {
namespace {

constexpr const char* kPath = "/infill";

// llama-server's error body: {"error": {"code", "message", "type"}}.
Json InfillErrorBody(const ApiError& e) {
  std::string type = e.type;
  if (e.status == 404) type = "not_found_error";
  if (e.status == 501) type = "not_supported_error";
  if (e.status == 503) type = "unavailable_error";
  return {{"error", {{"code", e.status}, {"message", e.message}, {"type", type}}}};
}

// Whether the completions of one request can differ: only when something
// draws from the seed.
bool SeedMatters(const GenerationRequest& r) {
  const std::optional<Algorithm> a = r.diffusion.algorithm;
  return r.sampling.temperature > 0 || r.sampling.alg_temp > 0 || a == Algorithm::kRandom ||
         a == Algorithm::kOrigin;
}

// One parsed request's responses: llama-server's objects, and the events
// of its completions.
class InfillCall {
 public:
  InfillCall(const InfillRequest& infill, Admission& admission, const std::string& model_id,
             HttpResponder& out)
      : infill_(infill), admission_(admission), model_id_(model_id), out_(out) {
    const GenerationRequest::Prompt& p = infill.generate.prompt;
    const std::vector<int32_t> prompt_ids(p.token_ids.begin(), p.token_ids.end());
    // llama-server's `prompt`: the canvas's text before the span.
    prompt_text_ = admission.model().tokenizer().Decode(prompt_ids).value_or("");
    tokens_evaluated_ = static_cast<int>(p.token_ids.size() + p.suffix_token_ids.size());
  }

  void Fail(const ApiError& e) {
    SendError(out_, *admission_.metrics(), kPath, e, InfillErrorBody(e));
  }

  // The whole object of one completion, in llama-server's key order (null
  // `run`: the warm-up's, with nothing generated).
  Json Whole(int index, const InfillRun* run, const std::string& content) const {
    const int predicted = run ? run->TokensPredicted() : 0;
    Json o = Json::object();
    o["index"] = index;
    o["content"] = content;
    o["tokens"] = Json::array();
    o["id_slot"] = infill_.id_slot;
    o["stop"] = true;
    o["model"] = model_id_;
    o["tokens_predicted"] = predicted;
    o["tokens_evaluated"] = tokens_evaluated_;
    o["generation_settings"] = Settings(run);
    o["prompt"] = prompt_text_;
    o["has_new_line"] = absl::StrContains(content, '\n');
    o["truncated"] = infill_.trimmed.any();
    o["stop_type"] = run ? run->StopType() : "limit";
    o["stopping_word"] = run ? run->stop_word() : "";
    // Nothing stays cached between requests: every step computes the canvas.
    o["tokens_cached"] = 0;
    o["timings"] = Timings(run, predicted);
    o["dllm"] = Extras(run);
    return infill_.select_fields ? SelectResponseFields(o, infill_.response_fields) : o;
  }

  // One completion: its events relayed, its object kept in `results` (a
  // stream's is sent). False when the request is over (an error, a stream).
  bool RunOne(int k, Json* results) {
    GenerationRequest generate = infill_.generate;
    if (k > 0 && generate.sampling.seed) *generate.sampling.seed += k;
    InfillRun run(infill_, admission_.model().tokenizer());
    absl::StatusOr<absl::Status> ran =
        RunGeneration(admission_, generate, RpcKind::kHttpInfill, out_, Hooks(run));
    if (!ran.ok()) {
      Fail(ApiErrorFromStatus(ran.status(), OpenAiEndpoint::kInfill));
      return false;
    }
    if (!ran->ok() && !run.ended_early()) {
      const ApiError e = ApiErrorFromStatus(*ran, OpenAiEndpoint::kInfill);
      if (!infill_.stream) {
        Fail(e);
      } else if (client_ok_) {
        SendChunk(InfillErrorBody(e));
        out_.EndEvents();
      }
      return false;
    }
    if (infill_.stream) {
      SendChunk(Whole(0, &run, ""));
      if (client_ok_) out_.EndEvents();
      return false;
    }
    results->push_back(Whole(k, &run, run.Content()));
    return true;
  }

 private:
  Json Settings(const InfillRun* run) const {
    const GenerationRequest::Sampling& s = infill_.generate.sampling;
    return {{"n_predict", infill_.n_predict},
            {"seed", run ? run->seed : s.seed.value_or(0)},
            {"temperature", s.temperature},
            {"top_k", s.top_k},
            {"top_p", s.top_p == 0 ? 1.0f : s.top_p},
            {"stop", infill_.stop},
            {"n_indent", infill_.n_indent},
            {"t_max_predict_ms", infill_.t_max_predict_ms},
            {"stream", infill_.stream},
            {"samplers", infill_.samplers},
            {"n_ctx", admission_.model().config().n_ctx_train}};
  }

  // prompt_ms: the first forward, over the whole canvas; predicted_ms: the
  // rest of the run; predicted_n: the tokens returned.
  Json Timings(const InfillRun* run, int predicted) const {
    const double prompt_ms = run ? run->prompt_ms() : 0;
    const double predicted_ms = run ? run->predicted_ms() : 0;
    const auto per_token = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
    const auto per_second = [](double ms, int n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
    return {{"cache_n", 0},
            {"prompt_n", tokens_evaluated_},
            {"prompt_ms", prompt_ms},
            {"prompt_per_token_ms", per_token(prompt_ms, tokens_evaluated_)},
            {"prompt_per_second", per_second(prompt_ms, tokens_evaluated_)},
            {"predicted_n", predicted},
            {"predicted_ms", predicted_ms},
            {"predicted_per_token_ms", per_token(predicted_ms, predicted)},
            {"predicted_per_second", per_second(predicted_ms, predicted)}};
  }

  Json Extras(const InfillRun* run) const {
    Json extras = run && run->final() ? DllmExtras(*run->final(), run->request_id)
                                      : Json({{"request_id", run ? run->request_id : ""}});
    if (run && !run->final()) {
      // Stopped before its canvas completed (a stop string, n_indent, the
      // time budget): the steps it ran and the tokens it returned.
      extras["steps"] = run->steps();
      extras["token_ids"] = run->PredictedIds();
    }
    const GenerationRequest& g = infill_.generate;
    extras["span"] = infill_.n_predict;
    // The schedule and cache the request ran with (/infill's defaults
    // included: small blocks, the dual cache for cache_prompt).
    extras["block_length"] = g.diffusion.block_length;
    extras["cache"] = std::string(CacheModeName(g.diffusion.cache.value_or(CacheMode::kNone)));
    extras["suffix_tokens"] = static_cast<int>(g.prompt.suffix_token_ids.size());
    const InfillTrim& t = infill_.trimmed;
    extras["trimmed"] = {{"prefix_tokens", t.prefix},      {"suffix_tokens", t.suffix},
                         {"extra_tokens", t.extra},        {"prefix_bytes", t.prefix_bytes},
                         {"suffix_bytes", t.suffix_bytes}, {"extra_bytes", t.extra_bytes}};
    return extras;
  }

  GenerationHooks Hooks(InfillRun& run) {
    GenerationHooks hooks;
    hooks.admitted = [this, &run](const std::string& id) {
      run.request_id = id;
      if (infill_.stream) {
        admission_.metrics()->OnHttpResponse(kPath, 200);
        client_ok_ = out_.StartEvents({{"X-Request-Id", id}});
      }
      return client_ok_;
    };
    hooks.on_event = [this, &run](const v1::GenerateEvent& event) {
      std::string delta;
      if (event.has_started()) run.seed = event.started().seed();
      if (event.has_progress() && infill_.stream && client_ok_) {
        client_ok_ = out_.SendEvents(": ping\n\n");
      }
      if (event.has_step()) delta = run.OnStep(event.step());
      if (event.has_final()) delta = run.OnFinal(event.final());
      if (infill_.stream && !delta.empty()) {
        SendChunk({{"index", 0},
                   {"content", delta},
                   {"tokens", Json::array()},
                   {"stop", false},
                   {"id_slot", infill_.id_slot},
                   {"tokens_predicted", run.stable_tokens()},
                   {"tokens_evaluated", tokens_evaluated_}});
      }
      if (!client_ok_) return Verdict::kClientGone;
      // The text is complete: the rest of the canvas is not needed.
      return run.ended_early() ? Verdict::kTextComplete : Verdict::kGoOn;
    };
    return hooks;
  }

  void SendChunk(const Json& chunk) {
    if (client_ok_) client_ok_ = out_.SendEvents(EventData(chunk));
  }

  const InfillRequest& infill_;
  Admission& admission_;
  const std::string& model_id_;
  HttpResponder& out_;
  std::string prompt_text_;
  int tokens_evaluated_ = 0;
  bool client_ok_ = true;
};

}  // namespace

InfillEndpoint::InfillEndpoint(Admission* admission, std::string model_id)
    : admission_(admission), model_id_(std::move(model_id)) {}

void InfillEndpoint::Handle(const HttpRequest& request, HttpResponder& out) {
  ServiceMetrics& metrics = *admission_->metrics();
  const auto fail = [&](const ApiError& e) {
    SendError(out, metrics, kPath, e, InfillErrorBody(e));
  };
  absl::StatusOr<Json> body = ParseJson(request.body, JsonLimits{});
  if (!body.ok()) {
    metrics.OnRejected(RpcKind::kHttpInfill, RejectReason::kMalformed,
                       absl::StatusCode::kInvalidArgument);
    fail(MakeApiError(400, absl::StrCat("the body is not JSON: ", body.status().message()),
                      "invalid_json"));
    return;
  }
  absl::StatusOr<InfillRequest> parsed = ParseInfillRequest(*body, admission_->model());
  if (!parsed.ok()) {
    metrics.OnRejected(RpcKind::kHttpInfill, RejectReason::kInvalid, parsed.status().code());
    ApiError e = ApiErrorFromStatus(parsed.status(), OpenAiEndpoint::kInfill);
    if (parsed.status().code() == absl::StatusCode::kOutOfRange) {
      e.type = "exceed_context_size_error";
    }
    fail(e);
    return;
  }
  const InfillRequest& infill = *parsed;
  WarnIgnoredOnce(infill.ignored);
  InfillCall call(infill, *admission_, model_id_, out);
  // llama-server's warm-up (n_predict 0) fills its KV cache for the next
  // request; here there is nothing to keep, so it is answered at once.
  if (infill.warm_up) {
    SendJson(out, metrics, kPath, 200, call.Whole(0, nullptr, ""));
    return;
  }
  Json results = Json::array();
  const bool seed_matters = SeedMatters(infill.generate);
  for (int k = 0; k < infill.n_cmpl; ++k) {
    // A deterministic request's completions are one run, repeated.
    if (k > 0 && !seed_matters) {
      Json again = results[0];
      if (again.is_object() && again.contains("index")) again["index"] = k;
      results.push_back(std::move(again));
      continue;
    }
    if (!call.RunOne(k, &results)) return;
  }
  SendJson(out, metrics, kPath, 200, infill.n_cmpl == 1 ? results[0] : results);
}

void InfillEndpoint::WarnIgnoredOnce(const std::vector<std::string>& fields) {
  // Field names come from clients: escaped, cut short, and the set of
  // names warned about is bounded.
  constexpr size_t kMaxWarned = 256, kMaxName = 64;
  std::vector<std::string> fresh;
  bool now_full = false;  // this call filled the set: said once, then silence
  {
    std::lock_guard<std::mutex> lock(warned_mu_);
    for (const std::string& f : fields) {
      const std::string name = absl::CHexEscape(f.substr(0, kMaxName));
      if (warned_.size() < kMaxWarned) {
        if (warned_.insert(name).second) fresh.push_back(name);
      } else if (!warned_full_ && !warned_.contains(name)) {
        warned_full_ = now_full = true;
      }
    }
  }
  if (now_full) {
    std::fprintf(stderr,
                 "dllm-server: warning: %zu distinct ignored fields named; further ones are "
                 "accepted as before but no longer named in the log\n",
                 kMaxWarned);
  }
  if (fresh.empty()) return;
  std::fprintf(stderr,
               "dllm-server: warning: %s: ignoring %s (accepted for llama-server's clients; "
               "no effect on a diffusion canvas; said once per field)\n",
               kPath, absl::StrJoin(fresh, ", ").c_str());
}

}  // namespace dllm
