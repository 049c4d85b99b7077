// SamplerConfig validation and the algorithm name table.
#include "engine/sampler/sampler_config.h"

#include <cmath>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

constexpr absl::string_view kAlgorithmNames[] = {
    "low_confidence", "random", "origin", "maskgit_plus", "topk_margin", "entropy",
};
static_assert(std::size(kAlgorithmNames) == static_cast<size_t>(Algorithm::kSentinel));

constexpr absl::string_view kCacheModeNames[] = {"none", "prefix", "dual", "exact"};
static_assert(std::size(kCacheModeNames) == static_cast<size_t>(CacheMode::kSentinel));

absl::Status Invalid(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("sampler: ", field, ": ", why));
}

}  // namespace

absl::string_view AlgorithmName(Algorithm algorithm) {
  const auto i = static_cast<size_t>(algorithm);
  return i < std::size(kAlgorithmNames) ? kAlgorithmNames[i] : "unknown";
}

absl::StatusOr<Algorithm> ParseAlgorithm(absl::string_view name) {
  for (size_t i = 0; i < std::size(kAlgorithmNames); ++i) {
    if (kAlgorithmNames[i] == name) return static_cast<Algorithm>(i);
  }
  return Invalid("algorithm", absl::StrCat("unknown algorithm '", name,
                                           "' (LLaDA: low_confidence, random; Dream: origin, "
                                           "maskgit_plus, topk_margin, entropy)"));
}

absl::string_view CacheModeName(CacheMode mode) {
  const auto i = static_cast<size_t>(mode);
  return i < std::size(kCacheModeNames) ? kCacheModeNames[i] : "unknown";
}

absl::StatusOr<CacheMode> ParseCacheMode(absl::string_view name) {
  for (size_t i = 0; i < std::size(kCacheModeNames); ++i) {
    if (kCacheModeNames[i] == name) return static_cast<CacheMode>(i);
  }
  return Invalid("cache",
                 absl::StrCat("unknown cache mode '", name, "' (none, prefix, dual, exact)"));
}

absl::string_view SamplerFamilyName(SamplerFamily family) {
  switch (family) {
    case SamplerFamily::kLlada:
      return "llada";
    case SamplerFamily::kDream:
      return "dream";
    case SamplerFamily::kLlada2:
      return "llada2";
  }
  return "unknown";
}

SamplerFamily SamplerFamilyOf(Arch arch) {
  switch (arch) {
    case Arch::kLlada:
    case Arch::kLladaMoe:
      return SamplerFamily::kLlada;
    case Arch::kDream:
    case Arch::kRnd1:
    // DiffusionGemma's own sampler is the entropy-bound one; its masked
    // stand-in schedules by timestep as Dream's does.
    case Arch::kDiffusionGemma:
      return SamplerFamily::kDream;
    case Arch::kLlada2:
      return SamplerFamily::kLlada2;
  }
  return SamplerFamily::kLlada;
}

bool AlgorithmFitsFamily(Algorithm algorithm, SamplerFamily family) {
  switch (algorithm) {
    case Algorithm::kLowConfidence:
      return family != SamplerFamily::kDream;
    case Algorithm::kRandom:
      return family == SamplerFamily::kLlada;
    case Algorithm::kOrigin:
    case Algorithm::kMaskgitPlus:
    case Algorithm::kTopkMargin:
    case Algorithm::kEntropy:
      return family == SamplerFamily::kDream;
    default:
      return false;
  }
}

const char* FamilyAlgorithmNames(SamplerFamily family) {
  switch (family) {
    case SamplerFamily::kLlada:
      return "low_confidence, random";
    case SamplerFamily::kDream:
      return "origin, maskgit_plus, topk_margin, entropy";
    case SamplerFamily::kLlada2:
      break;
  }
  return "low_confidence";
}

int DefaultBlockLength(SamplerFamily family, int gen_length, int preferred) {
  return family == SamplerFamily::kLlada && preferred > 0 && gen_length % preferred == 0 ? preferred
                                                                                         : 0;
}

int InfillBlockLength(int span, int steps) {
  for (int block = kMaxInfillBlock; block >= kMinInfillBlock; --block) {
    if (span % block == 0 && steps % (span / block) == 0) return block;
  }
  return 0;
}

SamplerConfig DefaultSamplerConfig(Arch arch, int gen_length) {
  SamplerConfig c;
  c.family = SamplerFamilyOf(arch);
  c.algorithm = c.family == SamplerFamily::kDream ? Algorithm::kEntropy : Algorithm::kLowConfidence;
  c.gen_length = gen_length;
  c.steps = gen_length;
  c.block_length = DefaultBlockLength(c.family, gen_length);
  c.early_exit = true;
  if (c.family == SamplerFamily::kLlada2) {
    c.block_length = kDefaultBlockLength;
    c.threshold = kLlada2Threshold;
  }
  return c;
}

SamplerConfig DefaultSamplerConfig(const ModelConfig& model, int gen_length) {
  SamplerConfig c = DefaultSamplerConfig(model.arch, gen_length);
  if (c.family == SamplerFamily::kLlada2 && model.block_length > 0) {
    c.block_length = static_cast<int>(model.block_length);
  }
  return c;
}

namespace {

// LLaDA2's settings (see SamplerConfig): the masked samplers' step and
// block rules and their other knobs do not apply.
absl::Status ValidateLlada2(const SamplerConfig& c) {
  if (c.gen_length <= 0) return Invalid("gen_length", absl::StrCat(c.gen_length, " must be > 0"));
  if (c.block_length <= 0) {
    return Invalid("block_length", absl::StrCat(c.block_length, " must be >= 1 (LLaDA2's blocks)"));
  }
  if (c.steps_per_block <= 0) {
    return Invalid("steps_per_block", absl::StrCat(c.steps_per_block, " must be > 0"));
  }
  if (c.algorithm != Algorithm::kLowConfidence) {
    return Invalid("algorithm", absl::StrCat("'", AlgorithmName(c.algorithm),
                                             "' is not a llada2 algorithm (low_confidence)"));
  }
  if (!std::isfinite(c.temperature) || c.temperature < 0) {
    return Invalid("temperature", absl::StrCat(c.temperature, " must be finite and >= 0"));
  }
  if (!std::isfinite(c.top_p) || c.top_p <= 0 || c.top_p > 1) {
    return Invalid("top_p", absl::StrCat(c.top_p, " must be in (0, 1]"));
  }
  if (c.top_k < 0) return Invalid("top_k", absl::StrCat(c.top_k, " must be >= 0"));
  if (c.alg_temp != 0) return Invalid("alg_temp", "Dream only");
  if (c.cfg_scale != 0) return Invalid("cfg_scale", "LLaDA only");
  if (c.logits_eos_inf) return Invalid("logits_eos_inf", "LLaDA only");
  if (c.confidence_eos_eot_inf) return Invalid("confidence_eos_eot_inf", "LLaDA only");
  for (const auto& [name, value] :
       {std::pair{"threshold", c.threshold}, std::pair{"editing_threshold", c.editing_threshold}}) {
    if (value && (!std::isfinite(*value) || *value < 0 || *value > 1)) {
      return Invalid(name, absl::StrCat(*value, " must be in [0, 1]"));
    }
  }
  if (c.max_post_steps < 0) {
    return Invalid("max_post_steps", absl::StrCat(c.max_post_steps, " must be >= 0"));
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status SamplerConfig::Validate() const {
  if (family == SamplerFamily::kLlada2) return ValidateLlada2(*this);
  if (family != SamplerFamily::kLlada && family != SamplerFamily::kDream) {
    return Invalid("family", absl::StrCat("unknown family ", static_cast<int>(family)));
  }
  if (editing_threshold) return Invalid("editing_threshold", "LLaDA2.1 only");
  const absl::string_view fam = SamplerFamilyName(family);
  if (gen_length <= 0) return Invalid("gen_length", absl::StrCat(gen_length, " must be > 0"));
  if (steps <= 0) return Invalid("steps", absl::StrCat(steps, " must be > 0"));
  if (steps > gen_length) {
    return Invalid("steps", absl::StrCat(steps, " exceeds gen_length ", gen_length));
  }
  if (block_length < 0) {
    return Invalid("block_length", absl::StrCat(block_length, " must be >= 0"));
  }
  const int block = EffectiveBlockLength();
  if (gen_length % block != 0) {
    return Invalid("block_length", absl::StrCat(block, " does not divide gen_length ", gen_length));
  }
  const int num_blocks = gen_length / block;
  if (steps % num_blocks != 0) {
    return Invalid("steps",
                   absl::StrCat(steps, " is not divisible by the number of blocks ", num_blocks,
                                " (gen_length ", gen_length, " / block_length ", block, ")"));
  }
  if (static_cast<size_t>(algorithm) >= static_cast<size_t>(Algorithm::kSentinel)) {
    return Invalid("algorithm", absl::StrCat("unknown algorithm ", static_cast<int>(algorithm)));
  }
  if (!AlgorithmFitsFamily(algorithm, family)) {
    return Invalid("algorithm",
                   absl::StrCat("'", AlgorithmName(algorithm), "' is not a ", fam, " algorithm"));
  }
  if (!std::isfinite(temperature) || temperature < 0) {
    return Invalid("temperature", absl::StrCat(temperature, " must be finite and >= 0"));
  }
  if (!std::isfinite(top_p) || top_p <= 0 || top_p > 1) {
    return Invalid("top_p", absl::StrCat(top_p, " must be in (0, 1]"));
  }
  if (top_k < 0) return Invalid("top_k", absl::StrCat(top_k, " must be >= 0"));
  if (!std::isfinite(alg_temp) || alg_temp < 0) {
    return Invalid("alg_temp", absl::StrCat(alg_temp, " must be finite and >= 0"));
  }
  if (!std::isfinite(cfg_scale) || cfg_scale < 0) {
    return Invalid("cfg_scale", absl::StrCat(cfg_scale, " must be finite and >= 0"));
  }
  // eps is the Dream timestep floor; LLaDA ignores it, but a value that
  // could never be valid is refused for both, so a request means one thing.
  if (!(eps > 0 && eps < 1)) return Invalid("eps", absl::StrCat(eps, " must be in (0, 1)"));
  if (family == SamplerFamily::kLlada) {
    if (top_p != 1.0f) return Invalid("top_p", "Dream only (LLaDA's sampler has no top_p)");
    if (top_k != 0) return Invalid("top_k", "Dream only (LLaDA's sampler has no top_k)");
    if (alg_temp != 0) return Invalid("alg_temp", "Dream only");
  } else {
    if (cfg_scale != 0) return Invalid("cfg_scale", "LLaDA only");
    if (logits_eos_inf) return Invalid("logits_eos_inf", "LLaDA only");
    if (confidence_eos_eot_inf) return Invalid("confidence_eos_eot_inf", "LLaDA only");
  }
  if (threshold.has_value()) {
    const float tau = *threshold;
    if (!std::isfinite(tau) || tau <= 0 || tau > 1) {
      return Invalid("threshold", absl::StrCat(tau, " must be in (0, 1]"));
    }
    if (algorithm != Algorithm::kLowConfidence && algorithm != Algorithm::kMaskgitPlus &&
        algorithm != Algorithm::kTopkMargin) {
      return Invalid("threshold", absl::StrCat("needs a probability-valued confidence "
                                               "(low_confidence, maskgit_plus, topk_margin), not '",
                                               AlgorithmName(algorithm), "'"));
    }
    if (alg_temp != 0) return Invalid("threshold", "cannot be combined with alg_temp > 0");
  }
  return absl::OkStatus();
}

absl::Status CachingOptions::Validate() const {
  if (static_cast<size_t>(cache) >= static_cast<size_t>(CacheMode::kSentinel)) {
    return Invalid("cache", absl::StrCat("unknown cache mode ", static_cast<int>(cache)));
  }
  if (cache_refresh_steps < 0) {
    return Invalid("cache_refresh_steps", absl::StrCat(cache_refresh_steps, " must be >= 0"));
  }
  if (cache_refresh_steps > 0 && cache != CacheMode::kPrefix && cache != CacheMode::kDual) {
    return Invalid("cache_refresh_steps",
                   absl::StrCat(cache_refresh_steps, " needs a cache (prefix or dual)"));
  }
  return absl::OkStatus();
}

absl::Status SamplerConfig::ValidateForCanvas(int prompt_len, int64_t n_ctx, int suffix_len) const {
  if (absl::Status s = Validate(); !s.ok()) return s;
  if (prompt_len <= 0) {
    return Invalid("prompt", absl::StrCat("length ", prompt_len, " must be > 0"));
  }
  if (family == SamplerFamily::kLlada2) {
    if (suffix_len > 0) {
      return Invalid("suffix",
                     "LLaDA2 is block-causal: no block reads the text after it, so it cannot "
                     "infill before a suffix");
    }
    const int64_t canvas = Llada2CanvasLength(prompt_len);
    if (canvas > n_ctx) {
      return absl::InvalidArgumentError(
          absl::StrCat("sampler: prompt length ", prompt_len, " + gen_length ", gen_length,
                       " rounded up to whole blocks of ", block_length, " = ", canvas,
                       " exceeds the model context ", n_ctx));
    }
    return absl::OkStatus();
  }
  const int64_t canvas = static_cast<int64_t>(prompt_len) + gen_length + suffix_len;
  if (canvas > n_ctx) {
    return absl::InvalidArgumentError(
        absl::StrCat("sampler: prompt length ", prompt_len, " + gen_length ", gen_length,
                     suffix_len > 0 ? absl::StrCat(" + suffix length ", suffix_len) : "", " = ",
                     canvas, " exceeds the model context ", n_ctx));
  }
  return absl::OkStatus();
}

}  // namespace dllm
