// Per-position candidates: the most probable tokens of one logits row with
// their probabilities, for clients that look at what the model considered
// (Generate's top_candidates, the Step session's Forward).
//
// What the probabilities are: softmax of the row's logits at temperature 1,
// before the sampler's temperature, top-p / top-k filtering and LLaDA's EOS
// flags. That is the model's own distribution for the position (under CFG:
// of the guided logits the sampler reads), independent of how the sampler is
// configured to draw from it, so candidates from different settings compare.
#ifndef DLLM_ENGINE_SAMPLER_CANDIDATES_H_
#define DLLM_ENGINE_SAMPLER_CANDIDATES_H_

#include <cstdint>
#include <span>

namespace dllm {

// The most candidates one position can ask for (the API's limit).
inline constexpr int kMaxCandidates = 8;

struct TokenProb {
  int32_t token = -1;
  float prob = 0;
};

// Writes the min(k, row.size()) most probable tokens of softmax(row) to
// `out`, most probable first, ties by lowest token id (the argmax rule), and
// returns how many it wrote. NaN logits are never candidates. One pass over
// the row for the selection and one for the normaliser: O(n_vocab), no sort.
// Requires 0 <= k <= kMaxCandidates and out.size() >= k.
int TopCandidates(std::span<const float> row, int k, std::span<TokenProb> out);

// log softmax(row)[token], the same distribution as the candidates' (the
// OpenAI API's `logprobs`). -inf for a token the row gives no probability,
// NaN when the row has no finite normaliser. Requires 0 <= token < row.size().
double TokenLogProb(std::span<const float> row, int32_t token);

}  // namespace dllm

#endif  // DLLM_ENGINE_SAMPLER_CANDIDATES_H_
