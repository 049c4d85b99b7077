// The quality cost of an approximate K/V cache, measured against exact
// decoding on the same prompts (`dllm eval --divergence`).
//
// Teacher-forced: an exact session and a cached one (the same settings plus
// the cache) advance over the same canvas at every step. The exact session
// chooses the commits, and the cached one commits exactly those
// (DenoiseSession::AdvanceWith), so both read the same rows of the same
// canvas and only their logits differ. Compared on the rows the sampler
// reads (the committable ones): the mean KL(exact || cached) in nats, the
// share of rows whose top-1 token agrees, and the first step at which some
// row's top-1 differs.
//
// Free-running: the two sessions run on their own with the same seed; the
// share of final generated tokens that are identical, and the steps each
// ran a forward on (what threshold decoding saves).
#ifndef DLLM_SERVICE_CLI_CACHE_DIVERGENCE_H_
#define DLLM_SERVICE_CLI_CACHE_DIVERGENCE_H_

#include <memory>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/sampler/sampler_config.h"

namespace dllm {

struct CacheDivergence {
  int runs = 0;
  int64_t rows = 0;           // teacher-forced rows compared, all runs
  double mean_kl = 0;         // nats, over those rows
  double top1_agreement = 0;  // share of those rows
  // Per run, the first teacher-forced step (0-based) at which some row's
  // top-1 differs; a run that never diverges counts its number of steps.
  double first_divergence_mean = 0;
  int first_divergence_min = -1;  // -1: no run diverged
  int never_diverged = 0;         // runs
  double identical_tokens = 0;    // free-running: share of generated tokens
  int exact_forward_steps = 0;    // free-running, all runs
  int cached_forward_steps = 0;
  int cached_full_steps = 0;  // of those, the ones that refilled the cache
};

// One run per prompt under `config`: `caching` is the cache to measure, the
// exact runs use no cache.
absl::StatusOr<CacheDivergence> MeasureCacheDivergence(
    const std::shared_ptr<const Model>& model, const SamplerConfig& config,
    const CachingOptions& caching, const std::vector<std::vector<int32_t>>& prompts, int threads);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_CACHE_DIVERGENCE_H_
