#include "service/cli/generate_command.h"

#include <tbb/task_arena.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "engine/base/status_macros.h"
#include "engine/base/stopwatch.h"
#include "engine/base/utf8.h"
#include "engine/model/isa_option.h"
#include "engine/parallel/arena.h"
#include "engine/session/denoise_session.h"
#include "service/cli/entropy_bound_flags.h"
#include "service/json/json.h"

namespace dllm {
namespace {

const std::set<std::string> kValueFlags = {"model",
                                           "prompt",
                                           "tokens",
                                           "gen-length",
                                           "steps",
                                           "block-length",
                                           "alg",
                                           "temperature",
                                           "top-p",
                                           "top-k",
                                           "cfg",
                                           "threshold",
                                           "seed",
                                           "threads",
                                           "cpu-policy",
                                           "isa",
                                           "eps",
                                           "alg-temp",
                                           "chat-template",
                                           "cache",
                                           "cache-refresh",
                                           "suffix",
                                           "suffix-tokens",
                                           "sampler",
                                           "canvases",
                                           "eb-max-steps",
                                           "eb-t-min",
                                           "eb-t-max",
                                           "eb-entropy-bound",
                                           "eb-stability",
                                           "eb-confidence",
                                           "steps-per-block",
                                           "editing-threshold",
                                           "max-post-steps",
                                           "preset"};
const std::set<std::string> kBoolFlags = {"chat", "show-canvas", "json", "no-early-exit"};

constexpr const char* kUsage =
    "usage: dllm generate --model M (--prompt TEXT | --tokens 1,2,3) [--chat]\n"
    "         [--gen-length N] [--steps N] [--block-length N]\n"
    "         [--alg low_confidence|random|origin|maskgit_plus|topk_margin|entropy]\n"
    "         [--temperature T] [--top-p P] [--top-k K] [--alg-temp T] [--eps E] [--cfg S]\n"
    "         [--threshold TAU] [--seed S] [--threads N] [--cpu-policy auto|performance|all]\n"
    "         [--isa auto|scalar|avx2|avx512|amx] [--show-canvas] [--json] [--no-early-exit]\n"
    "         [--chat-template plain|llada|dream|qwen2.5|chatml|llada-moe|gemma4] (with --chat)\n"
    "         [--cache none|prefix|dual] [--cache-refresh R]\n"
    "         [--suffix TEXT | --suffix-tokens 4,5] (infill: the gen-length span between\n"
    "          the prompt and this suffix, which is committed from the start)\n"
    "  --cache: approximate K/V caches (Fast-dLLM; the default none is exact): a block's\n"
    "  first step computes the whole canvas, its later steps only the block and what\n"
    "  follows (prefix) or the block alone (dual); --cache-refresh R recomputes the\n"
    "  whole canvas every R steps as well (1 = exact). Dream-family models have no\n"
    "  blocks: the generated region is one block.\n"
    "Canvas models (DiffusionGemma) run their entropy-bound sampler by default:\n"
    "         [--sampler auto|entropy-bound|masked] [--canvases N | --gen-length N]\n"
    "         [--eb-max-steps N] [--eb-t-min T] [--eb-t-max T] [--eb-entropy-bound B]\n"
    "         [--eb-stability N] [--eb-confidence C] [--seed S] [--cache exact|none]\n"
    "  The file's diffusion.eb_* keys are the defaults; each flag overrides its key.\n"
    "  Canvas after canvas (up to N, or ceil(gen-length / canvas_length)) until a\n"
    "  stop token or a repetition loop, as llama-diffusion-cli does; the exact cache\n"
    "  (default) encodes the prompt and each finished canvas once. --sampler masked:\n"
    "  masked denoising instead, a stand-in that is not the model's sampler.\n"
    "Block-diffusion models (LLaDA2.0 / 2.1) run the official LLaDA2 sampler:\n"
    "         [--block-length N (the file's, else 32)] [--steps-per-block N (32)]\n"
    "         [--threshold TAU (0.95)] [--editing-threshold E] [--max-post-steps N (16)]\n"
    "         [--preset S|Q] [--temperature T] [--top-p P] [--top-k K] [--cache exact|none]\n"
    "  Blocks count from position 0; a step commits every masked position of the\n"
    "  block above TAU, or the schedule's count. --editing-threshold (LLaDA2.1) also\n"
    "  rewrites written positions whose new token is above E, and lets a full block\n"
    "  take up to --max-post-steps editing steps. --preset S is 0.5 / 0.0, Q 0.7 / 0.5\n"
    "  (threshold / editing threshold, the LLaDA2.1 model card's). The exact cache\n"
    "  (default) encodes each finished block once; none recomputes the window.\n";

int Fail(const absl::Status& s) { return FailCommand("generate", s); }

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

// Redraws the generated region: masked positions as a dim placeholder,
// this step's commits highlighted.
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

}  // namespace

namespace {

// LLaDA2's flags over `c`; refused for the other families.
absl::Status ApplyLlada2Flags(const ParsedFlags& f, SamplerConfig& c) {
  const bool llada2 = c.family == SamplerFamily::kLlada2;
  for (const char* name : {"steps-per-block", "editing-threshold", "max-post-steps", "preset"}) {
    if (f.Has(name) && !llada2) {
      return absl::InvalidArgumentError(absl::StrCat("--", name,
                                                     ": LLaDA2 only (the model's sampler is ",
                                                     SamplerFamilyName(c.family), "'s)"));
    }
  }
  if (!llada2) return absl::OkStatus();
  if (f.Has("steps")) {
    return absl::InvalidArgumentError(
        "--steps: LLaDA2 schedules each block on its own (--steps-per-block)");
  }
  if (f.Has("preset")) {
    const Llada21Preset* preset = nullptr;
    for (const Llada21Preset& p : kLlada21Presets) {
      if (f.Get("preset") == p.name) preset = &p;
    }
    if (preset == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--preset: unknown preset '", f.Get("preset"), "' (S, Q)"));
    }
    c.threshold = preset->threshold;
    c.editing_threshold = preset->editing_threshold;
  }
  DLLM_ASSIGN_OR_RETURN(const int64_t steps,
                        f.GetIntInRange("steps-per-block", c.steps_per_block, 1, 1 << 20));
  c.steps_per_block = static_cast<int>(steps);
  DLLM_ASSIGN_OR_RETURN(const int64_t post,
                        f.GetIntInRange("max-post-steps", c.max_post_steps, 0, 1 << 20));
  c.max_post_steps = static_cast<int>(post);
  if (f.Has("editing-threshold")) {
    DLLM_ASSIGN_OR_RETURN(const double e, f.GetDouble("editing-threshold", 0.0));
    c.editing_threshold = static_cast<float>(e);
  }
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<SamplerConfig> SamplerConfigFromFlags(const ParsedFlags& f,
                                                     const ModelConfig& model) {
  absl::StatusOr<int64_t> gen = f.GetInt("gen-length", kDefaultGenLength);
  if (!gen.ok()) return gen.status();
  if (*gen < 0 || *gen > (1 << 20)) {
    return absl::InvalidArgumentError(absl::StrCat("--gen-length ", *gen, " is out of range"));
  }
  SamplerConfig c = DefaultSamplerConfig(model, static_cast<int>(*gen));
  if (f.Has("alg")) {
    absl::StatusOr<Algorithm> alg = ParseAlgorithm(f.Get("alg"));
    if (!alg.ok()) return alg.status();
    c.algorithm = *alg;
  }
  absl::StatusOr<int64_t> steps = f.GetInt("steps", c.steps);
  if (!steps.ok()) return steps.status();
  absl::StatusOr<int64_t> block = f.GetInt("block-length", c.block_length);
  if (!block.ok()) return block.status();
  for (const auto& [name, value] :
       {std::pair{"--gen-length", *gen}, {"--steps", *steps}, {"--block-length", *block}}) {
    if (value < 0 || value > (1 << 20)) {
      return absl::InvalidArgumentError(absl::StrCat(name, " ", value, " is out of range"));
    }
  }
  c.gen_length = static_cast<int>(*gen);
  c.steps = static_cast<int>(*steps);
  c.block_length = static_cast<int>(*block);
  // Every fallback is the default config's own value.
  absl::StatusOr<double> temperature = f.GetDouble("temperature", c.temperature);
  absl::StatusOr<double> top_p = f.GetDouble("top-p", c.top_p);
  absl::StatusOr<int64_t> top_k = f.GetInt("top-k", c.top_k);
  absl::StatusOr<double> alg_temp = f.GetDouble("alg-temp", c.alg_temp);
  absl::StatusOr<double> eps = f.GetDouble("eps", c.eps);
  absl::StatusOr<double> cfg = f.GetDouble("cfg", c.cfg_scale);
  absl::StatusOr<int64_t> seed = f.GetInt("seed", static_cast<int64_t>(c.seed));
  for (const absl::Status& s : {temperature.status(), top_p.status(), top_k.status(),
                                alg_temp.status(), eps.status(), cfg.status(), seed.status()}) {
    if (!s.ok()) return s;
  }
  c.temperature = static_cast<float>(*temperature);
  c.top_p = static_cast<float>(*top_p);
  c.top_k = static_cast<int>(std::clamp<int64_t>(*top_k, -1, 1 << 30));
  c.alg_temp = static_cast<float>(*alg_temp);
  c.eps = static_cast<float>(*eps);
  c.cfg_scale = static_cast<float>(*cfg);
  c.seed = static_cast<uint64_t>(*seed);
  if (f.Has("threshold")) {
    absl::StatusOr<double> tau = f.GetDouble("threshold", 0.0);
    if (!tau.ok()) return tau.status();
    c.threshold = static_cast<float>(*tau);
  }
  if (f.Has("no-early-exit")) c.early_exit = false;
  DLLM_RETURN_IF_ERROR(ApplyLlada2Flags(f, c));
  if (absl::Status s = c.Validate(); !s.ok()) return s;
  return c;
}

absl::StatusOr<CachingOptions> CachingOptionsFromFlags(const ParsedFlags& f,
                                                       const ModelConfig& model) {
  CachingOptions caching;
  if (model.block_length > 0) caching.cache = CacheMode::kExact;
  if (f.Has("cache")) {
    absl::StatusOr<CacheMode> mode = ParseCacheMode(f.Get("cache"));
    if (!mode.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cache: unknown mode '", f.Get("cache"), "' (none, prefix, dual, exact)"));
    }
    caching.cache = *mode;
  }
  absl::StatusOr<int64_t> refresh = f.GetIntInRange("cache-refresh", 0, 0, 1 << 20);
  if (!refresh.ok()) return refresh.status();
  if (*refresh > 0 && caching.cache == CacheMode::kNone) {
    return absl::InvalidArgumentError("--cache-refresh needs --cache prefix or dual");
  }
  caching.cache_refresh_steps = static_cast<int>(*refresh);
  return caching;
}

namespace {

// The model a command line names, with its chat template.
absl::StatusOr<std::shared_ptr<const Model>> LoadModel(const ParsedFlags& flags, IsaLevel isa) {
  ModelOptions model_options;
  model_options.isa = isa;
  if (flags.Has("chat-template")) {
    if (!flags.Has("chat")) return absl::InvalidArgumentError("--chat-template needs --chat");
    DLLM_ASSIGN_OR_RETURN(model_options.chat_template,
                          ParseChatTemplate(flags.Get("chat-template")));
  }
  DLLM_ASSIGN_OR_RETURN(std::shared_ptr<const Model> model,
                        Model::Load(flags.Get("model"), model_options));
  if (flags.Has("chat") && !model->chat_template().recognised) {
    std::fprintf(stderr, "dllm generate: warning: %s\n", kUnrecognisedChatTemplateWarning);
  }
  return model;
}

// --tokens as given, or --prompt encoded (as a chat turn with --chat).
absl::StatusOr<std::vector<int32_t>> PromptIds(const ParsedFlags& flags, const Model& model) {
  if (flags.Has("tokens")) return ParseIdList(flags.Get("tokens"), "--tokens");
  PromptEncoding how;
  how.chat = flags.Has("chat");
  return EncodePrompt(model.tokenizer(), model.chat_template(), flags.Get("prompt"), how);
}

// --suffix-tokens as given, or --suffix encoded as llama-server encodes an
// infill suffix (no BOS, special-token texts kept as text); empty without.
absl::StatusOr<std::vector<int32_t>> SuffixIds(const ParsedFlags& flags, const Model& model) {
  if (flags.Has("suffix") && flags.Has("suffix-tokens")) {
    return absl::InvalidArgumentError("give --suffix or --suffix-tokens, not both");
  }
  if ((flags.Has("suffix") || flags.Has("suffix-tokens")) && flags.Has("chat")) {
    return absl::InvalidArgumentError("--suffix: infill takes a plain prompt, not --chat");
  }
  if (flags.Has("suffix-tokens")) return ParseIdList(flags.Get("suffix-tokens"), "--suffix-tokens");
  if (!flags.Has("suffix")) return std::vector<int32_t>();
  return model.tokenizer().Encode(flags.Get("suffix"), false, false);
}

// What a run measured.
struct RunTotals {
  double load_seconds = 0;
  double total_seconds = 0;
  double forward_seconds = 0;
  double sample_seconds = 0;
  ForwardStats ops;
  Json steps = Json::array();  // one record per step, for --json
};

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

// The --json document: the run's ids, text, settings and timings.
Json ResultJson(const ParsedFlags& flags, const ModelConfig& mc, const SamplerConfig& config,
                const CachingOptions& caching, const DenoiseSession& session,
                std::span<const int32_t> prompt, const std::string& text, const RunTotals& totals,
                int threads, IsaLevel isa) {
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
  settings["threads"] = threads;
  settings["isa"] = IsaLevelName(isa);
  out["settings"] = settings;
  out["timings"] = TimingsJson(totals, steps_run);
  out["steps"] = totals.steps;
  return out;
}

// The one-line summary on stderr after the text.
void PrintSummary(const DenoiseSession& session, const SamplerConfig& config,
                  const CachingOptions& caching, const RunTotals& totals, int threads,
                  IsaLevel isa) {
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
      ops.head * 1e3, IsaLevelName(isa), threads);
}

// The generated tokens as the user reads them: special tokens not
// rendered, invalid UTF-8 replaced.
std::string OutputText(const Model& model, std::span<const int32_t> output) {
  DecodeOptions plain;
  plain.render_special = false;
  return SanitizeUtf8(model.tokenizer()
                          .Decode(std::vector<int32_t>(output.begin(), output.end()), plain)
                          .value_or(""));
}

// --cache for an entropy-bound run: exact unless asked otherwise.
absl::StatusOr<CachingOptions> EntropyBoundCaching(const ParsedFlags& f) {
  CachingOptions caching;
  caching.cache = CacheMode::kExact;
  if (f.Has("cache-refresh")) {
    return absl::InvalidArgumentError(
        "--cache-refresh: the entropy-bound sampler's cache is exact");
  }
  if (f.Has("cache")) {
    DLLM_ASSIGN_OR_RETURN(caching.cache, ParseCacheMode(f.Get("cache")));
  }
  return caching;
}

// `generate` on a canvas model: the entropy-bound sampler, canvas after canvas.
int RunEntropyBound(const ParsedFlags& flags, const std::shared_ptr<const Model>& model,
                    std::span<const int32_t> prompt, tbb::task_arena& arena, int threads,
                    IsaLevel isa, RunTotals& totals) {
  const ModelConfig& mc = model->config();
  if (flags.Has("suffix") || flags.Has("suffix-tokens")) {
    return Fail(absl::InvalidArgumentError(
        "--suffix: the entropy-bound sampler has no infill (use --sampler masked)"));
  }
  absl::StatusOr<EntropyBoundConfig> config = EntropyBoundConfigFromFlags(flags, *model);
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<CanvasRun> run = CanvasRunFromFlags(flags, config->canvas_length);
  if (!run.ok()) return Fail(run.status());
  absl::StatusOr<CachingOptions> caching = EntropyBoundCaching(flags);
  if (!caching.ok()) return Fail(caching.status());
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session;
  arena.execute([&] {
    session = DenoiseSession::Create(
        model, *config, std::vector<int32_t>(prompt.begin(), prompt.end()), *run, *caching);
  });
  if (!session.ok()) return Fail(session.status());
  const bool json = flags.Has("json");
  const bool progress = flags.Has("show-canvas") && !json;
  const Stopwatch gen_time;
  double first_canvas_seconds = 0;
  while (!(*session)->done()) {
    const int prompt_before = (*session)->prompt_len();
    absl::StatusOr<StepReport> step;
    arena.execute([&] { step = (*session)->Advance(); });
    if (!step.ok()) return Fail(step.status());
    totals.forward_seconds += step->forward_seconds;
    totals.sample_seconds += step->sample_seconds;
    totals.ops += step->forward;
    if (first_canvas_seconds == 0 &&
        ((*session)->done() || (*session)->prompt_len() != prompt_before)) {
      first_canvas_seconds = gen_time.ElapsedSeconds();
    }
    if (progress) {
      std::printf("step %d: %zu rows, %.1f ms\n", step->step + 1, step->positions.size(),
                  step->step_seconds * 1e3);
    }
    if (json) totals.steps.push_back(StepJson(*step));
  }
  totals.total_seconds = gen_time.ElapsedSeconds();
  const std::span<const int32_t> output = (*session)->OutputTokens();
  const std::string text = OutputText(*model, output);
  const int steps = (*session)->steps();
  const int canvases = (*session)->entropy_bound()->canvases();
  if (json) {
    Json out = Json::object();
    out["arch"] = std::string(ArchName(mc.arch));
    out["model_file"] = flags.Get("model");
    out["sampler"] = "entropy-bound";
    out["prompt_ids"] = IdsJson(prompt);
    out["prompt_len"] = static_cast<int64_t>(prompt.size());
    out["final_canvas"] = IdsJson((*session)->canvas());
    out["output_ids"] = IdsJson(output);
    out["text"] = text;
    out["n_forward"] = (*session)->forward_passes();
    out["steps_run"] = steps;
    out["canvases"] = canvases;
    Json settings = Json::object();
    settings["canvas_length"] = config->canvas_length;
    settings["max_canvases"] = run->max_canvases;
    settings["eb_max_steps"] = config->max_steps;
    settings["eb_t_min"] = static_cast<double>(config->t_min);
    settings["eb_t_max"] = static_cast<double>(config->t_max);
    settings["eb_entropy_bound"] = static_cast<double>(config->entropy_bound);
    settings["eb_stability"] = config->stability_threshold;
    settings["eb_confidence"] = static_cast<double>(config->confidence_threshold);
    settings["seed"] = static_cast<int64_t>(config->seed);
    settings["cache"] = std::string(CacheModeName(caching->cache));
    settings["threads"] = threads;
    settings["isa"] = IsaLevelName(isa);
    out["settings"] = settings;
    Json timings = TimingsJson(totals, steps);
    timings["first_canvas_ms"] = first_canvas_seconds * 1e3;
    Json ops = Json::object();
    for (const ForwardOp& op : kForwardOps) ops[op.name] = totals.ops.*op.seconds * 1e3;
    timings["op_ms"] = ops;
    out["timings"] = timings;
    out["steps"] = totals.steps;
    const std::string dumped = DumpJson(out, 1) + "\n";
    std::fwrite(dumped.data(), 1, dumped.size(), stdout);
    return 0;
  }
  std::printf("%s\n", text.c_str());
  std::fprintf(stderr,
               "[entropy-bound: %d steps over %d canvas%s of %d, %.1f ms/step (forward %.1f, "
               "sampling %.1f), first canvas %.0f ms; cache %s (%d full steps); %s, %d threads]\n",
               steps, canvases, canvases == 1 ? "" : "es", config->canvas_length,
               steps ? totals.total_seconds * 1e3 / steps : 0.0,
               steps ? totals.forward_seconds * 1e3 / steps : 0.0,
               steps ? totals.sample_seconds * 1e3 / steps : 0.0, first_canvas_seconds * 1e3,
               CacheModeName(caching->cache).data(), (*session)->cache_refreshes(),
               IsaLevelName(isa), threads);
  return 0;
}

}  // namespace

int RunGenerate(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags = ParseFlags(argc, argv, kValueFlags, kBoolFlags);
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) return PrintHelp(kUsage);
  if (!flags->Has("model") || flags->Has("prompt") == flags->Has("tokens") ||
      !flags->positional.empty()) {
    std::fputs(kUsage, stderr);
    return 2;
  }
  absl::StatusOr<IsaLevel> isa = ResolveIsaLevel(flags->Get("isa"));
  if (!isa.ok()) return Fail(isa.status());
  const std::optional<CpuPolicy> policy = ParseCpuPolicy(flags->Get("cpu-policy", "auto"));
  if (!policy)
    return Fail(absl::InvalidArgumentError("--cpu-policy must be auto, performance or all"));
  absl::StatusOr<int64_t> threads = flags->GetIntInRange("threads", 0, 0, 4096);
  if (!threads.ok()) return Fail(threads.status());

  RunTotals totals;
  const Stopwatch load_time;
  absl::StatusOr<std::shared_ptr<const Model>> model = LoadModel(*flags, *isa);
  if (!model.ok()) return Fail(model.status());
  totals.load_seconds = load_time.ElapsedSeconds();
  const ModelConfig& mc = (*model)->config();
  absl::StatusOr<bool> entropy_bound = UsesEntropyBound(*flags, mc);
  if (!entropy_bound.ok()) return Fail(entropy_bound.status());
  if (*entropy_bound) {
    absl::StatusOr<std::vector<int32_t>> prompt = PromptIds(*flags, **model);
    if (!prompt.ok()) return Fail(prompt.status());
    const ThreadPlan plan = PlanThreads(ReadCpuTopology(), *policy, static_cast<int>(*threads));
    std::unique_ptr<tbb::task_arena> arena = MakeArena(plan);
    return RunEntropyBound(*flags, *model, *prompt, *arena, plan.threads, *isa, totals);
  }
  absl::StatusOr<SamplerConfig> config = SamplerConfigFromFlags(*flags, mc);
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<CachingOptions> caching = CachingOptionsFromFlags(*flags, mc);
  if (!caching.ok()) return Fail(caching.status());
  absl::StatusOr<std::vector<int32_t>> prompt = PromptIds(*flags, **model);
  if (!prompt.ok()) return Fail(prompt.status());
  absl::StatusOr<std::vector<int32_t>> suffix = SuffixIds(*flags, **model);
  if (!suffix.ok()) return Fail(suffix.status());

  const ThreadPlan plan = PlanThreads(ReadCpuTopology(), *policy, static_cast<int>(*threads));
  std::unique_ptr<tbb::task_arena> arena = MakeArena(plan);
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session;
  arena->execute([&] {
    session = DenoiseSession::Create(*model, *config, CanvasInput(*prompt, *suffix), *caching);
  });
  if (!session.ok()) return Fail(session.status());

  const bool json = flags->Has("json");
  const bool live = flags->Has("show-canvas") && !json && isatty(STDOUT_FILENO);
  const bool progress = flags->Has("show-canvas") && !json && !live;
  const Stopwatch gen_time;
  while (!(*session)->done()) {
    absl::StatusOr<StepReport> step;
    arena->execute([&] { step = (*session)->Advance(); });
    if (!step.ok()) return Fail(step.status());
    totals.forward_seconds += step->forward_seconds;
    totals.sample_seconds += step->sample_seconds;
    totals.ops += step->forward;
    if (live) DrawCanvas(**model, **session, *step, config->PlannedSteps());
    if (progress) {
      std::printf("step %d: committed %zu, %d masked left, %.1f ms\n", step->step + 1,
                  step->positions.size(), step->masked_remaining, step->step_seconds * 1e3);
    }
    if (json) totals.steps.push_back(StepJson(*step));
  }
  totals.total_seconds = gen_time.ElapsedSeconds();
  const std::span<const int32_t> output = (*session)->OutputTokens();
  const std::string text = OutputText(**model, output);

  if (json) {
    const std::string dumped = DumpJson(ResultJson(*flags, mc, *config, *caching, **session,
                                                   *prompt, text, totals, plan.threads, *isa),
                                        1) +
                               "\n";
    std::fwrite(dumped.data(), 1, dumped.size(), stdout);
    return 0;
  }
  std::printf("%s%s\n", live ? "\n" : "", text.c_str());
  PrintSummary(**session, *config, *caching, totals, plan.threads, *isa);
  return 0;
}

}  // namespace dllm
