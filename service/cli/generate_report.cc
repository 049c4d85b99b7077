#include "service/cli/generate_report.h"

#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/base/utf8.h"

namespace dllm {
namespace {

// A token as it appears in the canvas view: its text with newlines and tabs
// made visible, special tokens in their written form.
std::string CanvasPiece(const BpeTokenizer& tok, int32_t id) {
  std::string out;
  for (char ch : tok.TokenPiece(id)) {
    if (ch == '\n') {
      out += "\xe2\x8f\x8e";  // ⏎
    } else if (ch == '\t') {
      out += "\xe2\x87\xa5";  // ⇥
    } else {
      out += ch;
    }
  }
  return SanitizeUtf8(out);
}

// The --json timings of a run of `steps` steps.
Json TimingsJson(const RunTotals& totals, int steps) {
  Json timings = Json::object();
  timings["load_ms"] = totals.load_seconds * 1e3;
  timings["total_ms"] = totals.total_seconds * 1e3;
  timings["forward_ms"] = totals.forward_seconds * 1e3;
  timings["sample_ms"] = totals.sample_seconds * 1e3;
  timings["ms_per_step"] = steps ? totals.total_seconds * 1e3 / steps : 0.0;
  return timings;
}

}  // namespace

void DrawCanvas(const Model& model, const DenoiseSession& session, const StepReport& step,
                int planned_steps) {
  const BpeTokenizer& tok = model.tokenizer();
  const int32_t mask = model.config().tokens.mask;
  std::set<int32_t> fresh(step.positions.begin(), step.positions.end());
  std::string frame = "\x1b[H\x1b[2J";
  absl::StrAppendFormat(&frame, "step %d/%d  committed %d  masked %d  %.0f ms\n\n", step.step + 1,
                        planned_steps, static_cast<int>(step.positions.size()),
                        step.masked_remaining, step.step_seconds * 1e3);
  const std::span<const int32_t> canvas = session.canvas();
  for (int p = 0; p < session.prompt_len(); ++p) frame += CanvasPiece(tok, canvas[p]);
  for (size_t p = static_cast<size_t>(session.prompt_len()); p < canvas.size(); ++p) {
    if (canvas[p] == mask) {
      frame += "\x1b[2m\xe2\x96\x91\x1b[0m";  // dim ░
    } else if (fresh.count(static_cast<int32_t>(p))) {
      frame += "\x1b[1;30;42m" + CanvasPiece(tok, canvas[p]) + "\x1b[0m";
    } else {
      frame += CanvasPiece(tok, canvas[p]);
    }
  }
  frame += "\n";
  std::fwrite(frame.data(), 1, frame.size(), stdout);
  std::fflush(stdout);
}

Json IdsJson(std::span<const int32_t> ids) {
  Json a = Json::array();
  for (int32_t id : ids) a.push_back(id);
  return a;
}

Json StepJson(const StepReport& step) {
  Json s = Json::object();
  s["step"] = step.step;
  s["positions"] = IdsJson(step.positions);
  s["tokens"] = IdsJson(step.tokens);
  s["n_forward"] = step.forward_passes;
  s["rows_computed"] = step.rows_computed;
  s["cache"] = CacheUseName(step.cache_use);
  s["ms"] = step.step_seconds * 1e3;
  s["forward_ms"] = step.forward_seconds * 1e3;
  s["sample_ms"] = step.sample_seconds * 1e3;
  return s;
}

Json ResultJson(const ParsedFlags& flags, const Model& model, const GenerationSpec& spec,
                const DenoiseSession& session, const std::string& text, const RunTotals& totals,
                RunPlace place) {
  const ModelConfig& mc = model.config();
  const SamplerConfig& config = spec.sampler;
  const CachingOptions& caching = spec.caching;
  const std::span<const int32_t> prompt = spec.prompt;
  const std::span<const int32_t> canvas = session.canvas();
  const int steps_run = session.steps();
  Json out = Json::object();
  out["arch"] = std::string(ArchName(mc.arch));
  out["model_file"] = flags.Get("model");
  out["prompt_ids"] = IdsJson(prompt);
  out["prompt_len"] = static_cast<int64_t>(prompt.size());
  out["mask_id"] = mc.tokens.mask;
  out["canvas_len"] = static_cast<int64_t>(canvas.size());
  out["final_canvas"] = IdsJson(canvas);
  out["generated"] = IdsJson(session.generated());
  out["suffix_ids"] = IdsJson(canvas.subspan(prompt.size() + session.generated().size()));
  out["output_ids"] = IdsJson(session.OutputTokens());
  out["text"] = text;
  out["n_forward"] = session.forward_passes();
  out["steps_run"] = steps_run;
  out["steps_planned"] = config.PlannedSteps();
  out["early_exit"] = session.exited_early();
  Json settings = Json::object();
  settings["gen_length"] = config.gen_length;
  settings["block_length"] = config.EffectiveBlockLength();
  if (config.family == SamplerFamily::kLlada2) {
    settings["steps_per_block"] = config.steps_per_block;
    settings["threshold"] = config.threshold ? Json(*config.threshold) : Json(nullptr);
    settings["editing_threshold"] =
        config.editing_threshold ? Json(*config.editing_threshold) : Json(nullptr);
    settings["max_post_steps"] = config.max_post_steps;
  } else {
    settings["steps"] = config.steps;
  }
  settings["alg"] = std::string(AlgorithmName(config.algorithm));
  settings["temperature"] = static_cast<double>(config.temperature);
  settings["seed"] = static_cast<int64_t>(config.seed);
  settings["cache"] = std::string(CacheModeName(caching.cache));
  settings["cache_refresh"] = caching.cache_refresh_steps;
  settings["threads"] = place.threads;
  settings["isa"] = IsaLevelName(place.isa);
  out["settings"] = settings;
  out["timings"] = TimingsJson(totals, steps_run);
  out["steps"] = totals.steps;
  return out;
}

void PrintSummary(const DenoiseSession& session, const GenerationSpec& spec,
                  const RunTotals& totals, RunPlace place) {
  const SamplerConfig& config = spec.sampler;
  const CachingOptions& caching = spec.caching;
  const int steps_run = session.steps();
  auto per_step = [&](double seconds) { return steps_run ? seconds * 1e3 / steps_run : 0.0; };
  const std::string early =
      session.exited_early() ? absl::StrCat(" of ", config.PlannedSteps(), ", early exit") : "";
  const ForwardStats& ops = totals.ops;
  const std::string cache = caching.cache == CacheMode::kNone
                                ? ""
                                : absl::StrCat(", cache ", CacheModeName(caching.cache), " (",
                                               session.cache_refreshes(), " full steps)");
  std::fprintf(
      stderr,
      "[%d steps%s, %d forward passes%s, %.1f ms/step (forward %.1f, sampling %.1f); "
      "attention %.0f ms, projections %.0f ms, ffn %.0f ms, head %.0f ms; %s, %d threads]\n",
      steps_run, early.c_str(), session.forward_passes(), cache.c_str(),
      per_step(totals.total_seconds), per_step(totals.forward_seconds),
      per_step(totals.sample_seconds), ops.attention * 1e3, ops.projections * 1e3, ops.ffn * 1e3,
      ops.head * 1e3, IsaLevelName(place.isa), place.threads);
}

std::string OutputText(const Model& model, std::span<const int32_t> output) {
  DecodeOptions plain;
  plain.render_special = false;
  return SanitizeUtf8(model.tokenizer()
                          .Decode(std::vector<int32_t>(output.begin(), output.end()), plain)
                          .value_or(""));
}

Json EntropyBoundJson(const ParsedFlags& flags, const Model& model, const GenerationSpec& spec,
                      const DenoiseSession& session, const std::string& text,
                      const RunTotals& totals, RunPlace place) {
  const EntropyBoundConfig& config = spec.entropy_bound->config;
  const int steps = session.steps();
  Json out = Json::object();
  out["arch"] = std::string(ArchName(model.config().arch));
  out["model_file"] = flags.Get("model");
  out["sampler"] = "entropy-bound";
  out["prompt_ids"] = IdsJson(spec.prompt);
  out["prompt_len"] = static_cast<int64_t>(spec.prompt.size());
  out["final_canvas"] = IdsJson(session.canvas());
  out["output_ids"] = IdsJson(session.OutputTokens());
  out["text"] = text;
  out["n_forward"] = session.forward_passes();
  out["steps_run"] = steps;
  out["canvases"] = session.entropy_bound()->canvases();
  Json settings = Json::object();
  settings["canvas_length"] = config.canvas_length;
  settings["max_canvases"] = spec.entropy_bound->run.max_canvases;
  settings["eb_max_steps"] = config.max_steps;
  settings["eb_t_min"] = static_cast<double>(config.t_min);
  settings["eb_t_max"] = static_cast<double>(config.t_max);
  settings["eb_entropy_bound"] = static_cast<double>(config.entropy_bound);
  settings["eb_stability"] = config.stability_threshold;
  settings["eb_confidence"] = static_cast<double>(config.confidence_threshold);
  settings["seed"] = static_cast<int64_t>(config.seed);
  settings["cache"] = std::string(CacheModeName(spec.caching.cache));
  settings["threads"] = place.threads;
  settings["isa"] = IsaLevelName(place.isa);
  out["settings"] = settings;
  Json timings = TimingsJson(totals, steps);
  timings["first_canvas_ms"] = totals.first_canvas_seconds * 1e3;
  Json ops = Json::object();
  for (const ForwardOp& op : kForwardOps) ops[op.name] = totals.ops.*op.seconds * 1e3;
  timings["op_ms"] = ops;
  out["timings"] = timings;
  out["steps"] = totals.steps;
  return out;
}

void PrintEntropyBoundSummary(const DenoiseSession& session, const GenerationSpec& spec,
                              const RunTotals& totals, RunPlace place) {
  const int steps = session.steps();
  const int canvases = session.entropy_bound()->canvases();
  const int canvas_length = spec.entropy_bound->config.canvas_length;
  std::fprintf(stderr,
               "[entropy-bound: %d steps over %d canvas%s of %d, %.1f ms/step (forward %.1f, "
               "sampling %.1f), first canvas %.0f ms; cache %s (%d full steps); %s, %d threads]\n",
               steps, canvases, canvases == 1 ? "" : "es", canvas_length,
               steps ? totals.total_seconds * 1e3 / steps : 0.0,
               steps ? totals.forward_seconds * 1e3 / steps : 0.0,
               steps ? totals.sample_seconds * 1e3 / steps : 0.0, totals.first_canvas_seconds * 1e3,
               CacheModeName(spec.caching.cache).data(), session.cache_refreshes(),
               IsaLevelName(place.isa), place.threads);
}

}  // namespace dllm
