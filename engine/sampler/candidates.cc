// Top-k selection over one logits row; see candidates.h.
#include "engine/sampler/candidates.h"

#include <cmath>

#include "engine/base/status_macros.h"
#include "engine/sampler/remasking.h"

namespace dllm {

int TopCandidates(std::span<const float> row, int k, std::span<TokenProb> out) {
  DLLM_CHECK(k >= 0 && k <= kMaxCandidates && out.size() >= static_cast<size_t>(k));
  // The k best so far, sorted descending; a value enters only when strictly
  // greater than the current k-th, so among equal values the lowest id stays.
  float value[kMaxCandidates];
  int32_t token[kMaxCandidates];
  int n = 0;
  const int32_t n_vocab = static_cast<int32_t>(row.size());
  for (int32_t v = 0; v < n_vocab && k > 0; ++v) {
    const float x = row[static_cast<size_t>(v)];
    if (std::isnan(x) || (n == k && !(x > value[k - 1]))) continue;
    int i = n < k ? n++ : k - 1;
    while (i > 0 && x > value[i - 1]) {
      value[i] = value[i - 1];
      token[i] = token[i - 1];
      --i;
    }
    value[i] = x;
    token[i] = v;
  }
  const double lse = n > 0 ? LogSumExp(row) : 0;
  for (int i = 0; i < n; ++i) {
    // A row of -inf (or one with +inf) has no finite normaliser.
    const double p = std::isfinite(lse) ? std::exp(static_cast<double>(value[i]) - lse) : 0.0;
    out[static_cast<size_t>(i)] = TokenProb{token[i], static_cast<float>(p)};
  }
  return n;
}

double TokenLogProb(std::span<const float> row, int32_t token) {
  DLLM_CHECK(token >= 0 && static_cast<size_t>(token) < row.size());
  const double lse = LogSumExp(row);
  if (!std::isfinite(lse)) return std::nan("");
  return static_cast<double>(row[static_cast<size_t>(token)]) - lse;
}

}  // namespace dllm
