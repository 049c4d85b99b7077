#include "service/cli/generation_flags.h"

#include <limits>
#include <string>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "engine/base/status_macros.h"

namespace dllm {
namespace {

// Request paths and the flags that set them, longer paths first so that a
// path inside a message is replaced whole.
constexpr std::pair<absl::string_view, absl::string_view> kPathFlags[] = {
    {"diffusion.entropy_bound.max_steps", "--eb-max-steps"},
    {"diffusion.entropy_bound.t_min", "--eb-t-min"},
    {"diffusion.entropy_bound.t_max", "--eb-t-max"},
    {"diffusion.entropy_bound.entropy_bound", "--eb-entropy-bound"},
    {"diffusion.entropy_bound.stability_threshold", "--eb-stability"},
    {"diffusion.entropy_bound.confidence_threshold", "--eb-confidence"},
    {"diffusion.entropy_bound", "--eb-*"},
    {"diffusion.llada2.steps_per_block", "--steps-per-block"},
    {"diffusion.llada2.editing_threshold", "--editing-threshold"},
    {"diffusion.llada2.max_post_steps", "--max-post-steps"},
    {"diffusion.llada2", "--steps-per-block/--editing-threshold/--max-post-steps/--preset"},
    {"diffusion.cache_refresh_steps", "--cache-refresh"},
    {"diffusion.gen_length", "--gen-length"},
    {"diffusion.steps", "--steps"},
    {"diffusion.block_length", "--block-length"},
    {"diffusion.algorithm", "--alg"},
    {"diffusion.threshold", "--threshold"},
    {"diffusion.eps", "--eps"},
    {"diffusion.cfg_scale", "--cfg"},
    {"diffusion.early_exit", "--no-early-exit"},
    {"diffusion.cache", "--cache"},
    {"diffusion.sampler", "--sampler"},
    {"sampling.temperature", "--temperature"},
    {"sampling.top_p", "--top-p"},
    {"sampling.top_k", "--top-k"},
    {"sampling.alg_temp", "--alg-temp"},
    {"sampling.seed", "--seed"},
    {"prompt.suffix.token_ids", "--suffix-tokens"},
    {"prompt.suffix.text", "--suffix"},
    {"prompt.suffix", "--suffix"},
    {"prompt.token_ids", "--tokens"},
    {"prompt.text", "--prompt"},
    {"prompt.chat_template", "--chat-template"},
    {"prompt.apply_chat_template", "--chat"},
};

// A flag's value into `*to` when the flag is given, within [lo, hi].
template <typename T>
absl::Status IntFlag(const ParsedFlags& f, const char* name, int64_t lo, int64_t hi, T* to) {
  if (!f.Has(name)) return absl::OkStatus();
  DLLM_ASSIGN_OR_RETURN(const int64_t v, f.GetIntInRange(name, 0, lo, hi));
  *to = static_cast<uint32_t>(v);
  return absl::OkStatus();
}
template <typename T>
absl::Status RealFlag(const ParsedFlags& f, const char* name, T* to) {
  if (!f.Has(name)) return absl::OkStatus();
  DLLM_ASSIGN_OR_RETURN(const double v, f.GetDouble(name, 0.0));
  *to = static_cast<float>(v);
  return absl::OkStatus();
}

absl::Status ReadSamplerChoice(const ParsedFlags& f, GenerationRequest::Diffusion* d) {
  const std::string sampler = f.Get("sampler", "auto");
  if (sampler == "entropy-bound") {
    d->sampler = SamplerChoice::kEntropyBound;
  } else if (sampler == "masked") {
    d->sampler = SamplerChoice::kMasked;
  } else if (sampler != "auto") {
    return absl::InvalidArgumentError(
        absl::StrCat("--sampler: unknown sampler '", sampler, "' (auto, entropy-bound, masked)"));
  }
  return absl::OkStatus();
}

// The masked samplers' schedule and remasking flags.
absl::Status ReadMaskedFlags(const ParsedFlags& f, GenerationRequest::Diffusion* d) {
  DLLM_RETURN_IF_ERROR(IntFlag(f, "gen-length", 1, 1 << 20, &d->gen_length));
  DLLM_RETURN_IF_ERROR(IntFlag(f, "steps", 1, 1 << 20, &d->steps));
  DLLM_RETURN_IF_ERROR(IntFlag(f, "block-length", 1, 1 << 20, &d->block_length));
  if (f.Has("alg")) {
    DLLM_ASSIGN_OR_RETURN(d->algorithm, ParseAlgorithm(f.Get("alg")));
  }
  DLLM_RETURN_IF_ERROR(RealFlag(f, "threshold", &d->threshold));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "eps", &d->eps));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "cfg", &d->cfg_scale));
  if (f.Has("no-early-exit")) d->early_exit = false;
  if (f.Has("cache")) {
    absl::StatusOr<CacheMode> mode = ParseCacheMode(f.Get("cache"));
    if (!mode.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("--cache: unknown mode '", f.Get("cache"), "' (none, prefix, dual, exact)"));
    }
    d->cache = *mode;
  }
  return IntFlag(f, "cache-refresh", 0, 1 << 20, &d->cache_refresh_steps);
}

// LLaDA2's flags; --preset fills the thresholds an explicit flag leaves.
absl::Status ReadLlada2Flags(const ParsedFlags& f, GenerationRequest::Diffusion* d) {
  if (!f.Has("steps-per-block") && !f.Has("editing-threshold") && !f.Has("max-post-steps") &&
      !f.Has("preset")) {
    return absl::OkStatus();
  }
  GenerationRequest::Llada2& l = d->llada2.emplace();
  if (f.Has("preset")) {
    const Llada21Preset* preset = nullptr;
    for (const Llada21Preset& p : kLlada21Presets) {
      if (f.Get("preset") == p.name) preset = &p;
    }
    if (preset == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("--preset: unknown preset '", f.Get("preset"), "' (S, Q)"));
    }
    if (!d->threshold) d->threshold = preset->threshold;
    l.editing_threshold = preset->editing_threshold;
  }
  DLLM_RETURN_IF_ERROR(IntFlag(f, "steps-per-block", 1, 1 << 20, &l.steps_per_block));
  DLLM_RETURN_IF_ERROR(IntFlag(f, "max-post-steps", 0, 1 << 20, &l.max_post_steps));
  return RealFlag(f, "editing-threshold", &l.editing_threshold);
}

// DiffusionGemma's --eb-* flags, and --canvases as the gen_length of that
// many canvases.
absl::Status ReadEntropyBoundFlags(const ParsedFlags& f, const ModelConfig& config,
                                   GenerationRequest::Diffusion* d) {
  GenerationRequest::EntropyBound eb;
  DLLM_RETURN_IF_ERROR(IntFlag(f, "eb-max-steps", 1, 1 << 20, &eb.max_steps));
  DLLM_RETURN_IF_ERROR(IntFlag(f, "eb-stability", 0, 1 << 20, &eb.stability_threshold));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "eb-t-min", &eb.t_min));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "eb-t-max", &eb.t_max));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "eb-entropy-bound", &eb.entropy_bound));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "eb-confidence", &eb.confidence_threshold));
  if (eb.any()) d->entropy_bound = eb;
  if (!f.Has("canvases")) return absl::OkStatus();
  if (f.Has("gen-length")) {
    return absl::InvalidArgumentError("give --canvases or --gen-length, not both");
  }
  if (config.canvas_length == 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--canvases: ", ArchName(config.arch), " is not a canvas model (no canvases to count)"));
  }
  DLLM_ASSIGN_OR_RETURN(const int64_t n, f.GetIntInRange("canvases", 1, 1, 1 << 16));
  d->gen_length = static_cast<uint32_t>(n * config.canvas_length);
  return absl::OkStatus();
}

absl::Status ReadSamplingFlags(const ParsedFlags& f, GenerationRequest::Sampling* s) {
  DLLM_RETURN_IF_ERROR(RealFlag(f, "temperature", &s->temperature));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "top-p", &s->top_p));
  DLLM_RETURN_IF_ERROR(IntFlag(f, "top-k", 0, 1 << 30, &s->top_k));
  DLLM_RETURN_IF_ERROR(RealFlag(f, "alg-temp", &s->alg_temp));
  if (f.Has("seed")) {
    DLLM_ASSIGN_OR_RETURN(const int64_t seed,
                          f.GetIntInRange("seed", 0, 0, std::numeric_limits<int64_t>::max()));
    s->seed = static_cast<uint64_t>(seed);
  }
  return absl::OkStatus();
}

// A run repeats: without --seed, the masked samplers' default seed, or
// the canvas model's file seed.
absl::Status DefaultSeed(const Model& model, GenerationRequest* request) {
  if (request->sampling.seed) return absl::OkStatus();
  DLLM_ASSIGN_OR_RETURN(const bool entropy_bound,
                        UsesEntropyBound(request->diffusion, model.config()));
  if (entropy_bound) {
    DLLM_ASSIGN_OR_RETURN(const EntropyBoundConfig file, EntropyBoundConfigFromGguf(model.file()));
    request->sampling.seed = file.seed;
  } else {
    request->sampling.seed = DefaultSamplerConfig(model.config(), kDefaultGenLength).seed;
  }
  return absl::OkStatus();
}

// --tokens / --suffix-tokens: ids as given (the validation checks each).
absl::StatusOr<std::vector<uint32_t>> IdsFlag(const ParsedFlags& f, const char* name) {
  DLLM_ASSIGN_OR_RETURN(const std::vector<int32_t> ids,
                        ParseIdList(f.Get(name), absl::StrCat("--", name)));
  std::vector<uint32_t> out;
  for (int32_t id : ids) {
    if (id < 0) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, ": ", id, " is not a token id"));
    }
    out.push_back(static_cast<uint32_t>(id));
  }
  return out;
}

absl::Status ReadPromptFlags(const ParsedFlags& f, GenerationRequest::Prompt* p) {
  if (f.Has("tokens")) {
    p->input = PromptInput::kTokenIds;
    DLLM_ASSIGN_OR_RETURN(p->token_ids, IdsFlag(f, "tokens"));
  } else {
    p->input = PromptInput::kText;
    p->text = f.Get("prompt");
  }
  p->apply_chat_template = f.Has("chat");
  if (f.Has("suffix") && f.Has("suffix-tokens")) {
    return absl::InvalidArgumentError("give --suffix or --suffix-tokens, not both");
  }
  if (f.Has("suffix-tokens")) {
    p->suffix_input = PromptInput::kTokenIds;
    DLLM_ASSIGN_OR_RETURN(p->suffix_token_ids, IdsFlag(f, "suffix-tokens"));
  } else if (f.Has("suffix")) {
    p->suffix_input = PromptInput::kText;
    p->suffix_text = f.Get("suffix");
  }
  return absl::OkStatus();
}

// The masked samplers' flags, LLaDA2's and the sampling flags: all but
// the entropy-bound sampler's (eval's stand-in runs beside it).
absl::StatusOr<GenerationRequest> MaskedSettingsFromFlags(const ParsedFlags& f) {
  GenerationRequest r;
  DLLM_RETURN_IF_ERROR(ReadSamplerChoice(f, &r.diffusion));
  DLLM_RETURN_IF_ERROR(ReadMaskedFlags(f, &r.diffusion));
  DLLM_RETURN_IF_ERROR(ReadLlada2Flags(f, &r.diffusion));
  DLLM_RETURN_IF_ERROR(ReadSamplingFlags(f, &r.sampling));
  return r;
}

}  // namespace

absl::Status NameFlags(const absl::Status& status) {
  if (status.ok()) return status;
  std::string message(status.message());
  for (const auto& [path, flag] : kPathFlags) {
    if (absl::StrContains(message, path)) message = absl::StrReplaceAll(message, {{path, flag}});
  }
  // The prompt as a whole ("prompt: prompt of 9 tokens ...") at the start only.
  if (absl::StartsWith(message, "prompt: ")) message = "--prompt: " + message.substr(8);
  return absl::Status(status.code(), message);
}

absl::StatusOr<GenerationRequest> SettingsFromFlags(const ParsedFlags& f, const Model& model) {
  DLLM_ASSIGN_OR_RETURN(GenerationRequest r, MaskedSettingsFromFlags(f));
  DLLM_RETURN_IF_ERROR(ReadEntropyBoundFlags(f, model.config(), &r.diffusion));
  DLLM_RETURN_IF_ERROR(NameFlags(DefaultSeed(model, &r)));
  return r;
}

absl::StatusOr<GenerationRequest> GenerationRequestFromFlags(const ParsedFlags& f,
                                                             const Model& model) {
  DLLM_ASSIGN_OR_RETURN(GenerationRequest r, SettingsFromFlags(f, model));
  DLLM_RETURN_IF_ERROR(ReadPromptFlags(f, &r.prompt));
  return r;
}

absl::StatusOr<GenerationSpec> GenerationSpecFromFlags(const ParsedFlags& f, const Model& model) {
  DLLM_ASSIGN_OR_RETURN(const GenerationRequest r, GenerationRequestFromFlags(f, model));
  absl::StatusOr<GenerationSpec> spec = ValidateSessionRequest(r, model, "");
  if (!spec.ok()) return NameFlags(spec.status());
  return spec;
}

absl::StatusOr<SamplerConfig> SamplerConfigFromFlags(const ParsedFlags& f, const Model& model) {
  DLLM_ASSIGN_OR_RETURN(const GenerationRequest r, MaskedSettingsFromFlags(f));
  absl::StatusOr<SamplerConfig> c =
      SamplerConfigFromRequest(r.diffusion, r.sampling, model.config());
  if (!c.ok()) return NameFlags(c.status());
  if (r.sampling.seed) c->seed = *r.sampling.seed;
  return c;
}

absl::StatusOr<CachingOptions> CachingOptionsFromFlags(const ParsedFlags& f, const Model& model) {
  DLLM_ASSIGN_OR_RETURN(const GenerationRequest r, MaskedSettingsFromFlags(f));
  absl::StatusOr<CachingOptions> c =
      CachingOptionsFromRequest(r.diffusion, r.diffusion.gen_length, model.config());
  if (!c.ok()) return NameFlags(c.status());
  return c;
}

absl::StatusOr<EntropyBoundConfig> EntropyBoundConfigFromFlags(const ParsedFlags& f,
                                                               const Model& model) {
  GenerationRequest r;
  DLLM_RETURN_IF_ERROR(ReadEntropyBoundFlags(f, model.config(), &r.diffusion));
  DLLM_ASSIGN_OR_RETURN(EntropyBoundConfig file, EntropyBoundConfigFromGguf(model.file()));
  DLLM_ASSIGN_OR_RETURN(const int64_t seed, f.GetIntInRange("seed", file.seed, 0, 0xFFFFFFFFll));
  CachingOptions caching;
  absl::StatusOr<EntropyBoundRequest> eb =
      EntropyBoundFromRequest(r.diffusion, r.sampling, model, &caching);
  if (!eb.ok()) return NameFlags(eb.status());
  eb->config.seed = static_cast<uint32_t>(seed);
  return eb->config;
}

}  // namespace dllm
