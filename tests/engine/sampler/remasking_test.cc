// Tests for engine/sampler/remasking: confidence math per algorithm on
// hand-made rows, tie rules, top-k / top-p, CFG combine and the keyed RNG.
#include "engine/sampler/remasking.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "engine/sampler/rng.h"

namespace dllm {
namespace {

constexpr float kNegInf = -std::numeric_limits<float>::infinity();
// exp() runs in float32 (remasking.h): a few float32 ulps of relative error
// on each term, accumulated in double.
constexpr double kTol = 1e-6;

std::vector<double> Softmax(const std::vector<float>& row) {
  double m = -1e300, z = 0;
  for (float v : row) m = std::max<double>(m, v);
  for (float v : row) z += std::exp(v - m);
  std::vector<double> p;
  for (float v : row) p.push_back(std::exp(v - m) / z);
  return p;
}

SamplerConfig LladaConfig() {
  SamplerConfig c;
  c.family = SamplerFamily::kLlada;
  return c;
}

SamplerConfig DreamConfig(Algorithm alg) {
  SamplerConfig c;
  c.family = SamplerFamily::kDream;
  c.shift_logits = true;
  c.algorithm = alg;
  return c;
}

TEST(RemaskingTest, ArgmaxTiesGoToLowestToken) {
  EXPECT_EQ(ArgmaxRow(std::vector<float>{1, 3, 3, 2}), 1);
  EXPECT_EQ(ArgmaxRow(std::vector<float>{5, 5}), 0);
}

TEST(RemaskingTest, LladaLowConfidenceIsProbabilityOfArgmax) {
  const std::vector<float> row = {0.5f, 2.0f, -1.0f, 1.0f};
  const RowScore s = ScoreLladaRow(row, LladaConfig(), -1, -1, {});
  EXPECT_EQ(s.token, 1);
  EXPECT_NEAR(s.confidence, Softmax(row)[1], kTol);
}

TEST(RemaskingTest, LladaLogitsEosInfNeverPicksEos) {
  SamplerConfig c = LladaConfig();
  c.logits_eos_inf = true;
  const std::vector<float> row = {0.0f, 5.0f, 1.0f};
  const RowScore s = ScoreLladaRow(row, c, /*eos=*/1, /*eot=*/-1, {});
  EXPECT_EQ(s.token, 2);
  EXPECT_NEAR(s.confidence, Softmax({0.0f, kNegInf, 1.0f})[2], kTol);
}

TEST(RemaskingTest, LladaConfidenceEosEotInfGivesZeroAtGreedy) {
  SamplerConfig c = LladaConfig();
  c.confidence_eos_eot_inf = true;
  // EOS predicted: confidence 0 (still finite, still eligible).
  RowScore s = ScoreLladaRow(std::vector<float>{0.0f, 5.0f, 1.0f, 0.5f}, c, 1, 3, {});
  EXPECT_EQ(s.token, 1);
  EXPECT_EQ(s.confidence, 0.0);
  // Other token: renormalised without the EOS and EoT columns.
  s = ScoreLladaRow(std::vector<float>{0.0f, 1.0f, 3.0f, 0.5f}, c, 1, 3, {});
  EXPECT_EQ(s.token, 2);
  EXPECT_NEAR(s.confidence, Softmax({0.0f, kNegInf, 3.0f, kNegInf})[2], kTol);
}

TEST(RemaskingTest, LladaGumbelSamplesInProportion) {
  SamplerConfig c = LladaConfig();
  c.temperature = 1.0f;
  const std::vector<float> row = {0.0f, std::log(3.0f)};  // p = 1/4, 3/4
  int ones = 0;
  const int n = 4000;
  for (int pos = 0; pos < n; ++pos) {
    const RowScore s = ScoreLladaRow(row, c, -1, -1, {7, 0, pos});
    ones += s.token;
    // Confidence is the un-noised probability of the drawn token.
    EXPECT_NEAR(s.confidence, Softmax(row)[s.token], 1e-7);
  }
  EXPECT_NEAR(ones / static_cast<double>(n), 0.75, 0.03);
}

TEST(RemaskingTest, LladaRandomConfidenceIsKeyedUniform) {
  SamplerConfig c = LladaConfig();
  c.algorithm = Algorithm::kRandom;
  const std::vector<float> row = {0.0f, 1.0f};
  const RowScore a = ScoreLladaRow(row, c, -1, -1, {3, 2, 9});
  EXPECT_EQ(a.token, 1);
  EXPECT_EQ(a.confidence, RngUniform(3, RngStream::kConfidence, 2, 9));
  EXPECT_NE(a.confidence, ScoreLladaRow(row, c, -1, -1, {3, 2, 10}).confidence);
}

TEST(RemaskingTest, DreamMaskgitPlusIsTopProbability) {
  const std::vector<float> row = {1.0f, 0.0f, 2.5f};
  RowScratch scratch(3);
  const RowScore s = ScoreDreamRow(row, DreamConfig(Algorithm::kMaskgitPlus), {}, &scratch);
  EXPECT_EQ(s.token, 2);
  EXPECT_NEAR(s.confidence, Softmax(row)[2], kTol);
}

TEST(RemaskingTest, DreamTopkMarginIsTop1MinusTop2) {
  const std::vector<float> row = {1.0f, 0.0f, 2.5f, 2.0f};
  RowScratch scratch(4);
  const RowScore s = ScoreDreamRow(row, DreamConfig(Algorithm::kTopkMargin), {}, &scratch);
  const std::vector<double> p = Softmax(row);
  EXPECT_EQ(s.token, 2);
  EXPECT_NEAR(s.confidence, p[2] - p[3], kTol);
  // Equal top two: margin 0.
  EXPECT_EQ(
      ScoreDreamRow(std::vector<float>{3, 3, 0}, DreamConfig(Algorithm::kTopkMargin), {}, &scratch)
          .confidence,
      0.0);
}

TEST(RemaskingTest, DreamEntropyIsNegativeSoLowestEntropyRanksFirst) {
  RowScratch scratch(4);
  const SamplerConfig c = DreamConfig(Algorithm::kEntropy);
  const std::vector<float> peaked = {8.0f, 0.0f, 0.0f, 0.0f};
  const std::vector<float> flat = {0.0f, 0.0f, 0.0f, 0.0f};
  const RowScore a = ScoreDreamRow(peaked, c, {}, &scratch);
  const RowScore b = ScoreDreamRow(flat, c, {}, &scratch);
  double expect = 0;
  for (double p : Softmax(peaked)) expect += p * std::log(p + 1e-10);
  EXPECT_NEAR(a.confidence, expect, kTol);
  EXPECT_NEAR(b.confidence, std::log(0.25 + 1e-10), kTol);
  EXPECT_GT(a.confidence, b.confidence);  // peaked (low entropy) is committed first
  EXPECT_LE(a.confidence, 0.0);
}

TEST(RemaskingTest, TopPKeepsTheTokenThatCrossesAndAlwaysTheFirst) {
  // probs ~ 0.5, 0.25, 0.125, 0.125 (logs of 4, 2, 1, 1)
  std::vector<float> row = {std::log(1.0f), std::log(4.0f), std::log(1.0f), std::log(2.0f)};
  std::vector<int32_t> order(4);
  std::vector<float> r = row;
  TopPFilter(r, 0.6f, order);  // cum 0.5 (<= 0.6, keep next), 0.75 crosses: keep 2 tokens
  EXPECT_EQ(r[1], row[1]);
  EXPECT_EQ(r[3], row[3]);
  EXPECT_EQ(r[0], kNegInf);
  EXPECT_EQ(r[2], kNegInf);
  r = row;
  TopPFilter(r, 0.1f, order);  // the first token is always kept
  EXPECT_EQ(r[1], row[1]);
  EXPECT_EQ(r[3], kNegInf);
  r = row;
  TopPFilter(r, 0.8f, order);  // 0.5, 0.75, then token 0 (lower id among the 0.125 tie)
  EXPECT_EQ(r[0], row[0]);
  EXPECT_EQ(r[2], kNegInf);
}

TEST(RemaskingTest, TopPOnALargeVocabularyMatchesFullSort) {
  const int n = 5000;
  std::vector<float> row(n);
  for (int v = 0; v < n; ++v)
    row[v] = static_cast<float>(RngUniform(1, RngStream::kToken, 0, v) * 4);
  std::vector<int32_t> order(n);
  std::vector<float> r = row;
  TopPFilter(r, 0.9f, order);
  // Reference: full sort.
  std::vector<int> idx(n);
  for (int v = 0; v < n; ++v) idx[v] = v;
  std::sort(idx.begin(), idx.end(),
            [&](int a, int b) { return row[a] > row[b] || (row[a] == row[b] && a < b); });
  const std::vector<double> p = Softmax(row);
  double cum = 0;
  std::vector<bool> keep(n, false);
  for (int j = 0; j < n; ++j) {
    keep[idx[j]] = true;
    cum += p[idx[j]];
    if (cum > 0.9) break;
  }
  for (int v = 0; v < n; ++v) EXPECT_EQ(r[v] != kNegInf, keep[v]) << v;
}

TEST(RemaskingTest, TopKKeepsTiesAtTheKthValue) {
  std::vector<float> row = {1, 5, 3, 3, 0};
  std::vector<int32_t> order(5);
  TopKFilter(row, 2, order);
  EXPECT_EQ(row, (std::vector<float>{kNegInf, 5, 3, 3, kNegInf}));
}

TEST(RemaskingTest, DreamFiltersApplyAtGreedyToo) {
  SamplerConfig c = DreamConfig(Algorithm::kMaskgitPlus);
  c.top_k = 2;
  RowScratch scratch(4);
  const std::vector<float> row = {2.0f, 1.0f, 0.0f, 0.0f};
  const RowScore s = ScoreDreamRow(row, c, {}, &scratch);
  EXPECT_EQ(s.token, 0);
  EXPECT_NEAR(s.confidence, Softmax({2.0f, 1.0f})[0], kTol);
}

TEST(RemaskingTest, DreamTemperatureSamplesFromTemperedSoftmax) {
  SamplerConfig c = DreamConfig(Algorithm::kMaskgitPlus);
  c.temperature = 0.5f;
  RowScratch scratch(2);
  const std::vector<float> row = {0.0f, 0.5f * std::log(3.0f)};  // /0.5 -> p = 1/4, 3/4
  int ones = 0;
  const int n = 4000;
  for (int pos = 0; pos < n; ++pos) {
    const RowScore s = ScoreDreamRow(row, c, {11, 1, pos}, &scratch);
    ones += s.token;
    EXPECT_NEAR(s.confidence, s.token == 1 ? 0.75 : 0.25, 1e-6);
  }
  EXPECT_NEAR(ones / static_cast<double>(n), 0.75, 0.03);
}

TEST(RemaskingTest, CfgCombine) {
  std::vector<float> out(2);
  CombineCfg(std::vector<float>{1.0f, 2.0f}, std::vector<float>{0.5f, 3.0f}, 1.0f, out);
  EXPECT_FLOAT_EQ(out[0], 0.5f + 2.0f * 0.5f);
  EXPECT_FLOAT_EQ(out[1], 3.0f + 2.0f * -1.0f);
}

TEST(RngTest, KeyedDrawsAreDeterministicAndDistinct) {
  EXPECT_EQ(RngUniform(1, RngStream::kToken, 2, 3), RngUniform(1, RngStream::kToken, 2, 3));
  EXPECT_NE(RngUniform(1, RngStream::kToken, 2, 3), RngUniform(1, RngStream::kToken, 3, 2));
  EXPECT_NE(RngUniform(1, RngStream::kToken, 2, 3), RngUniform(2, RngStream::kToken, 2, 3));
  EXPECT_NE(RngUniform(1, RngStream::kToken, 2, 3), RngUniform(1, RngStream::kTransfer, 2, 3));
  double sum = 0;
  for (int i = 0; i < 10000; ++i) {
    const double u = RngUniform(5, RngStream::kToken, 0, i);
    ASSERT_GT(u, 0.0);
    ASSERT_LT(u, 1.0);
    sum += u;
  }
  EXPECT_NEAR(sum / 10000, 0.5, 0.01);
}

}  // namespace
}  // namespace dllm
