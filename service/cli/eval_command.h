// `dllm eval --model M --windows FILE [--baseline F.gguf] [--ratios 0.15,0.5,0.9]
// [--json OUT] [--threads N] [--isa I]`: masked-token evaluation through
// dllm's own forward pass, the quality yardstick of the trained tinycode
// model (../shared/reference/quality/README.md). For each window and mask
// ratio, one forward pass over the window with the listed positions set to
// the mask token; each masked position p is scored by its logits row (p - 1
// when the model shifts its logits) with a float64 log-softmax over the
// whole vocabulary: cross-entropy in nats and top-1 accuracy of the true
// token. With --baseline (the F32 file), also the mean KL divergence
// KL(baseline || model) over the same positions: the perplexity/KL table of
// llama.cpp's quantization reports.
#ifndef DLLM_SERVICE_CLI_EVAL_COMMAND_H_
#define DLLM_SERVICE_CLI_EVAL_COMMAND_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/model/model.h"
#include "engine/sampler/sampler_config.h"
#include "service/json/json.h"

namespace dllm {

// The figures of one mask ratio.
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

int RunEval(int argc, char** argv);

}  // namespace dllm

#endif  // DLLM_SERVICE_CLI_EVAL_COMMAND_H_
