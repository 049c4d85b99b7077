#include "service/cli/eval_command.h"

#include <tbb/task_arena.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "engine/base/flags.h"
#include "engine/base/status_macros.h"
#include "engine/model/forward.h"
#include "engine/model/isa_option.h"
#include "engine/parallel/cpu_topology.h"
#include "engine/sampler/remasking.h"
#include "engine/session/denoise_session.h"
#include "service/cli/cache_divergence.h"
#include "service/cli/eval_scores.h"
#include "service/cli/generate_command.h"
#include "service/cli/generation_flags.h"
#include "service/cli/sampler_divergence.h"

namespace dllm {
namespace {

int Fail(const absl::Status& s) { return FailCommand("eval", s); }

constexpr char kEvalUsage[] =
    "usage: dllm eval --model M --windows FILE [--baseline F32.gguf] [--ratios 0.15,0.5,0.9]\n"
    "         [--infill [--alg A] [--temperature 0] [--seed 0] [--threshold X]\n"
    "          [--steps-per-token 1] [--cache none|prefix|dual] [--cache-refresh R]\n"
    "          [--block-length 0|N|auto] [--infill-span N]]\n"
    "         [--json OUT] [--threads N] [--isa auto|scalar|avx2|avx512|amx]\n"
    "  masked-token cross-entropy and top-1 accuracy on held-out windows (the format of\n"
    "  shared/reference/quality/windows.json); --baseline adds the mean KL divergence\n"
    "  from that model's logits on the same canvases; --infill adds the infill task (each\n"
    "  window's span filled by the sampler: exact-match rate and token accuracy; blocks\n"
    "  0 = the span is one block, auto = /infill's default blocks; --infill-span N scores\n"
    "  the N tokens in the middle of each window instead of its own span)\n"
    "       dllm eval --model M --windows FILE --divergence --cache prefix|dual\n"
    "         [--cache-refresh R] [--prompt-len 32] [--gen-length N] [--steps N]\n"
    "         [--block-length N] [--threshold X] [--alg A] [--temperature T] [--seed S]\n"
    "  the cache's cost against exact decoding, each window's first --prompt-len tokens\n"
    "  the prompt: teacher-forced (same canvas every step) mean KL, top-1 agreement and\n"
    "  first divergent step; free-running, the share of identical generated tokens\n"
    "       dllm eval --model M --windows FILE --divergence --sampler masked [--prompt-len 32]\n"
    "         [--seed S] [--eb-* ...] [--steps N] [--block-length N] [--alg A] [--temperature T]\n"
    "  on a canvas model (DiffusionGemma): how far the masked stand-in's answer (one canvas)\n"
    "  lands from the entropy-bound sampler's on each window's prompt\n";

}  // namespace

namespace {

// The windows' first --prompt-len tokens, each a prompt.
absl::StatusOr<std::vector<std::vector<int32_t>>> DivergencePrompts(const ParsedFlags& flags,
                                                                    const Model& model,
                                                                    const Json& windows) {
  DLLM_ASSIGN_OR_RETURN(const int64_t prompt_len,
                        flags.GetIntInRange("prompt-len", 32, 1, 1 << 20));
  const Json* list = FindMember(windows, "windows");
  if (list == nullptr || !list->is_array() || list->empty()) {
    return absl::InvalidArgumentError("windows: no \"windows\" array");
  }
  std::vector<std::vector<int32_t>> prompts;
  for (size_t w = 0; w < list->size(); ++w) {
    const std::string where = absl::StrCat("windows[", w, "].tokens");
    const Json* tokens = FindMember((*list)[w], "tokens");
    if (tokens == nullptr) return absl::InvalidArgumentError(where + ": missing");
    DLLM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, Ids(*tokens, model.config().n_vocab, where));
    if (static_cast<int64_t>(ids.size()) < prompt_len) {
      return absl::InvalidArgumentError(
          absl::StrCat(where, ": ", ids.size(), " tokens, shorter than --prompt-len"));
    }
    ids.resize(static_cast<size_t>(prompt_len));
    prompts.push_back(std::move(ids));
  }
  return prompts;
}

// `dllm eval --divergence --sampler masked` on a canvas model:
// MeasureSamplerDivergence on the windows' prompts.
int RunSamplerDivergence(const ParsedFlags& flags, const std::shared_ptr<const Model>& model,
                         const Json& windows, int threads) {
  absl::StatusOr<EntropyBoundConfig> real = EntropyBoundConfigFromFlags(flags, *model);
  if (!real.ok()) return Fail(real.status());
  // The stand-in writes one canvas unless told otherwise.
  ParsedFlags stand_in_flags = flags;
  stand_in_flags.values.emplace("gen-length", std::to_string(real->canvas_length));
  absl::StatusOr<SamplerConfig> stand_in = SamplerConfigFromFlags(stand_in_flags, *model);
  if (!stand_in.ok()) return Fail(stand_in.status());
  absl::StatusOr<std::vector<std::vector<int32_t>>> prompts =
      DivergencePrompts(flags, *model, windows);
  if (!prompts.ok()) return Fail(prompts.status());
  absl::StatusOr<SamplerDivergence> d =
      MeasureSamplerDivergence(model, *real, *stand_in, *prompts, threads);
  if (!d.ok()) return Fail(d.status());
  std::printf(
      "stand-in divergence (masked, %s, steps %d, block %d, against entropy-bound, seed %u; %d "
      "runs, canvas %d): identical tokens %.2f%%, identical answers %d, first difference at "
      "position %.1f on average; answer length %.1f real vs %.1f stand-in; steps %d vs %d\n",
      std::string(AlgorithmName(stand_in->algorithm)).c_str(), stand_in->steps,
      stand_in->EffectiveBlockLength(), real->seed, d->runs, d->canvas_length,
      100 * d->identical_tokens, d->identical_answers, d->first_difference_mean,
      d->real_length_mean, d->stand_in_length_mean, d->real_steps, d->stand_in_steps);
  if (flags.Has("json")) {
    Json result = {{"model", flags.Get("model")},
                   {"windows", flags.Get("windows")},
                   {"stand_in",
                    {{"algorithm", std::string(AlgorithmName(stand_in->algorithm))},
                     {"steps", stand_in->steps},
                     {"block_length", stand_in->EffectiveBlockLength()},
                     {"temperature", stand_in->temperature}}},
                   {"seed", real->seed},
                   {"runs", d->runs},
                   {"canvas_length", d->canvas_length},
                   {"identical_tokens", d->identical_tokens},
                   {"identical_answers", d->identical_answers},
                   {"first_difference_mean", d->first_difference_mean},
                   {"real_length_mean", d->real_length_mean},
                   {"stand_in_length_mean", d->stand_in_length_mean},
                   {"real_steps", d->real_steps},
                   {"stand_in_steps", d->stand_in_steps}};
    std::ofstream out(flags.Get("json"));
    out << DumpJson(result, 1) << "\n";
    if (!out) return Fail(absl::PermissionDeniedError(flags.Get("json") + ": cannot write"));
  }
  return 0;
}

// `dllm eval --divergence`: MeasureCacheDivergence on the windows' prompts.
int RunDivergence(const ParsedFlags& flags, const std::shared_ptr<const Model>& model,
                  const Json& windows, int threads) {
  if (flags.Get("sampler") == "masked") {
    return RunSamplerDivergence(flags, model, windows, threads);
  }
  if (flags.Has("sampler")) {
    return Fail(absl::InvalidArgumentError(absl::StrCat(
        "--sampler ", flags.Get("sampler"), ": --divergence measures the masked stand-in")));
  }
  absl::StatusOr<SamplerConfig> config = SamplerConfigFromFlags(flags, *model);
  if (!config.ok()) return Fail(config.status());
  absl::StatusOr<CachingOptions> caching = CachingOptionsFromFlags(flags, *model);
  if (!caching.ok()) return Fail(caching.status());
  absl::StatusOr<int64_t> prompt_len = flags.GetIntInRange("prompt-len", 32, 1, 1 << 20);
  if (!prompt_len.ok()) return Fail(prompt_len.status());
  absl::StatusOr<std::vector<std::vector<int32_t>>> prompts =
      DivergencePrompts(flags, *model, windows);
  if (!prompts.ok()) return Fail(prompts.status());
  absl::StatusOr<CacheDivergence> d =
      MeasureCacheDivergence(model, *config, *caching, *prompts, threads);
  if (!d.ok()) return Fail(d.status());
  const std::string setting = absl::StrCat(
      "cache ", CacheModeName(caching->cache), ", refresh ", caching->cache_refresh_steps,
      config->threshold ? absl::StrCat(", threshold ", *config->threshold) : "");
  std::printf(
      "divergence (%s; %d runs, gen %d, steps %d, block %d): teacher-forced mean KL "
      "%.3g nats, top-1 agreement %.2f%% of %lld rows, first divergence at step %.1f "
      "on average (earliest %d, %d runs never); free-running identical tokens %.2f%%, "
      "forward steps %d exact vs %d cached (%d full)\n",
      setting.c_str(), d->runs, config->gen_length, config->steps, config->EffectiveBlockLength(),
      d->mean_kl, 100 * d->top1_agreement, static_cast<long long>(d->rows),
      d->first_divergence_mean, d->first_divergence_min, d->never_diverged,
      100 * d->identical_tokens, d->exact_forward_steps, d->cached_forward_steps,
      d->cached_full_steps);
  if (flags.Has("json")) {
    Json result = {{"model", flags.Get("model")},
                   {"windows", flags.Get("windows")},
                   {"cache", std::string(CacheModeName(caching->cache))},
                   {"cache_refresh", caching->cache_refresh_steps},
                   {"threshold", config->threshold ? Json(*config->threshold) : Json(nullptr)},
                   {"prompt_len", *prompt_len},
                   {"gen_length", config->gen_length},
                   {"steps", config->steps},
                   {"block_length", config->EffectiveBlockLength()},
                   {"runs", d->runs},
                   {"rows", d->rows},
                   {"mean_kl", d->mean_kl},
                   {"top1_agreement", d->top1_agreement},
                   {"first_divergence_mean", d->first_divergence_mean},
                   {"first_divergence_min", d->first_divergence_min},
                   {"never_diverged", d->never_diverged},
                   {"identical_tokens", d->identical_tokens},
                   {"exact_forward_steps", d->exact_forward_steps},
                   {"cached_forward_steps", d->cached_forward_steps},
                   {"cached_full_steps", d->cached_full_steps}};
    std::ofstream out(flags.Get("json"));
    out << DumpJson(result, 1) << "\n";
    if (!out) return Fail(absl::PermissionDeniedError(flags.Get("json") + ": cannot write"));
  }
  return 0;
}

// `--infill`: the infill task with the flags' sampler settings (greedy
// unless asked), printed and as its JSON record.
absl::StatusOr<Json> RunInfillTask(const ParsedFlags& flags,
                                   const std::shared_ptr<const Model>& model, const Json& windows,
                                   int threads) {
  SamplerConfig config = DefaultSamplerConfig(model->config(), kDefaultGenLength);
  // Greedy unless asked: the task measures the model, not the draw.
  double temperature = 0, per_token = 1;
  absl::StatusOr<int64_t> seed = flags.GetInt("seed", 0);
  if (absl::Status s = flags.GetNumber("temperature", &temperature); !s.ok()) return s;
  if (absl::Status s = flags.GetNumber("steps-per-token", &per_token); !s.ok()) return s;
  if (!seed.ok()) return seed.status();
  config.temperature = static_cast<float>(temperature);
  config.seed = static_cast<uint64_t>(*seed);
  if (flags.Has("alg")) {
    absl::StatusOr<Algorithm> alg = ParseAlgorithm(flags.Get("alg"));
    if (!alg.ok()) return alg.status();
    config.algorithm = *alg;
  }
  if (flags.Has("threshold")) {
    double threshold = 0;
    if (absl::Status s = flags.GetNumber("threshold", &threshold); !s.ok()) return s;
    config.threshold = static_cast<float>(threshold);
  }
  absl::StatusOr<CachingOptions> caching = CachingOptionsFromFlags(flags, *model);
  if (!caching.ok()) return caching.status();
  InfillTask task;
  task.steps_per_token = per_token;
  if (flags.Get("block-length") == "auto") {
    task.block_length = kInfillBlocksAuto;
  } else {
    absl::StatusOr<int64_t> block = flags.GetIntInRange("block-length", 0, 0, 1 << 20);
    if (!block.ok()) return block.status();
    task.block_length = static_cast<int>(*block);
  }
  absl::StatusOr<int64_t> span = flags.GetIntInRange("infill-span", 0, 0, 1 << 20);
  if (!span.ok()) return span.status();
  task.span = static_cast<int>(*span);
  absl::StatusOr<InfillScore> infill =
      EvaluateInfill(model, windows, config, *caching, task, threads);
  if (!infill.ok()) return infill.status();
  std::printf(
      "infill: exact match %.1f%% of %d spans, token accuracy %.1f%% of %d tokens, "
      "%d forward steps (%s, temperature %g, %g steps per token, blocks %s%s, cache %s%s)\n",
      100 * infill->exact_match, infill->spans, 100 * infill->token_accuracy, infill->tokens,
      infill->forward_steps, std::string(AlgorithmName(config.algorithm)).c_str(),
      config.temperature, per_token,
      task.block_length == kInfillBlocksAuto ? "auto"
      : task.block_length == 0               ? "none"
                                             : absl::StrCat(task.block_length).c_str(),
      config.threshold ? absl::StrCat(", threshold ", *config.threshold).c_str() : "",
      std::string(CacheModeName(caching->cache)).c_str(),
      caching->cache_refresh_steps > 0
          ? absl::StrCat(" refresh ", caching->cache_refresh_steps).c_str()
          : "");
  return Json{{"exact_match", infill->exact_match},
              {"token_accuracy", infill->token_accuracy},
              {"spans", infill->spans},
              {"tokens", infill->tokens},
              {"algorithm", std::string(AlgorithmName(config.algorithm))},
              {"temperature", config.temperature},
              {"steps_per_token", per_token},
              {"block_length",
               task.block_length == kInfillBlocksAuto ? Json("auto") : Json(task.block_length)},
              {"span", task.span == 0 ? Json("window") : Json(task.span)},
              {"threshold", config.threshold ? Json(*config.threshold) : Json(nullptr)},
              {"cache", std::string(CacheModeName(caching->cache))},
              {"cache_refresh", caching->cache_refresh_steps},
              {"forward_steps", infill->forward_steps},
              {"full_steps", infill->full_steps}};
}

}  // namespace

int RunEval(int argc, char** argv) {
  absl::StatusOr<ParsedFlags> flags =
      ParseFlags(argc, argv, {"model",        "windows",       "baseline",    "ratios",
                              "json",         "threads",       "isa",         "alg",
                              "temperature",  "seed",          "threshold",   "steps-per-token",
                              "cache",        "cache-refresh", "prompt-len",  "gen-length",
                              "steps",        "block-length",  "infill-span", "sampler",
                              "eb-max-steps", "eb-t-min",      "eb-t-max",    "eb-entropy-bound",
                              "eb-stability", "eb-confidence"},
                 {"infill", "divergence"});
  if (!flags.ok()) return Fail(flags.status());
  if (flags->help) return PrintHelp(kEvalUsage);
  if (!flags->Has("model") || !flags->Has("windows") || !flags->positional.empty()) {
    std::fputs(kEvalUsage, stderr);
    return 2;
  }
  absl::StatusOr<int64_t> threads =
      flags->GetIntInRange("threads", ReadCpuTopology().UsableThreads(), 1, 1024);
  if (!threads.ok()) return Fail(threads.status());
  absl::StatusOr<IsaLevel> isa = ResolveIsaLevel(flags->Get("isa"));
  if (!isa.ok()) return Fail(isa.status());
  const std::vector<std::string> ratios =
      absl::StrSplit(flags->Get("ratios", "0.15,0.5,0.9"), ',', absl::SkipEmpty());
  absl::StatusOr<Json> windows = ReadJsonFile(flags->Get("windows"));
  if (!windows.ok()) return Fail(windows.status());
  ModelOptions options;
  options.isa = *isa;
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(flags->Get("model"), options);
  if (!model.ok()) return Fail(model.status());
  if (flags->Has("divergence")) {
    return RunDivergence(*flags, *model, *windows, static_cast<int>(*threads));
  }
  std::shared_ptr<const Model> baseline;
  if (flags->Has("baseline")) {
    absl::StatusOr<std::shared_ptr<const Model>> b = Model::Load(flags->Get("baseline"), options);
    if (!b.ok()) return Fail(b.status());
    baseline = *b;
  }
  absl::StatusOr<std::map<std::string, MaskedTokenScore>> scores =
      EvaluateMaskedTokens(*model, baseline, *windows, ratios, static_cast<int>(*threads));
  if (!scores.ok()) return Fail(scores.status());

  Json result = Json::object();
  result["model"] = flags->Get("model");
  result["windows"] = flags->Get("windows");
  if (baseline != nullptr) result["baseline"] = flags->Get("baseline");
  Json by_ratio = Json::object();
  std::printf("%-6s %8s %8s %10s %7s\n", "ratio", "CE", "top-1", "KL", "n");
  for (const std::string& ratio : ratios) {
    const MaskedTokenScore& s = scores->at(ratio);
    Json r = {{"ce", s.cross_entropy}, {"top1", s.top1}, {"n", s.positions}};
    if (s.kl >= 0) r["kl"] = s.kl;
    by_ratio[ratio] = r;
    std::printf("%-6s %8.4f %7.2f%% %10s %7d\n", ratio.c_str(), s.cross_entropy, 100 * s.top1,
                s.kl >= 0 ? absl::StrCat(s.kl).c_str() : "-", s.positions);
  }
  result["ratios"] = std::move(by_ratio);
  if (flags->Has("infill")) {
    absl::StatusOr<Json> infill =
        RunInfillTask(*flags, *model, *windows, static_cast<int>(*threads));
    if (!infill.ok()) return Fail(infill.status());
    result["infill"] = *std::move(infill);
  }
  if (flags->Has("json")) {
    std::ofstream out(flags->Get("json"));
    out << DumpJson(result, 1) << "\n";
    if (!out) return Fail(absl::PermissionDeniedError(flags->Get("json") + ": cannot write"));
  }
  return 0;
}

}  // namespace dllm
