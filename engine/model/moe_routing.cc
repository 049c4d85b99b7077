#include "engine/model/moe_routing.h"

#include <algorithm>
#include <cmath>
#include <numeric>

namespace dllm {

RoutingRule RoutingRuleOf(const LayerConfig& layer, const float* expert_bias) {
  RoutingRule rule;
  rule.score = layer.router_score;
  rule.k = layer.n_expert_used;
  rule.normalize = layer.moe_norm_weights;
  rule.scale = layer.moe_weights_scale;
  rule.bias = expert_bias;
  rule.groups = layer.n_expert_groups;
  rule.groups_used = layer.n_expert_groups_used;
  return rule;
}

namespace {

// ggml_soft_max: exp of max-subtracted logits, summed in double.
void Softmax(const float* row, int64_t n, float* probs) {
  const float max = *std::max_element(row, row + n);
  double sum = 0;
  for (int64_t e = 0; e < n; ++e) {
    probs[e] = std::exp(row[e] - max);
    sum += probs[e];
  }
  const float inv = static_cast<float>(1.0 / sum);
  for (int64_t e = 0; e < n; ++e) probs[e] *= inv;
}

// Orders `order[0, n)` (indices into `values`) so that its first k are the
// k largest values, best first, ties to the lower index.
void TopK(const float* values, int32_t* order, int64_t n, int64_t k) {
  std::iota(order, order + n, 0);
  std::partial_sort(order, order + k, order + n, [&](int32_t a, int32_t b) {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  });
}

// Hides (-inf) in `choice` the experts of every group but the best
// `groups_used`, a group scored by the sum of its two best choices (the
// official Ling 2.0 router and llama.cpp's build_moe_ffn both).
// `group_score` (groups) and `order` (groups) are scratch.
void KeepBestGroups(float* choice, int64_t n_expert, int64_t groups, int64_t groups_used,
                    float* group_score, int32_t* order) {
  const int64_t per = n_expert / groups;
  for (int64_t g = 0; g < groups; ++g) {
    float best = -INFINITY, second = -INFINITY;
    for (int64_t e = g * per; e < (g + 1) * per; ++e) {
      if (choice[e] > best) {
        second = best;
        best = choice[e];
      } else if (choice[e] > second) {
        second = choice[e];
      }
    }
    group_score[g] = best + second;
  }
  TopK(group_score, order, groups, groups_used);
  // order[groups_used, groups) are the dropped groups.
  for (int64_t i = groups_used; i < groups; ++i) {
    const int64_t g = order[i];
    std::fill(choice + g * per, choice + (g + 1) * per, -INFINITY);
  }
}

}  // namespace

void RouteRow(const float* row, int64_t n_expert, const RoutingRule& rule, float* scores,
              int32_t* order, int32_t* experts, float* weights) {
  const int64_t k = rule.k;
  float* choice = scores;
  if (rule.score == RouterScore::kSoftmax) {
    Softmax(row, n_expert, scores);
  } else {
    for (int64_t e = 0; e < n_expert; ++e) scores[e] = 1.0f / (1.0f + std::exp(-row[e]));
  }
  if (rule.bias != nullptr || rule.groups > 1) {
    // The bias and the groups decide which experts, not their weights.
    choice = scores + n_expert;
    for (int64_t e = 0; e < n_expert; ++e) {
      choice[e] = scores[e] + (rule.bias != nullptr ? rule.bias[e] : 0.0f);
    }
    if (rule.groups > 1) {
      KeepBestGroups(choice, n_expert, rule.groups, rule.groups_used, scores + 2 * n_expert, order);
    }
  }
  TopK(choice, order, n_expert, k);
  float total = 0;
  for (int64_t s = 0; s < k; ++s) {
    experts[s] = order[s];
    weights[s] = scores[order[s]];
    total += scores[order[s]];
  }
  if (rule.normalize) {
    total = std::max(total, kMoeWeightSumFloor);
    for (int64_t s = 0; s < k; ++s) weights[s] /= total;
  }
  if (rule.scale != 1.0f) {
    for (int64_t s = 0; s < k; ++s) weights[s] *= rule.scale;
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
