// Row scoring for the LLaDA and Dream samplers (see remasking.h for the
// precision choices).
#include "engine/sampler/remasking.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "engine/base/status_macros.h"
#include "engine/sampler/rng.h"

namespace dllm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();

float RowMax(std::span<const float> row) {
  float m = kNegInf;
  for (float v : row) m = std::max(m, v);
  return m;
}

// Sum of exp(row_v - max) in double, exp itself in float32.
double ExpSum(std::span<const float> row, float max) {
  double z = 0;
  for (float v : row) z += static_cast<double>(std::exp(v - max));
  return z;
}

// Ranking of tokens for sorting: larger value first, then lower id.
struct ByValueDesc {
  const float* values;
  bool operator()(int32_t a, int32_t b) const {
    return values[a] > values[b] || (values[a] == values[b] && a < b);
  }
};

}  // namespace

int32_t ArgmaxRow(std::span<const float> row) {
  DLLM_DCHECK(!row.empty());
  int32_t best = 0;
  for (size_t v = 1; v < row.size(); ++v) {
    if (row[v] > row[best]) best = static_cast<int32_t>(v);
  }
  return best;
}

double LogSumExp(std::span<const float> row) {
  const float m = RowMax(row);
  return std::log(ExpSum(row, m)) + m;
}

double KlDivergence(std::span<const float> p, std::span<const float> q) {
  const double p_lse = LogSumExp(p), q_lse = LogSumExp(q);
  double d = 0;
  for (size_t t = 0; t < p.size(); ++t) {
    const double lp = static_cast<double>(p[t]) - p_lse;
    d += std::exp(lp) * (lp - (static_cast<double>(q[t]) - q_lse));
  }
  return d;
}

RowScore ScoreLladaRow(std::span<const float> logits, const SamplerConfig& config, int32_t eos,
                       int32_t eot, const RowKey& key) {
  const int32_t n_vocab = static_cast<int32_t>(logits.size());
  auto excluded = [&](int32_t v, bool also_eos_eot, bool also_eot) {
    return (config.logits_eos_inf && v == eos) || (also_eos_eot && (v == eos || v == eot)) ||
           (also_eot && v == eot);
  };
  // Token choice: logits with the EOS column at -inf when logits_eos_inf.
  int32_t token = -1;
  if (config.temperature > 0) {
    const double t = config.temperature;
    double best = -std::numeric_limits<double>::infinity();
    for (int32_t v = 0; v < n_vocab; ++v) {
      if (excluded(v, false, false)) continue;
      const double u = RngUniform(key.seed, RngStream::kToken, key.step, key.position, v);
      const double noisy = static_cast<double>(logits[v]) - t * std::log(-std::log(u));
      if (token < 0 || noisy > best) {
        best = noisy;
        token = v;
      }
    }
  } else {
    for (int32_t v = 0; v < n_vocab; ++v) {
      if (excluded(v, false, false)) continue;
      if (token < 0 || logits[v] > logits[token]) token = v;
    }
  }
  DLLM_CHECK(token >= 0);
  RowScore score{token, 0.0};
  if (config.algorithm == Algorithm::kRandom) {
    score.confidence = RngUniform(key.seed, RngStream::kConfidence, key.step, key.position);
    return score;
  }
  // Confidence: softmax of the clean logits. generate.py's chained
  // assignment puts EOS and EoT at -inf at T = 0 but only EoT at T > 0
  // (samplers.md 3.4); a chosen token at -inf gets confidence exactly 0.
  const bool eos_eot = config.confidence_eos_eot_inf && config.temperature == 0;
  const bool eot_only = config.confidence_eos_eot_inf && config.temperature > 0;
  if (excluded(token, eos_eot, eot_only)) return score;
  float m = kNegInf;
  for (int32_t v = 0; v < n_vocab; ++v) {
    if (!excluded(v, eos_eot, eot_only)) m = std::max(m, logits[v]);
  }
  double z = 0;
  for (int32_t v = 0; v < n_vocab; ++v) {
    if (!excluded(v, eos_eot, eot_only)) z += static_cast<double>(std::exp(logits[v] - m));
  }
  score.confidence = static_cast<double>(std::exp(logits[token] - m)) / z;
  return score;
}

void TopPFilter(std::span<float> row, float top_p, std::span<int32_t> order) {
  const size_t n = row.size();
  DLLM_CHECK(order.size() == n && n > 0);
  if (top_p >= 1.0f) return;
  const float m = RowMax(row);
  const double z = ExpSum(row, m);
  std::iota(order.begin(), order.end(), 0);
  const ByValueDesc cmp{row.data()};
  // Sort only as far as the kept prefix reaches: it is usually short.
  size_t sorted = std::min<size_t>(n, 256);
  size_t keep = n;
  for (;;) {
    std::partial_sort(order.begin(), order.begin() + sorted, order.end(), cmp);
    double cum = 0;
    for (size_t j = 0; j < sorted; ++j) {
      cum += static_cast<double>(std::exp(row[order[j]] - m)) / z;
      if (cum > top_p) {
        keep = j + 1;
        break;
      }
    }
    if (keep != n || sorted == n) break;
    sorted = std::min(n, sorted * 8);
  }
  if (keep == n) return;
  // The kept set is a prefix of the (value desc, id asc) order, so it is
  // every token that ranks at or before the last kept one.
  const int32_t last = order[keep - 1];
  const float last_value = row[last];
  for (size_t v = 0; v < n; ++v) {
    const bool kept =
        row[v] > last_value || (row[v] == last_value && v <= static_cast<size_t>(last));
    if (!kept) row[v] = kNegInf;
  }
}

void TopKFilter(std::span<float> row, int top_k, std::span<int32_t> order) {
  const size_t n = row.size();
  DLLM_CHECK(order.size() == n && n > 0);
  if (top_k <= 0 || static_cast<size_t>(top_k) >= n) return;
  std::iota(order.begin(), order.end(), 0);
  std::nth_element(order.begin(), order.begin() + (top_k - 1), order.end(),
                   ByValueDesc{row.data()});
  const float kth = row[order[top_k - 1]];
  for (float& v : row) {
    if (v < kth) v = kNegInf;
  }
}

RowScore ScoreLlada2Row(std::span<const float> logits, const SamplerConfig& config,
                        const RowKey& key, RowScratch* scratch) {
  const size_t n = logits.size();
  DLLM_CHECK(scratch->work.size() >= n && scratch->order.size() >= n);
  std::span<float> work(scratch->work.data(), n);
  std::span<int32_t> order(scratch->order.data(), n);
  const bool draw = config.temperature > 0;
  if (draw) {
    for (size_t v = 0; v < n; ++v) work[v] = logits[v] / config.temperature;
    TopKFilter(work, config.top_k, order);
    TopPFilter(work, config.top_p, order);
  } else {
    std::copy(logits.begin(), logits.end(), work.begin());
  }
  const float m = RowMax(work);
  const double z = ExpSum(work, m);
  RowScore score;
  if (draw) {
    // Inverse-CDF draw over token ids in order, as ScoreDreamRow.
    const double u = RngUniform(key.seed, RngStream::kToken, key.step, key.position);
    double cum = 0;
    for (size_t v = 0; v < n; ++v) {
      if (work[v] == kNegInf) continue;
      score.token = static_cast<int32_t>(v);
      cum += static_cast<double>(std::exp(work[v] - m)) / z;
      if (cum > u) break;
    }
  } else {
    score.token = ArgmaxRow(work);
  }
  score.confidence = static_cast<float>(static_cast<double>(std::exp(work[score.token] - m)) / z);
  return score;
}

RowScore ScoreDreamRow(std::span<const float> logits, const SamplerConfig& config,
                       const RowKey& key, RowScratch* scratch) {
  const size_t n = logits.size();
  DLLM_CHECK(scratch->work.size() >= n && scratch->order.size() >= n);
  std::span<float> work(scratch->work.data(), n);
  std::span<int32_t> order(scratch->order.data(), n);
  if (config.temperature > 0) {
    for (size_t v = 0; v < n; ++v) work[v] = logits[v] / config.temperature;
  } else {
    std::copy(logits.begin(), logits.end(), work.begin());
  }
  TopPFilter(work, config.top_p, order);
  TopKFilter(work, config.top_k, order);
  const float m = RowMax(work);
  const double z = ExpSum(work, m);
  auto prob = [&](size_t v) { return static_cast<double>(std::exp(work[v] - m)) / z; };

  RowScore score;
  if (config.temperature > 0) {
    // Inverse-CDF draw over token ids in order; the last token with non-zero
    // probability absorbs rounding.
    const double u = RngUniform(key.seed, RngStream::kToken, key.step, key.position);
    double cum = 0;
    for (size_t v = 0; v < n; ++v) {
      if (work[v] == kNegInf) continue;
      score.token = static_cast<int32_t>(v);
      cum += prob(v);
      if (cum > u) break;
    }
  } else {
    score.token = ArgmaxRow(work);
  }
  // From here on only probabilities are needed: take each exp once (the
  // same float values `prob` would compute) and keep them in `work`.
  for (size_t v = 0; v < n; ++v) work[v] = std::exp(work[v] - m);
  auto prob_of = [&](size_t v) { return static_cast<double>(work[v]) / z; };
  const double p_token = prob_of(score.token);
  switch (config.algorithm) {
    case Algorithm::kTopkMargin: {
      double p1 = 0, p2 = 0;
      for (size_t v = 0; v < n; ++v) {
        const double p = prob_of(v);
        if (p > p1) {
          p2 = p1;
          p1 = p;
        } else if (p > p2) {
          p2 = p;
        }
      }
      score.confidence = p1 - p2;
      break;
    }
    case Algorithm::kEntropy: {
      double sum = 0;
      for (size_t v = 0; v < n; ++v) {
        const double p = prob_of(v);
        sum += p * std::log(p + 1e-10);
      }
      score.confidence = sum;
      break;
    }
    default:
      score.confidence = p_token;
      break;
  }
  return score;
}

void CombineCfg(std::span<const float> cond, std::span<const float> uncond, float scale,
                std::span<float> out) {
  DLLM_CHECK(cond.size() == uncond.size() && out.size() == cond.size());
  const float w = scale + 1.0f;
  for (size_t i = 0; i < cond.size(); ++i) out[i] = uncond[i] + w * (cond[i] - uncond[i]);
}

}  // namespace dllm
