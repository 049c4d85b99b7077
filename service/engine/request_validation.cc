#include "service/engine/request_validation.h"

#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/strip.h"
#include "engine/base/status_macros.h"

namespace dllm {
namespace {

// The proto's Cache values are CacheMode's, one up; its Algorithm values too.
static_assert(v1::CACHE_PREFIX - v1::CACHE_NONE == static_cast<int>(CacheMode::kPrefix));
static_assert(v1::CACHE_DUAL - v1::CACHE_NONE == static_cast<int>(CacheMode::kDual));
static_assert(v1::CACHE_EXACT - v1::CACHE_NONE == static_cast<int>(CacheMode::kExact));

// A cache as the API names it ("CACHE_PREFIX").
std::string CacheName(CacheMode cache) { return v1::Cache_Name(CacheModeToProto(cache)); }

// SamplerConfig::Validate() names its fields "sampler: FIELD: ..."; the
// client knows them by their request path.
absl::Status RenameSamplerField(const absl::Status& s) {
  static constexpr std::pair<absl::string_view, absl::string_view> kFields[] = {
      {"gen_length", "diffusion.gen_length"},
      {"steps", "diffusion.steps"},
      {"block_length", "diffusion.block_length"},
      {"algorithm", "diffusion.algorithm"},
      {"threshold", "diffusion.threshold"},
      {"cache_refresh_steps", "diffusion.cache_refresh_steps"},
      {"cache", "diffusion.cache"},
      {"eps", "diffusion.eps"},
      {"cfg_scale", "diffusion.cfg_scale"},
      {"logits_eos_inf", "diffusion.logits_eos_inf"},
      {"confidence_eos_eot_inf", "diffusion.confidence_eos_eot_inf"},
      {"temperature", "sampling.temperature"},
      {"top_p", "sampling.top_p"},
      {"top_k", "sampling.top_k"},
      {"alg_temp", "sampling.alg_temp"},
      {"steps_per_block", "diffusion.llada2.steps_per_block"},
      {"editing_threshold", "diffusion.llada2.editing_threshold"},
      {"max_post_steps", "diffusion.llada2.max_post_steps"},
  };
  absl::string_view message = s.message();
  if (absl::ConsumePrefix(&message, "sampler: ")) {
    for (const auto& [name, path] : kFields) {
      absl::string_view rest = message;
      if (absl::ConsumePrefix(&rest, name) && absl::ConsumePrefix(&rest, ": ")) {
        return absl::Status(s.code(), absl::StrCat(path, ": ", rest));
      }
    }
  }
  return absl::Status(s.code(), absl::StrCat("diffusion: ", message));
}

// The first of `fields` that is set, refused with `why`: a setting one
// sampler takes and another has no use for, so that a client learns its
// setting did nothing.
absl::Status RefuseSet(std::initializer_list<std::pair<const char*, bool>> fields,
                       absl::string_view why) {
  for (const auto& [field, set] : fields) {
    if (set) return InvalidField(field, why);
  }
  return absl::OkStatus();
}

// LLaDA2's settings over `c`, and what the masked samplers take that LLaDA2's
// has no use for refused.
absl::Status ApplyLlada2(const GenerationRequest::Diffusion& d,
                         const GenerationRequest::Sampling& s, SamplerConfig& c) {
  DLLM_RETURN_IF_ERROR(RefuseSet({{"diffusion.steps", d.steps != 0},
                                  {"diffusion.eps", d.eps.has_value()},
                                  {"diffusion.cfg_scale", d.cfg_scale != 0},
                                  {"diffusion.logits_eos_inf", d.logits_eos_inf},
                                  {"diffusion.confidence_eos_eot_inf", d.confidence_eos_eot_inf},
                                  {"diffusion.cache_refresh_steps", d.cache_refresh_steps != 0},
                                  {"sampling.alg_temp", s.alg_temp != 0}},
                                 "does not apply to LLaDA2's sampler (its blocks are scheduled by "
                                 "diffusion.llada2.steps_per_block)"));
  if (!d.llada2) return absl::OkStatus();
  const GenerationRequest::Llada2& l = *d.llada2;
  if (l.steps_per_block > (1u << 20)) {
    return InvalidField("diffusion.llada2.steps_per_block",
                        absl::StrCat(l.steps_per_block, " is too large"));
  }
  if (l.steps_per_block != 0) c.steps_per_block = static_cast<int>(l.steps_per_block);
  if (l.editing_threshold) c.editing_threshold = *l.editing_threshold;
  if (l.max_post_steps) {
    if (*l.max_post_steps > (1u << 20)) {
      return InvalidField("diffusion.llada2.max_post_steps",
                          absl::StrCat(*l.max_post_steps, " is too large"));
    }
    c.max_post_steps = static_cast<int>(*l.max_post_steps);
  }
  return absl::OkStatus();
}

// The request's settings of the entropy-bound sampler over the file's `c`.
absl::Status ApplyEntropyBound(const GenerationRequest::EntropyBound& e, EntropyBoundConfig& c) {
  if (e.max_steps) {
    if (*e.max_steps < 1 || *e.max_steps > (1u << 20)) {
      return InvalidField("diffusion.entropy_bound.max_steps",
                          absl::StrCat(*e.max_steps, " is outside [1, ", 1u << 20, "]"));
    }
    c.max_steps = static_cast<int>(*e.max_steps);
  }
  if (e.stability_threshold) {
    if (*e.stability_threshold > (1u << 20)) {
      return InvalidField("diffusion.entropy_bound.stability_threshold",
                          absl::StrCat(*e.stability_threshold, " is too large"));
    }
    c.stability_threshold = static_cast<int>(*e.stability_threshold);
  }
  if (e.t_min) c.t_min = *e.t_min;
  if (e.t_max) c.t_max = *e.t_max;
  if (e.entropy_bound) c.entropy_bound = *e.entropy_bound;
  if (e.confidence_threshold) c.confidence_threshold = *e.confidence_threshold;
  if (absl::Status st = c.Validate(); !st.ok()) {
    // Validate() says "entropy-bound sampler: FIELD: why"; the client knows
    // the field by its request path.
    absl::string_view message = st.message();
    absl::ConsumePrefix(&message, "entropy-bound sampler: ");
    return absl::InvalidArgumentError(absl::StrCat("diffusion.entropy_bound.", message));
  }
  return absl::OkStatus();
}

// The request id, the model it names, its prompt and suffix.
absl::Status ValidateIdentityAndPrompt(const GenerationRequest& request, const Model& model,
                                       absl::string_view model_path, GenerationSpec* spec) {
  DLLM_RETURN_IF_ERROR(ValidateRequestId(request.request_id, "request_id"));
  spec->request_id = request.request_id.empty() ? NewRequestId() : request.request_id;
  if (!NamesServedModel(request.model, model, model_path)) {
    return InvalidField("model", absl::StrCat("model '", request.model,
                                              "' is not served here (this server serves '",
                                              model.config().name, "')"));
  }
  DLLM_ASSIGN_OR_RETURN(spec->prompt, ValidatePrompt(request.prompt, model));
  DLLM_ASSIGN_OR_RETURN(spec->suffix, ValidateSuffix(request.prompt, model));
  return absl::OkStatus();
}

// The rest of an entropy-bound request: its sampler, context and seed.
absl::Status ValidateEntropyBoundSpec(const GenerationRequest& request, const Model& model,
                                      GenerationSpec* spec) {
  const GenerationRequest::Sampling& sampling = request.sampling;
  if (!spec->suffix.empty()) {
    return InvalidField("prompt.suffix",
                        "the entropy-bound sampler writes after the prompt only; it cannot fill a "
                        "span before a suffix");
  }
  DLLM_ASSIGN_OR_RETURN(spec->entropy_bound, EntropyBoundFromRequest(request.diffusion, sampling,
                                                                     model, &spec->caching));
  const int canvas = spec->entropy_bound->config.canvas_length;
  const int64_t n_ctx = model.config().n_ctx_train;
  spec->sampler.gen_length = spec->entropy_bound->max_tokens;
  if (const int64_t end = static_cast<int64_t>(spec->prompt.size()) + canvas; end > n_ctx) {
    return InvalidField("prompt",
                        absl::StrCat("prompt of ", spec->prompt.size(), " tokens and a canvas of ",
                                     canvas, " exceed the model's context of ", n_ctx));
  }
  if (sampling.seed && *sampling.seed > 0xFFFFFFFFu) {
    return InvalidField(
        "sampling.seed",
        absl::StrCat(*sampling.seed, " exceeds the entropy-bound sampler's 32-bit seed (at most ",
                     0xFFFFFFFFu, ")"));
  }
  spec->seed_was_set = sampling.seed.has_value();
  spec->sampler.seed = sampling.seed.value_or(NewSeed() & 0xFFFFFFFFu);
  spec->entropy_bound->config.seed = static_cast<uint32_t>(spec->sampler.seed);
  return absl::OkStatus();
}

// A block-diffusion model is block-causal: no infill.
absl::Status CheckNoBlockCausalInfill(const ModelConfig& config, const GenerationSpec& spec) {
  if (config.block_length > 0 && !spec.suffix.empty()) {
    return InvalidField("prompt.suffix",
                        "a block-diffusion model is block-causal: no block reads the text after "
                        "it, so it cannot fill a span before a suffix");
  }
  return absl::OkStatus();
}

// The canvas a masked request takes fits the model's context.
absl::Status CheckMaskedCanvas(const GenerationSpec& spec, const ModelConfig& config) {
  const int64_t n_ctx = config.n_ctx_train;
  const int64_t fixed = static_cast<int64_t>(spec.prompt.size() + spec.suffix.size());
  if (!spec.suffix.empty() && fixed >= n_ctx) {
    return InvalidField(
        "prompt.suffix",
        absl::StrCat("prompt ", spec.prompt.size(), " + suffix ", spec.suffix.size(),
                     " tokens leave no room for a span in the model's context of ", n_ctx));
  }
  const int64_t canvas = config.block_length > 0
                             ? spec.sampler.Llada2CanvasLength(static_cast<int>(spec.prompt.size()))
                             : fixed + spec.sampler.gen_length;
  if (canvas > n_ctx) {
    return InvalidField(
        "diffusion.gen_length",
        absl::StrCat("prompt ", spec.prompt.size(), " + gen_length ", spec.sampler.gen_length,
                     spec.suffix.empty() ? "" : absl::StrCat(" + suffix ", spec.suffix.size()),
                     " = ", canvas, " tokens exceed the model's context of ", n_ctx));
  }
  return absl::OkStatus();
}

// The rest of a masked-sampler request: its family's rules, sampler,
// cache, context and seed.
absl::Status ValidateMaskedSpec(const GenerationRequest& request, const Model& model,
                                GenerationSpec* spec) {
  const GenerationRequest::Diffusion& d = request.diffusion;
  DLLM_ASSIGN_OR_RETURN(spec->caching, CachingOptionsFromRequest(d, d.gen_length, model.config()));
  DLLM_RETURN_IF_ERROR(CheckNoBlockCausalInfill(model.config(), *spec));
  DLLM_ASSIGN_OR_RETURN(spec->sampler,
                        SamplerConfigFromRequest(d, request.sampling, model.config()));
  DLLM_RETURN_IF_ERROR(CheckMaskedCanvas(*spec, model.config()));
  spec->seed_was_set = request.sampling.seed.has_value();
  spec->sampler.seed = request.sampling.seed.value_or(NewSeed());
  return absl::OkStatus();
}

absl::StatusOr<GenerationSpec> ValidateCommon(const GenerationRequest& request, const Model& model,
                                              absl::string_view model_path) {
  GenerationSpec spec;
  DLLM_RETURN_IF_ERROR(ValidateIdentityAndPrompt(request, model, model_path, &spec));
  DLLM_ASSIGN_OR_RETURN(const bool entropy_bound,
                        UsesEntropyBound(request.diffusion, model.config()));
  if (entropy_bound) {
    DLLM_RETURN_IF_ERROR(ValidateEntropyBoundSpec(request, model, &spec));
  } else {
    DLLM_RETURN_IF_ERROR(ValidateMaskedSpec(request, model, &spec));
  }
  return spec;
}

}  // namespace

absl::StatusOr<SamplerConfig> SamplerConfigFromRequest(const GenerationRequest::Diffusion& d,
                                                       const GenerationRequest::Sampling& s,
                                                       const ModelConfig& config) {
  if (d.entropy_bound) {
    return InvalidField("diffusion.entropy_bound", "applies to the entropy-bound sampler only");
  }
  if (config.block_length == 0 && d.llada2) {
    return InvalidField("diffusion.llada2",
                        absl::StrCat("applies to block-diffusion (LLaDA2) models; the served "
                                     "model is ",
                                     ArchName(config.arch)));
  }
  const int64_t n_ctx = config.n_ctx_train;
  for (const auto& [field, value] : {std::pair{"diffusion.gen_length", d.gen_length},
                                     {"diffusion.steps", d.steps},
                                     {"diffusion.block_length", d.block_length}}) {
    if (value > n_ctx) {
      return InvalidField(field, absl::StrCat(value, " exceeds the model's context of ", n_ctx));
    }
  }
  SamplerConfig c = DefaultSamplerConfig(
      config, d.gen_length == 0 ? kDefaultGenLength : static_cast<int>(d.gen_length));
  if (d.steps != 0) c.steps = static_cast<int>(d.steps);
  if (d.block_length != 0) c.block_length = static_cast<int>(d.block_length);
  if (d.algorithm) {
    c.algorithm = *d.algorithm;
    if (!AlgorithmFitsFamily(c.algorithm, c.family)) {
      return InvalidField("diffusion.algorithm",
                          absl::StrCat(v1::Algorithm_Name(AlgorithmToProto(c.algorithm)),
                                       " does not fit the served ", ArchName(config.arch),
                                       " model (its sampler takes ",
                                       absl::AsciiStrToUpper(FamilyAlgorithmNames(c.family)), ")"));
    }
  }
  if (d.threshold) c.threshold = *d.threshold;
  if (c.family == SamplerFamily::kLlada2) DLLM_RETURN_IF_ERROR(ApplyLlada2(d, s, c));
  if (d.eps) c.eps = *d.eps;
  c.cfg_scale = d.cfg_scale;
  if (d.early_exit) c.early_exit = *d.early_exit;
  c.logits_eos_inf = d.logits_eos_inf;
  c.confidence_eos_eot_inf = d.confidence_eos_eot_inf;
  c.temperature = s.temperature;
  // Zero is "unset" for top_p: the default (off).
  if (s.top_p != 0.0f) c.top_p = s.top_p;
  if (s.top_k > (1u << 30)) {
    return InvalidField("sampling.top_k", absl::StrCat(s.top_k, " is too large"));
  }
  c.top_k = static_cast<int>(s.top_k);
  c.alg_temp = s.alg_temp;
  if (absl::Status st = c.Validate(); !st.ok()) return RenameSamplerField(st);
  return c;
}

absl::StatusOr<bool> UsesEntropyBound(const GenerationRequest::Diffusion& d,
                                      const ModelConfig& config) {
  switch (d.sampler) {
    case SamplerChoice::kMasked:
      return false;
    case SamplerChoice::kEntropyBound:
      if (config.canvas_length == 0) {
        return InvalidField(
            "diffusion.sampler",
            absl::StrCat("SAMPLER_ENTROPY_BOUND needs a canvas model; the served ",
                         ArchName(config.arch), " model has no diffusion.canvas_length"));
      }
      return true;
    case SamplerChoice::kModelDefault:
      break;
  }
  return config.canvas_length > 0;
}

absl::StatusOr<EntropyBoundRequest> EntropyBoundFromRequest(const GenerationRequest::Diffusion& d,
                                                            const GenerationRequest::Sampling& s,
                                                            const Model& model,
                                                            CachingOptions* caching) {
  DLLM_RETURN_IF_ERROR(RefuseSet({{"diffusion.steps", d.steps != 0},
                                  {"diffusion.block_length", d.block_length != 0},
                                  {"diffusion.algorithm", d.algorithm.has_value()},
                                  {"diffusion.threshold", d.threshold.has_value()},
                                  {"diffusion.eps", d.eps.has_value()},
                                  {"diffusion.cfg_scale", d.cfg_scale != 0},
                                  {"diffusion.early_exit", d.early_exit.has_value()},
                                  {"diffusion.logits_eos_inf", d.logits_eos_inf},
                                  {"diffusion.confidence_eos_eot_inf", d.confidence_eos_eot_inf},
                                  {"diffusion.cache_refresh_steps", d.cache_refresh_steps != 0}},
                                 "does not apply to the entropy-bound sampler"));
  // The sampling settings have their counterparts in entropy_bound.
  DLLM_RETURN_IF_ERROR(RefuseSet({{"sampling.temperature", s.temperature != 0},
                                  {"sampling.top_p", s.top_p != 0 && s.top_p != 1},
                                  {"sampling.top_k", s.top_k != 0},
                                  {"sampling.alg_temp", s.alg_temp != 0}},
                                 "does not apply to the entropy-bound sampler (its temperatures "
                                 "run from entropy_bound.t_max down toward t_min)"));
  if (d.cache == CacheMode::kPrefix || d.cache == CacheMode::kDual) {
    return InvalidField("diffusion.cache",
                        absl::StrCat(CacheName(*d.cache),
                                     " approximates a masked sampler's canvas; the entropy-bound "
                                     "sampler takes CACHE_EXACT (the default) or CACHE_NONE"));
  }
  *caching = CachingOptions{};
  caching->cache = d.cache == CacheMode::kNone ? CacheMode::kNone : CacheMode::kExact;

  EntropyBoundRequest out;
  // Names the bad key (the server checks them at start).
  DLLM_ASSIGN_OR_RETURN(out.config, EntropyBoundConfigFromGguf(model.file()));
  // Validated even with none of the request's own, as the file's stand alone.
  DLLM_RETURN_IF_ERROR(
      ApplyEntropyBound(d.entropy_bound.value_or(GenerationRequest::EntropyBound{}), out.config));
  const int canvas = out.config.canvas_length;
  out.max_tokens = d.gen_length == 0 ? canvas : static_cast<int>(d.gen_length);
  out.run.max_canvases = CanvasesFor(out.max_tokens, canvas);
  out.run.context = model.config().n_ctx_train;
  out.run.stop_ids = model.config().tokens.StopIds();
  return out;
}

absl::StatusOr<CachingOptions> CachingOptionsFromRequest(const GenerationRequest::Diffusion& d,
                                                         uint32_t gen_length,
                                                         const ModelConfig& config) {
  const bool block_causal = config.block_length > 0;
  if (d.cache == CacheMode::kExact && !block_causal) {
    return InvalidField(
        "diffusion.cache",
        "CACHE_EXACT is the cache of the entropy-bound sampler and of block-diffusion models; a "
        "masked sampler's every row reads the whole canvas (CACHE_PREFIX and CACHE_DUAL "
        "approximate)");
  }
  if (block_causal && (d.cache == CacheMode::kPrefix || d.cache == CacheMode::kDual)) {
    return InvalidField("diffusion.cache",
                        absl::StrCat(CacheName(*d.cache),
                                     " approximates a bidirectional model; a block-diffusion "
                                     "model's finished blocks are cached exactly (CACHE_EXACT, "
                                     "the default, or CACHE_NONE)"));
  }
  CachingOptions o;
  // A block-diffusion model's finished blocks are cached exactly by default.
  o.cache = d.cache.value_or(block_causal ? CacheMode::kExact : CacheMode::kNone);
  const uint32_t gen = gen_length == 0 ? static_cast<uint32_t>(kDefaultGenLength) : gen_length;
  if (d.cache_refresh_steps > gen) {
    return InvalidField("diffusion.cache_refresh_steps",
                        absl::StrCat(d.cache_refresh_steps, " exceeds gen_length ", gen));
  }
  o.cache_refresh_steps = static_cast<int>(d.cache_refresh_steps);
  if (absl::Status st = o.Validate(); !st.ok()) return RenameSamplerField(st);
  return o;
}

absl::StatusOr<StreamSettings> StreamSettingsFromRequest(const GenerationRequest::Stream& stream) {
  StreamSettings out;
  out.detail = stream.detail == v1::DETAIL_UNSPECIFIED ? v1::DETAIL_TEXT : stream.detail;
  if (stream.step_stride > (1u << 20)) {
    return InvalidField("stream.step_stride", absl::StrCat(stream.step_stride, " is too large"));
  }
  out.step_stride = stream.step_stride == 0 ? 1 : static_cast<int>(stream.step_stride);
  if (stream.top_candidates > static_cast<uint32_t>(kMaxTopCandidates)) {
    return InvalidField(
        "stream.top_candidates",
        absl::StrCat(stream.top_candidates, " exceeds the limit of ", kMaxTopCandidates));
  }
  if (stream.top_candidates > 0 && out.detail < v1::DETAIL_STEPS) {
    return InvalidField("stream.top_candidates", "needs detail DETAIL_STEPS or DETAIL_CANVAS");
  }
  out.top_candidates = static_cast<int>(stream.top_candidates);
  out.include_timings = stream.include_timings;
  if (stream.include_logprobs && out.detail < v1::DETAIL_STEPS) {
    return InvalidField("stream.include_logprobs", "needs detail DETAIL_STEPS or DETAIL_CANVAS");
  }
  out.include_logprobs = stream.include_logprobs;
  if (stream.heartbeat_seconds > kMaxHeartbeatSeconds) {
    return InvalidField(
        "stream.heartbeat_seconds",
        absl::StrCat(stream.heartbeat_seconds, " exceeds the limit of ", kMaxHeartbeatSeconds));
  }
  out.heartbeat_seconds = stream.heartbeat_seconds == 0
                              ? static_cast<int>(kDefaultHeartbeatSeconds)
                              : static_cast<int>(stream.heartbeat_seconds);
  return out;
}

int GenerationSpec::canvas_tokens() const {
  if (entropy_bound) {
    return static_cast<int>(prompt.size()) +
           entropy_bound->run.max_canvases * entropy_bound->config.canvas_length;
  }
  if (sampler.family == SamplerFamily::kLlada2) {
    return sampler.Llada2CanvasLength(static_cast<int>(prompt.size()));
  }
  return static_cast<int>(prompt.size() + suffix.size()) + sampler.gen_length;
}

int GenerationSpec::planned_steps() const {
  if (entropy_bound) return entropy_bound->config.max_steps * entropy_bound->run.max_canvases;
  return sampler.PlannedSteps();
}

absl::StatusOr<GenerationSpec> ValidateGenerateRequest(const GenerationRequest& request,
                                                       const Model& model,
                                                       absl::string_view model_path) {
  DLLM_ASSIGN_OR_RETURN(GenerationSpec spec, ValidateCommon(request, model, model_path));
  DLLM_ASSIGN_OR_RETURN(spec.stream, StreamSettingsFromRequest(request.stream));
  if (spec.entropy_bound) {
    // Candidates and log-probabilities score a committed position; the
    // entropy-bound sampler commits none for good.
    if (spec.stream.include_logprobs) {
      return InvalidField("stream.include_logprobs", "does not apply to the entropy-bound sampler");
    }
    if (spec.stream.top_candidates > 0) {
      return InvalidField("stream.top_candidates", "does not apply to the entropy-bound sampler");
    }
  }
  return spec;
}

absl::StatusOr<GenerationSpec> ValidateSessionRequest(const GenerationRequest& request,
                                                      const Model& model,
                                                      absl::string_view model_path) {
  return ValidateCommon(request, model, model_path);
}

}  // namespace dllm
