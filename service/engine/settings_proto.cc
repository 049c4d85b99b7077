#include "service/engine/settings_proto.h"

namespace dllm {

v1::Algorithm AlgorithmToProto(Algorithm algorithm) {
  return static_cast<v1::Algorithm>(static_cast<int>(algorithm) + 1);
}

v1::Cache CacheModeToProto(CacheMode cache) {
  return static_cast<v1::Cache>(static_cast<int>(cache) + v1::CACHE_NONE);
}

Algorithm AlgorithmFromProto(v1::Algorithm algorithm) {
  return static_cast<Algorithm>(static_cast<int>(algorithm) - 1);
}

CacheMode CacheModeFromProto(v1::Cache cache) {
  return static_cast<CacheMode>(static_cast<int>(cache) - v1::CACHE_NONE);
}

SamplerChoice SamplerChoiceFromProto(v1::Sampler sampler) {
  switch (sampler) {
    case v1::SAMPLER_MASKED:
      return SamplerChoice::kMasked;
    case v1::SAMPLER_ENTROPY_BOUND:
      return SamplerChoice::kEntropyBound;
    default:
      return SamplerChoice::kModelDefault;
  }
}

v1::EntropyBoundParams EntropyBoundParamsToProto(const EntropyBoundConfig& c) {
  v1::EntropyBoundParams e;
  e.set_max_steps(c.max_steps);
  e.set_t_min(c.t_min);
  e.set_t_max(c.t_max);
  e.set_entropy_bound(c.entropy_bound);
  e.set_stability_threshold(c.stability_threshold);
  e.set_confidence_threshold(c.confidence_threshold);
  return e;
}

v1::DiffusionParams DefaultDiffusionParams(const Model& model) {
  const ModelConfig& config = model.config();
  v1::DiffusionParams d;
  if (config.canvas_length > 0) {
    // The entropy-bound sampler's: one canvas, the exact cache, the file's
    // settings (the server checked them at start).
    d.set_sampler(v1::SAMPLER_ENTROPY_BOUND);
    d.set_gen_length(config.canvas_length);
    d.set_cache(v1::CACHE_EXACT);
    *d.mutable_entropy_bound() = EntropyBoundParamsToProto(
        EntropyBoundConfigFromGguf(model.file()).value_or(EntropyBoundConfig{}));
    return d;
  }
  const SamplerConfig c = DefaultSamplerConfig(config, kDefaultGenLength);
  d.set_sampler(v1::SAMPLER_MASKED);
  d.set_gen_length(c.gen_length);
  if (c.family == SamplerFamily::kLlada2) {
    // LLaDA2's: blocks scheduled on their own, the threshold, the exact cache.
    d.set_block_length(c.block_length);
    d.set_algorithm(AlgorithmToProto(c.algorithm));
    d.set_early_exit(c.early_exit);
    if (c.threshold) d.set_threshold(*c.threshold);
    d.set_cache(v1::CACHE_EXACT);
    v1::Llada2Params* l = d.mutable_llada2();
    l->set_steps_per_block(static_cast<uint32_t>(c.steps_per_block));
    l->set_max_post_steps(static_cast<uint32_t>(c.max_post_steps));
    return d;
  }
  d.set_steps(c.steps);
  d.set_block_length(c.EffectiveBlockLength());
  d.set_algorithm(AlgorithmToProto(c.algorithm));
  d.set_early_exit(c.early_exit);
  if (c.family == SamplerFamily::kDream) d.set_eps(c.eps);
  return d;
}

v1::SamplingParams DefaultSamplingParams(const Model& model) {
  // The entropy-bound sampler takes only a seed (the server draws one).
  if (model.config().canvas_length > 0) return v1::SamplingParams();
  const SamplerConfig c = DefaultSamplerConfig(model.config(), kDefaultGenLength);
  v1::SamplingParams s;
  s.set_temperature(c.temperature);
  s.set_top_p(c.top_p);
  s.set_top_k(static_cast<uint32_t>(c.top_k));
  s.set_alg_temp(c.alg_temp);
  return s;
}

}  // namespace dllm
