#include "engine/model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dllm {

void RouteRow(const float* row, int64_t n_expert, int64_t k, bool normalize_weights, float* probs,
              int32_t* order, int32_t* experts, float* weights) {
  // ggml_soft_max: exp of max-subtracted logits, summed in double.
  const float max = *std::max_element(row, row + n_expert);
  double sum = 0;
  for (int64_t e = 0; e < n_expert; ++e) {
    probs[e] = std::exp(row[e] - max);
    sum += probs[e];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t e = 0; e < n_expert; ++e) probs[e] *= inv;

  std::iota(order, order + n_expert, 0);
  std::partial_sort(order, order + k, order + n_expert, [&](int32_t a, int32_t b) {
    return probs[a] > probs[b] || (probs[a] == probs[b] && a < b);
  });
  float total = 0;
  for (int64_t s = 0; s < k; ++s) {
    experts[s] = order[s];
    weights[s] = probs[order[s]];
    total += probs[order[s]];
  }
  if (normalize_weights) {
    total = std::max(total, kMoeWeightSumFloor);
    for (int64_t s = 0; s < k; ++s) weights[s] /= total;
  }
}

void GroupByExpert(const int32_t* experts, int64_t m, int64_t k, int64_t n_expert,
                   ExpertGroups* g) {
  std::fill(g->offset.begin(), g->offset.end(), 0);
  for (int64_t i = 0; i < m * k; ++i) ++g->offset[experts[i] + 1];
  for (int64_t e = 0; e < n_expert; ++e) g->offset[e + 1] += g->offset[e];
  // Counting sort, stable in row order: each expert's rows come out ascending.
  std::copy(g->offset.begin(), g->offset.end() - 1, g->next.begin());
  for (int64_t r = 0; r < m; ++r) {
    for (int64_t s = 0; s < k; ++s) {
      const int32_t at = g->next[experts[r * k + s]]++;
      g->rows[at] = static_cast<int32_t>(r);
      g->slot[at] = static_cast<int32_t>(s);
    }
  }
}

}  // namespace dllm
