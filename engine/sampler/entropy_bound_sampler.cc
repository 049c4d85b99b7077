#include "engine/sampler/entropy_bound_sampler.h"

#include <tbb/parallel_for.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/strings/str_cat.h"
#include "engine/base/status_macros.h"

namespace dllm {
namespace {

absl::Status Invalid(const char* field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("entropy-bound sampler: ", field, ": ", why));
}

}  // namespace

absl::StatusOr<EntropyBoundConfig> EntropyBoundConfigFromGguf(const GgufFile& f) {
  EntropyBoundConfig c;
  struct IntKey {
    const char* key;
    int* field;
  };
  for (const IntKey& k : {IntKey{"diffusion.canvas_length", &c.canvas_length},
                          IntKey{"diffusion.eb_max_steps", &c.max_steps},
                          IntKey{"diffusion.eb_stability_threshold", &c.stability_threshold}}) {
    DLLM_ASSIGN_OR_RETURN(const double v, f.GetFloatOr(k.key, *k.field));
    if (!(v >= 0 && v <= (1 << 20)) || v != std::floor(v)) {
      return absl::InvalidArgumentError(absl::StrCat("gguf: ", f.path(), ": key '", k.key, "' = ",
                                                     v, " is not a whole number in [0, 1048576]"));
    }
    *k.field = static_cast<int>(v);
  }
  struct FloatKey {
    const char* key;
    float* field;
  };
  for (const FloatKey& k :
       {FloatKey{"diffusion.eb_t_min", &c.t_min}, FloatKey{"diffusion.eb_t_max", &c.t_max},
        FloatKey{"diffusion.eb_entropy_bound", &c.entropy_bound},
        FloatKey{"diffusion.eb_confidence_threshold", &c.confidence_threshold}}) {
    DLLM_ASSIGN_OR_RETURN(const double v, f.GetFloatOr(k.key, *k.field));
    *k.field = static_cast<float>(v);
  }
  if (absl::Status s = c.Validate(); !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat("gguf: ", f.path(), ": the diffusion.* sampler keys: ", s.message()));
  }
  return c;
}

absl::Status EntropyBoundConfig::Validate() const {
  if (canvas_length < 1)
    return Invalid("canvas_length", absl::StrCat(canvas_length, " must be >= 1"));
  if (max_steps < 1) return Invalid("max_steps", absl::StrCat(max_steps, " must be >= 1"));
  if (!(t_min > 0 && std::isfinite(t_min)))
    return Invalid("t_min", absl::StrCat(t_min, " must be > 0"));
  if (!(t_max >= t_min && std::isfinite(t_max))) {
    return Invalid("t_max", absl::StrCat(t_max, " must be finite and >= t_min ", t_min));
  }
  if (!(entropy_bound >= 0 && std::isfinite(entropy_bound))) {
    return Invalid("entropy_bound", absl::StrCat(entropy_bound, " must be finite and >= 0"));
  }
  if (stability_threshold < 0) {
    return Invalid("stability_threshold", absl::StrCat(stability_threshold, " must be >= 0"));
  }
  if (!(confidence_threshold >= 0 && std::isfinite(confidence_threshold))) {
    return Invalid("confidence_threshold",
                   absl::StrCat(confidence_threshold, " must be finite and >= 0"));
  }
  return absl::OkStatus();
}

absl::StatusOr<EntropyBoundSampler> EntropyBoundSampler::Create(const EntropyBoundConfig& config,
                                                                int n_vocab) {
  DLLM_RETURN_IF_ERROR(config.Validate());
  if (n_vocab < 1) return Invalid("n_vocab", absl::StrCat(n_vocab, " must be >= 1"));
  EntropyBoundSampler s;
  s.config_ = config;
  s.n_vocab_ = n_vocab;
  s.rng_.seed(config.seed);
  const size_t c = static_cast<size_t>(config.canvas_length);
  s.canvas_.resize(c);
  std::uniform_int_distribution<int32_t> token(0, n_vocab - 1);
  for (int32_t& t : s.canvas_) t = token(s.rng_);
  s.argmax_.assign(c, 0);
  s.prev_argmax_.assign(c, -1);  // step 0 never counts as stable
  s.sampled_.resize(c);
  s.renoise_.resize(c);
  s.order_.resize(c);
  s.entropy_.resize(c);
  s.uniform_.resize(c);
  s.accepted_.resize(c);
  s.weights_ = PerThread<std::vector<float>>(static_cast<size_t>(n_vocab));
  return s;
}

float EntropyBoundSampler::temperature() const {
  const int s = config_.max_steps;
  const int k = s - step_;  // counts down from S
  return config_.t_min +
         (config_.t_max - config_.t_min) * (static_cast<float>(k) / static_cast<float>(s));
}

EntropyBoundStep EntropyBoundSampler::Step(std::span<const float> logits) {
  const size_t c = canvas_.size();
  const size_t v = static_cast<size_t>(n_vocab_);
  const float t = temperature();
  const float inv = 1.0f / t;
  // The step's randomness, drawn in one thread so a seed replays exactly.
  std::uniform_real_distribution<float> uniform(0.0f, 1.0f);
  std::uniform_int_distribution<int32_t> token(0, n_vocab_ - 1);
  for (size_t p = 0; p < c; ++p) {
    uniform_[p] = uniform(rng_);
    renoise_[p] = token(rng_);
  }
  // Per position, in float as the reference accumulates: the first largest
  // scaled logit, the normaliser, the entropy and the inverse-CDF sample.
  tbb::parallel_for(size_t{0}, c, [&](size_t p) {
    const float* row = logits.data() + p * v;
    float m = -INFINITY;
    int32_t best = 0;
    for (size_t i = 0; i < v; ++i) {
      const float z = row[i] * inv;
      if (z > m) m = z, best = static_cast<int32_t>(i);
    }
    // Each weight once (the reference computes it twice, to the same bits).
    std::vector<float>& w = weights_.Local();
    float z_sum = 0.0f;
    for (size_t i = 0; i < v; ++i) {
      w[i] = std::exp(row[i] * inv - m);
      z_sum += w[i];
    }
    const float target = uniform_[p] * z_sum;
    float cum = 0.0f, h = 0.0f;
    int32_t sample = n_vocab_ - 1;
    bool picked = false;
    for (size_t i = 0; i < v; ++i) {
      const float e = w[i];
      const float q = e / z_sum;
      if (q > 0.0f) h -= q * std::log(q);
      cum += e;
      if (!picked && cum >= target) sample = static_cast<int32_t>(i), picked = true;
    }
    entropy_[p] = h;
    argmax_[p] = best;
    sampled_[p] = sample;
  });
  // Accept by ascending entropy while the entropies strictly before stay
  // within the bound (std::sort, as the reference, orders equal entropies).
  std::iota(order_.begin(), order_.end(), 0);
  std::sort(order_.begin(), order_.end(),
            [&](int32_t a, int32_t b) { return entropy_[a] < entropy_[b]; });
  double before_and_this = 0;
  for (int32_t p : order_) {
    before_and_this += entropy_[p];
    accepted_[p] = before_and_this - entropy_[p] <= config_.entropy_bound ? 1 : 0;
  }
  float entropy_sum = 0.0f;
  for (size_t p = 0; p < c; ++p) {
    canvas_[p] = accepted_[p] ? sampled_[p] : renoise_[p];
    entropy_sum += entropy_[p];
  }
  held_ = prev_argmax_ == argmax_ ? held_ + 1 : 0;
  const bool confident = entropy_sum / static_cast<float>(c) < config_.confidence_threshold;
  const bool finished = held_ >= config_.stability_threshold && confident;
  prev_argmax_ = argmax_;
  prev_temp_inv_ = inv;
  EntropyBoundStep report{step_,    t,         uniform_, renoise_,  argmax_, entropy_,
                          sampled_, accepted_, held_,    confident, finished};
  ++step_;
  done_ = finished || step_ >= config_.max_steps;
  return report;
}

}  // namespace dllm
