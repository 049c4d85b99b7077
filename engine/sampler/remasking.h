// Per-row scoring for the denoising samplers: from one logits row (one
// position's distribution over the vocabulary) to the token to write and the
// confidence used to rank positions. Model-independent; the state machine
// that picks rows and positions is denoise_sampler.h.
//
// Precision. The reference runs (shared/reference/official) were made with
// float64 logits and float64 softmax (LLaDA's original release computes its
// confidence softmax in float64; since 2025-06 the official code works in
// bf16). We take float32 logits, compute exp() in float32 and accumulate the
// softmax normaliser, cumulative sums and entropies in double; confidences
// are doubles. Relative error is ~1e-7, far below the smallest ranking
// margin in the reference runs (6.5e-6 in probability), and double keeps
// near-equal confidences from collapsing into artificial ties. Ties left
// after that are broken by lowest token id (argmax) and lowest position
// (ranking), the CUDA top-k rule (samplers.md section 0).
#ifndef DLLM_ENGINE_SAMPLER_REMASKING_H_
#define DLLM_ENGINE_SAMPLER_REMASKING_H_

#include <cstdint>
#include <span>
#include <vector>

#include "engine/sampler/sampler_config.h"

namespace dllm {

struct RowScore {
  int32_t token = -1;
  double confidence = 0;  // higher is committed first
};

// Where a row's random draws come from (rng.h): seed plus (step, position).
struct RowKey {
  uint64_t seed = 0;
  int step = 0;
  int position = 0;
};

// Scratch for one row, sized once for `n_vocab`; scoring allocates nothing.
struct RowScratch {
  explicit RowScratch(int n_vocab) : work(n_vocab), order(n_vocab) {}
  std::vector<float> work;     // filtered / tempered logits (n_vocab)
  std::vector<int32_t> order;  // token ids sorted for top-p (n_vocab)
};

// First index of the largest value (torch.argmax's tie rule).
int32_t ArgmaxRow(std::span<const float> row);

// log(sum_v exp(row_v - max)) + max, accumulated in double.
double LogSumExp(std::span<const float> row);

// KL(softmax(p) || softmax(q)) in nats, from two logits rows of one
// length, accumulated in double: how far logits `q` (a quantized model's,
// or a cached step's) are from `p`.
double KlDivergence(std::span<const float> p, std::span<const float> q);

// LLaDA low_confidence / random (generate.py). Token: argmax of the logits,
// or at temperature T > 0 argmax of exp(l) / (-log u)^T (Gumbel-max,
// evaluated as l - T log(-log u) to avoid overflow; same argmax). Confidence:
// softmax probability of that token under the un-noised logits
// (low_confidence) or a uniform draw (random). `eos`/`eot` are token ids for
// the EOS flags of `config` (-1 = none).
RowScore ScoreLladaRow(std::span<const float> logits, const SamplerConfig& config, int32_t eos,
                       int32_t eot, const RowKey& key);

// Dream sample_tokens(): logits / T (T > 0), top_p then top_k filtering,
// probs = softmax; token = argmax(probs) at T = 0, else a categorical draw;
// confidence per config.algorithm: maskgit_plus and origin p[token],
// topk_margin p1 - p2, entropy sum_v p log(p + 1e-10) (negative entropy, so
// the lowest-entropy rows rank first).
RowScore ScoreDreamRow(std::span<const float> logits, const SamplerConfig& config,
                       const RowKey& key, RowScratch* scratch);

// LLaDA2's sample_tokens() (the 2.0 and 2.1 samplers alike): at T = 0 the
// argmax of the logits, confidence its softmax probability (no filter);
// at T > 0 logits / T, top_k then top_p filtering, a categorical draw from
// the softmax, confidence the drawn token's filtered probability. The
// confidence is rounded to float, as the official code compares it with
// its thresholds in float32.
RowScore ScoreLlada2Row(std::span<const float> logits, const SamplerConfig& config,
                        const RowKey& key, RowScratch* scratch);

// Dream's top-p filter on `row` in place (official order: sort descending,
// cumulative softmax, drop tokens after the one whose cumulative probability
// first exceeds top_p; the first token is always kept). Dropped tokens get
// -inf (the official finfo.min; both give probability 0). `order` is scratch
// of row.size().
void TopPFilter(std::span<float> row, float top_p, std::span<int32_t> order);

// Dream's top-k filter in place: tokens below the k-th largest value get
// -inf; ties with the k-th value are all kept.
void TopKFilter(std::span<float> row, int top_k, std::span<int32_t> order);

// Classifier-free guidance (LLaDA): out = u + (scale + 1) * (c - u).
void CombineCfg(std::span<const float> cond, std::span<const float> uncond, float scale,
                std::span<float> out);

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_REMASKING_H_
