// The quality scores `dllm eval` reports on held-out windows (the format of
// shared/reference/quality/windows.json): masked-token cross-entropy, top-1
// and KL against a baseline; and the infill task's exact match and token
// accuracy with the sampler filling each window's span.
#ifndef DLLM_SERVICE_CLI_EVAL_SCORES_H_
#define DLLM_SERVICE_CLI_EVAL_SCORES_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/sampler/sampler_config.h"
#include "service/json/json.h"

namespace dllm {

struct MaskedTokenScore {
  double cross_entropy = 0;  // mean over masked positions, nats
  double top1 = 0;           // share of masked positions whose argmax is the true token
  double kl = -1;            // mean KL(baseline || model); -1 without a baseline
  int positions = 0;
};

// Scores `model` (and `baseline`, may be null) on the windows of `windows`
// (windows.json's format) at each ratio in `ratios` ("0.15", ...).
absl::StatusOr<std::map<std::string, MaskedTokenScore>> EvaluateMaskedTokens(
    const std::shared_ptr<const Model>& model, const std::shared_ptr<const Model>& baseline,
    const Json& windows, const std::vector<std::string>& ratios, int threads);

// The infill task: in each window, the span [infill.start, infill.end) is
// masked, the tokens before it are the prompt, the tokens after it are
// committed as given (DenoiseSession::Commit), and the sampler fills the
// span. Exact match: every span token right; token accuracy: the share of
// span tokens right.
struct InfillScore {
  double exact_match = 0;
  double token_accuracy = 0;
  int spans = 0;
  int tokens = 0;
  int forward_steps = 0;  // steps that ran a forward, all spans (what threshold and caches save)
  int full_steps = 0;     // of those, under a cache: the ones that computed the whole canvas
};

// How each window's span is set up.
struct InfillTask {
  // Steps: the span's length times this (at least 1, at most the span).
  double steps_per_token = 1;
  // The span's blocks: 0 one block (the span), kInfillBlocksAuto the
  // blocks /infill gives a span by default (InfillBlockLength), else this.
  int block_length = 0;
  // 0: each window's own span; N: the N tokens in the middle of each
  // window instead (an editor's span, e.g. llama.vim's 128).
  int span = 0;
};
inline constexpr int kInfillBlocksAuto = -1;

// `base` gives the sampler settings (algorithm, temperature, seed, ...;
// gen_length is each span's length) and `caching` the K/V cache.
absl::StatusOr<InfillScore> EvaluateInfill(const std::shared_ptr<const Model>& model,
                                           const Json& windows, const SamplerConfig& base,
                                           const CachingOptions& caching, const InfillTask& task,
                                           int threads);

// The ids of a JSON array, each below `n_vocab`; errors name `where`.
absl::StatusOr<std::vector<int32_t>> Ids(const Json& array, int32_t n_vocab,
                                         const std::string& where);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_EVAL_SCORES_H_
