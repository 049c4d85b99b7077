// POST /infill: llama-server's infill endpoint on the one engine path of
// Prompt.suffix (infill_request.h says what is read and how the canvas is
// built). Replies in llama-server's shapes: one compact JSON object (an
// array of them for n_cmpl > 1), or server-sent events of {content, stop:
// false} chunks ending with the whole object with stop: true and no
// [DONE]; errors as {"error": {"code", "message", "type"}}.
#include <chrono>
#include <cstdio>
#include <mutex>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "service/http/infill_request.h"
#include "service/http/openai_api.h"
#include "service/http/openai_response.h"
#include "service/http/stop_text.h"
#include "service/server/request_validation.h"

namespace dllm {
namespace {

constexpr const char* kPath = "/infill";
using Clock = std::chrono::steady_clock;

double MsBetween(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::milli>(b - a).count();
}

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
bool SeedMatters(const v1::GenerateRequest& r) {
  const v1::Algorithm a = r.diffusion().algorithm();
  return r.sampling().temperature() > 0 || r.sampling().alg_temp() > 0 ||
         a == v1::ALGORITHM_RANDOM || a == v1::ALGORITHM_ORIGIN;
}

// The end of a text that ran out of time: up to and including its last
// newline when it holds one (whole lines), else all of it (whole tokens).
std::string_view CutAtLastNewline(std::string_view text) {
  const size_t newline = text.rfind('\n');
  return newline == std::string_view::npos ? text : text.substr(0, newline + 1);
}

// One completion's text and how it ended, from its events (one StepEvent
// a step, with timings).
//
// t_max_predict_ms, the diffusion way: llama-server stops once a newline
// has been generated after the limit, but a canvas commits out of order, so
// the text read left to right may hold its first newline only near the
// end. Here, once the time since the first step is over the limit, the
// run stops and the answer is the committed text from the span's front up
// to its first masked position, cut at its last newline when it holds one
// (whole lines), else whole as committed (whole tokens), else nothing.
struct InfillRun {
  InfillRun(const InfillRequest& request, const BpeTokenizer& tokenizer)
      : stop(request.stop, request.n_indent),
        t_max_ms(request.t_max_predict_ms),
        tokenizer(tokenizer),
        span_ids(static_cast<size_t>(std::max(request.n_predict, 0)), -1) {}

  // The text to send for a StepEvent; sets `ended_early` when the text is
  // complete before the canvas is (a stop string, n_indent, the time limit).
  std::string OnStep(const v1::StepEvent& step) {
    const Clock::time_point now = Clock::now();
    // The first forward computes the whole canvas: llama-server's prompt
    // processing, its time the forward's own (not the queue's). A step
    // that commits nothing runs none (Dream's first): the first step that
    // ran one starts the generation's clock.
    if (!first_step && step.timings().forward_seconds() > 0) {
      first_step = now;
      prompt_ms = 1e3 * step.timings().forward_seconds();
    }
    for (const v1::CommittedToken& t : step.committed()) {
      if (t.position() < span_ids.size())
        span_ids[t.position()] = static_cast<int32_t>(t.token_id());
    }
    stable_tokens = static_cast<int>(step.stable_length());
    steps = static_cast<int>(step.step());
    raw += step.text_delta();
    std::string ready = stop.Add(step.text_delta());
    if (!stop.stopped() && t_max_ms > 0 && first_step && MsBetween(*first_step, now) > t_max_ms) {
      timed_out = true;
    }
    if (stop.stopped() || timed_out) ready += Finish();
    return Gate(std::move(ready));
  }
  std::string OnFinal(const v1::Final& f) {
    final = f;
    std::string rest;
    if (absl::StartsWith(f.text(), raw))
      rest = stop.Add(absl::string_view(f.text()).substr(raw.size()));
    return Gate(rest + Finish());
  }
  std::string Finish() {
    end = Clock::now();
    finished = true;
    return stop.Finish();
  }
  // With a time budget, a stream lets out whole lines only: what follows
  // the last newline may yet be cut (at the limit) and cannot be taken
  // back once sent. At the end it goes out unless the limit cut it.
  std::string Gate(std::string ready) {
    if (t_max_ms <= 0) return ready;  // else `ready` is in stop.text()
    // What may go out: the answer once finished, else the whole lines.
    const std::string& text = stop.text();
    size_t upto = 0;
    if (finished) {
      upto = Content().size();
    } else if (absl::StrContains(text, '\n')) {
      upto = CutAtLastNewline(text).size();
    }
    if (upto <= sent) return "";
    std::string out = text.substr(sent, upto - sent);
    sent = upto;
    return out;
  }
  bool ended_early() const { return stop.stopped() || timed_out; }
  // The answer: the text as the stop handling and the time limit end it.
  std::string Content() const {
    return timed_out ? std::string(CutAtLastNewline(stop.text())) : stop.text();
  }
  const char* StopType() const {
    if (!stop.stop_word().empty()) return "word";
    if (stop.stopped() || timed_out) return "limit";
    if (final && final->finish_reason() == v1::FINISH_REASON_EOS) return "eos";
    return "limit";
  }
  // The span tokens the answer returns: all the generated ones when the
  // canvas completed, else those of the committed front that the returned
  // text covers.
  int TokensPredicted() const {
    if (final && !ended_early()) return static_cast<int>(final->usage().generated_tokens());
    const size_t bytes = Content().size();
    size_t covered = 0;
    int n = 0;
    for (int i = 0; i < stable_tokens && i < static_cast<int>(span_ids.size()); ++i) {
      if (span_ids[i] < 0 || !tokenizer.IsValid(span_ids[i])) break;
      covered += tokenizer.TokenPiece(span_ids[i]).size();
      if (covered > bytes) break;
      ++n;
    }
    return n;
  }

  StopText stop;
  const int t_max_ms;
  const BpeTokenizer& tokenizer;
  std::vector<int32_t> span_ids;  // committed span tokens (-1: masked)
  std::string raw;                // the text deltas before the stop handling
  size_t sent = 0;                // bytes of a timed stream's text let out
  bool timed_out = false;
  bool finished = false;
  int stable_tokens = 0;
  int steps = 0;  // run so far
  double prompt_ms = 0;
  std::optional<v1::Final> final;
  std::string request_id;
  uint64_t seed = 0;
  Clock::time_point admitted;
  std::optional<Clock::time_point> first_step;
  Clock::time_point end;
};

}  // namespace

void OpenAiApi::Infill(const HttpRequest& request, HttpResponder& out) {
  const auto fail = [&](const ApiError& e) { SendError(out, kPath, e, InfillErrorBody(e)); };
  absl::StatusOr<Json> body = ParseJson(request.body, JsonLimits{});
  if (!body.ok()) {
    service_->metrics()->OnRejected(RpcKind::kHttpInfill, RejectReason::kMalformed,
                                    absl::StatusCode::kInvalidArgument);
    fail(MakeApiError(400, absl::StrCat("the body is not JSON: ", body.status().message()),
                      "invalid_json"));
    return;
  }
  absl::StatusOr<InfillRequest> parsed = ParseInfillRequest(*body, service_->model());
  if (!parsed.ok()) {
    service_->metrics()->OnRejected(RpcKind::kHttpInfill, RejectReason::kInvalid,
                                    parsed.status().code());
    ApiError e = ApiErrorFromStatus(parsed.status(), OpenAiEndpoint::kInfill);
    if (parsed.status().code() == absl::StatusCode::kOutOfRange)
      e.type = "exceed_context_size_error";
    fail(e);
    return;
  }
  const InfillRequest& infill = *parsed;
  WarnIgnoredOnce(kPath, infill.ignored);
  const ModelConfig& c = service_->model().config();
  // llama-server's `prompt`: the canvas's text before the span.
  const std::vector<int32_t> prompt_ids(infill.generate.prompt().token_ids().ids().begin(),
                                        infill.generate.prompt().token_ids().ids().end());
  const std::string prompt_text = service_->model().tokenizer().Decode(prompt_ids).value_or("");
  const int tokens_evaluated = infill.generate.prompt().token_ids().ids_size() +
                               infill.generate.prompt().suffix().token_ids().ids_size();

  // The whole object of one completion, in llama-server's key order.
  const auto whole = [&](int index, const InfillRun* run, const std::string& content) {
    // prompt_ms: the first forward, over the whole canvas; predicted_ms:
    // the rest of the run; predicted_n: the tokens returned.
    const double prompt_ms = run ? run->prompt_ms : 0;
    const double predicted_ms = run && run->first_step ? MsBetween(*run->first_step, run->end) : 0;
    const int predicted = run ? run->TokensPredicted() : 0;
    const auto per_token = [](double ms, int n) { return n > 0 ? ms / n : 0.0; };
    const auto per_second = [](double ms, int n) { return ms > 0 ? 1e3 * n / ms : 0.0; };
    Json o = Json::object();
    o["index"] = index;
    o["content"] = content;
    o["tokens"] = Json::array();
    o["id_slot"] = infill.id_slot;
    o["stop"] = true;
    o["model"] = model_id_;
    o["tokens_predicted"] = predicted;
    o["tokens_evaluated"] = tokens_evaluated;
    const v1::SamplingParams& s = infill.generate.sampling();
    o["generation_settings"] = {{"n_predict", infill.n_predict},
                                {"seed", run ? run->seed : s.seed()},
                                {"temperature", s.temperature()},
                                {"top_k", s.top_k()},
                                {"top_p", s.top_p() == 0 ? 1.0f : s.top_p()},
                                {"stop", infill.stop},
                                {"n_indent", infill.n_indent},
                                {"t_max_predict_ms", infill.t_max_predict_ms},
                                {"stream", infill.stream},
                                {"samplers", infill.samplers},
                                {"n_ctx", c.n_ctx_train}};
    o["prompt"] = prompt_text;
    o["has_new_line"] = absl::StrContains(content, '\n');
    o["truncated"] = infill.trimmed.any();
    o["stop_type"] = run ? run->StopType() : "limit";
    o["stopping_word"] = run ? run->stop.stop_word() : "";
    // Nothing stays cached between requests: every step computes the canvas.
    o["tokens_cached"] = 0;
    o["timings"] = {{"cache_n", 0},
                    {"prompt_n", tokens_evaluated},
                    {"prompt_ms", prompt_ms},
                    {"prompt_per_token_ms", per_token(prompt_ms, tokens_evaluated)},
                    {"prompt_per_second", per_second(prompt_ms, tokens_evaluated)},
                    {"predicted_n", predicted},
                    {"predicted_ms", predicted_ms},
                    {"predicted_per_token_ms", per_token(predicted_ms, predicted)},
                    {"predicted_per_second", per_second(predicted_ms, predicted)}};
    Json extras = run && run->final ? DllmExtras(*run->final, run->request_id)
                                    : Json({{"request_id", run ? run->request_id : ""}});
    if (run && !run->final) {
      // Stopped before its canvas completed (a stop string, n_indent, the
      // time budget): the steps it ran and the tokens it returned.
      extras["steps"] = run->steps;
      extras["token_ids"] = std::vector<int32_t>(run->span_ids.begin(),
                                                 run->span_ids.begin() + run->TokensPredicted());
    }
    extras["span"] = infill.n_predict;
    // The schedule and cache the request ran with (/infill's defaults
    // included: small blocks, the dual cache for cache_prompt).
    extras["block_length"] = infill.generate.diffusion().block_length();
    extras["cache"] =
        std::string(CacheModeName(CacheModeFromProto(infill.generate.diffusion().cache())));
    extras["suffix_tokens"] = infill.generate.prompt().suffix().token_ids().ids_size();
    extras["trimmed"] = {{"prefix_tokens", infill.trimmed.prefix},
                         {"suffix_tokens", infill.trimmed.suffix},
                         {"extra_tokens", infill.trimmed.extra},
                         {"prefix_bytes", infill.trimmed.prefix_bytes},
                         {"suffix_bytes", infill.trimmed.suffix_bytes},
                         {"extra_bytes", infill.trimmed.extra_bytes}};
    o["dllm"] = std::move(extras);
    return infill.select_fields ? SelectResponseFields(o, infill.response_fields) : o;
  };

  // llama-server's warm-up (n_predict 0) fills its KV cache for the next
  // request; here there is nothing to keep, so it is answered at once.
  if (infill.warm_up) {
    SendJson(out, kPath, 200, whole(0, nullptr, ""));
    return;
  }

  bool client_ok = true;
  const auto send = [&](const Json& chunk) {
    if (client_ok) client_ok = out.SendEvents(absl::StrCat("data: ", DumpJson(chunk), "\n\n"));
  };
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
    v1::GenerateRequest generate = infill.generate;
    if (k > 0 && generate.sampling().has_seed()) {
      generate.mutable_sampling()->set_seed(generate.sampling().seed() + k);
    }
    InfillRun run(infill, service_->model().tokenizer());
    run.admitted = Clock::now();
    RunHooks hooks;
    hooks.admitted = [&](const std::string& id) {
      run.request_id = id;
      if (infill.stream) {
        service_->metrics()->OnHttpResponse(kPath, 200);
        client_ok = out.StartEvents({{"X-Request-Id", id}});
      }
      return client_ok;
    };
    hooks.on_event = [&](const v1::GenerateEvent& event) {
      std::string delta;
      if (event.has_started()) run.seed = event.started().seed();
      if (event.has_progress() && infill.stream && client_ok) {
        client_ok = out.SendEvents(": ping\n\n");
      }
      if (event.has_step()) delta = run.OnStep(event.step());
      if (event.has_final()) delta = run.OnFinal(event.final());
      if (infill.stream && !delta.empty()) {
        send({{"index", 0},
              {"content", delta},
              {"tokens", Json::array()},
              {"stop", false},
              {"id_slot", infill.id_slot},
              {"tokens_predicted", run.stable_tokens},
              {"tokens_evaluated", tokens_evaluated}});
      }
      if (!client_ok) return Verdict::kClientGone;
      // The text is complete: the rest of the canvas is not needed.
      return run.ended_early() ? Verdict::kTextComplete : Verdict::kGoOn;
    };
    absl::StatusOr<absl::Status> ran = Run(generate, RpcKind::kHttpInfill, out, hooks);
    if (!ran.ok()) {
      fail(ApiErrorFromStatus(ran.status(), OpenAiEndpoint::kInfill));
      return;
    }
    if (!ran->ok() && !run.ended_early()) {
      const ApiError e = ApiErrorFromStatus(*ran, OpenAiEndpoint::kInfill);
      if (!infill.stream) {
        fail(e);
      } else if (client_ok) {
        send(InfillErrorBody(e));
        out.EndEvents();
      }
      return;
    }
    if (infill.stream) {
      send(whole(0, &run, ""));
      if (client_ok) out.EndEvents();
      return;
    }
    results.push_back(whole(k, &run, run.Content()));
  }
  SendJson(out, kPath, 200, infill.n_cmpl == 1 ? results[0] : results);
}

void OpenAiApi::WarnIgnoredOnce(const char* path, const std::vector<std::string>& fields) {
  // Field names come from clients: escaped, cut short, and the set of
  // names warned about is bounded.
  constexpr size_t kMaxWarned = 256, kMaxName = 64;
  std::vector<std::string> fresh;
  bool now_full = false;  // this call filled the set: said once, then silence
  {
    std::lock_guard<std::mutex> lock(warned_mu_);
    for (const std::string& f : fields) {
      const std::string name = absl::CHexEscape(f.substr(0, kMaxName));
      const std::string key = absl::StrCat(path, " ", name);
      if (warned_.size() < kMaxWarned) {
        if (warned_.insert(key).second) fresh.push_back(name);
      } else if (!warned_full_ && !warned_.contains(key)) {
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
               path, absl::StrJoin(fresh, ", ").c_str());
}

}  // namespace dllm
