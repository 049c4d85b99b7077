#include "service/cli/generate_command.h"

#include <tbb/task_arena.h>
#include <unistd.h>

#include <cstdio>
#include <functional>
#include <set>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"
#include "engine/base/stopwatch.h"
#include "engine/base/utf8.h"
#include "engine/model/isa_option.h"
#include "engine/parallel/arena.h"
#include "engine/session/denoise_session.h"
#include "service/cli/generate_report.h"
#include "service/cli/generation_flags.h"
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

// Advances `session` to its end, adding each step to `totals` (and its
// record for --json), then `on_step` after it.
absl::Status AdvanceToEnd(DenoiseSession& session, tbb::task_arena& arena, bool json,
                          RunTotals& totals,
                          const std::function<void(const StepReport&)>& on_step) {
  const Stopwatch gen_time;
  while (!session.done()) {
    absl::StatusOr<StepReport> step;
    arena.execute([&] { step = session.Advance(); });
    if (!step.ok()) return step.status();
    totals.forward_seconds += step->forward_seconds;
    totals.sample_seconds += step->sample_seconds;
    totals.ops += step->forward;
    on_step(*step);
    if (json) totals.steps.push_back(StepJson(*step));
  }
  totals.total_seconds = gen_time.ElapsedSeconds();
  return absl::OkStatus();
}

void PrintJson(const Json& out) {
  const std::string dumped = DumpJson(out, 1) + "\n";
  std::fwrite(dumped.data(), 1, dumped.size(), stdout);
}

// `generate` on a canvas model: the entropy-bound sampler, canvas after canvas.
int RunEntropyBound(const ParsedFlags& flags, const std::shared_ptr<const Model>& model,
                    const GenerationSpec& spec, tbb::task_arena& arena, RunPlace place,
                    RunTotals& totals) {
  const EntropyBoundRequest& eb = *spec.entropy_bound;
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session;
  arena.execute([&] {
    session = DenoiseSession::Create(model, eb.config, spec.prompt, eb.run, spec.caching);
  });
  if (!session.ok()) return Fail(session.status());
  DenoiseSession& s = **session;
  const bool json = flags.Has("json");
  const bool progress = flags.Has("show-canvas") && !json;
  const Stopwatch gen_time;
  int prompt_before = s.prompt_len();
  const absl::Status ran = AdvanceToEnd(s, arena, json, totals, [&](const StepReport& step) {
    if (totals.first_canvas_seconds == 0 && (s.done() || s.prompt_len() != prompt_before)) {
      totals.first_canvas_seconds = gen_time.ElapsedSeconds();
    }
    prompt_before = s.prompt_len();
    if (progress) {
      std::printf("step %d: %zu rows, %.1f ms\n", step.step + 1, step.positions.size(),
                  step.step_seconds * 1e3);
    }
  });
  if (!ran.ok()) return Fail(ran);
  const std::string text = OutputText(*model, s.OutputTokens());
  if (json) {
    PrintJson(EntropyBoundJson(flags, *model, spec, s, text, totals, place));
    return 0;
  }
  std::printf("%s\n", text.c_str());
  PrintEntropyBoundSummary(s, spec, totals, place);
  return 0;
}

// `generate` with a masked sampler (LLaDA's, Dream's, LLaDA2's).
int RunMasked(const ParsedFlags& flags, const std::shared_ptr<const Model>& model,
              const GenerationSpec& spec, tbb::task_arena& arena, RunPlace place,
              RunTotals& totals) {
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session;
  arena.execute([&] {
    session = DenoiseSession::Create(model, spec.sampler, CanvasInput(spec.prompt, spec.suffix),
                                     spec.caching);
  });
  if (!session.ok()) return Fail(session.status());
  DenoiseSession& s = **session;
  const bool json = flags.Has("json");
  const bool live = flags.Has("show-canvas") && !json && isatty(STDOUT_FILENO);
  const bool progress = flags.Has("show-canvas") && !json && !live;
  const absl::Status ran = AdvanceToEnd(s, arena, json, totals, [&](const StepReport& step) {
    if (live) DrawCanvas(*model, s, step, spec.sampler.PlannedSteps());
    if (progress) {
      std::printf("step %d: committed %zu, %d masked left, %.1f ms\n", step.step + 1,
                  step.positions.size(), step.masked_remaining, step.step_seconds * 1e3);
    }
  });
  if (!ran.ok()) return Fail(ran);
  const std::string text = OutputText(*model, s.OutputTokens());
  if (json) {
    PrintJson(ResultJson(flags, *model, spec, s, text, totals, place));
    return 0;
  }
  std::printf("%s%s\n", live ? "\n" : "", text.c_str());
  PrintSummary(s, spec, totals, place);
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
  // The server's validation: a setting the server refuses is refused here.
  absl::StatusOr<GenerationSpec> spec = GenerationSpecFromFlags(*flags, **model);
  if (!spec.ok()) return Fail(spec.status());
  const ThreadPlan plan = PlanThreads(ReadCpuTopology(), *policy, static_cast<int>(*threads));
  std::unique_ptr<tbb::task_arena> arena = MakeArena(plan);
  const RunPlace place{plan.threads, *isa};
  return spec->entropy_bound ? RunEntropyBound(*flags, *model, *spec, *arena, place, totals)
                             : RunMasked(*flags, *model, *spec, *arena, place, totals);
}

}  // namespace dllm
