// Tests for engine/sampler/candidates: the top-k against a full sort of the
// softmax, tie order, short rows, NaN and degenerate rows.
#include "engine/sampler/candidates.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

namespace dllm {
namespace {

// Reference: softmax in double, stable sort by (prob desc, id asc).
std::vector<TokenProb> Reference(const std::vector<float>& row, int k) {
  double m = -std::numeric_limits<double>::infinity();
  for (float x : row) m = std::max(m, double(x));
  double z = 0;
  for (float x : row) z += std::exp(double(x) - m);
  std::vector<int32_t> ids(row.size());
  std::iota(ids.begin(), ids.end(), 0);
  std::stable_sort(ids.begin(), ids.end(), [&](int32_t a, int32_t b) { return row[a] > row[b]; });
  std::vector<TokenProb> out;
  for (int i = 0; i < std::min<int>(k, row.size()); ++i) {
    out.push_back({ids[i], static_cast<float>(std::exp(double(row[ids[i]]) - m) / z)});
  }
  return out;
}

TEST(CandidatesTest, MatchesFullSortOfSoftmax) {
  std::mt19937 rng(7);
  std::normal_distribution<float> gauss(0.0f, 3.0f);
  for (int n_vocab : {1, 5, 8, 9, 1000, 126464}) {
    std::vector<float> row(n_vocab);
    for (float& x : row) x = gauss(rng);
    for (int k = 0; k <= kMaxCandidates; ++k) {
      SCOPED_TRACE(::testing::Message() << "n_vocab " << n_vocab << " k " << k);
      TokenProb out[kMaxCandidates];
      const int n = TopCandidates(row, k, out);
      const std::vector<TokenProb> want = Reference(row, k);
      ASSERT_EQ(n, static_cast<int>(want.size()));
      for (int i = 0; i < n; ++i) {
        EXPECT_EQ(out[i].token, want[i].token) << i;
        EXPECT_NEAR(out[i].prob, want[i].prob, 1e-6 * want[i].prob + 1e-12) << i;
      }
    }
  }
}

TEST(CandidatesTest, TiesKeepLowestIdFirst) {
  const std::vector<float> row = {1, 3, 2, 3, 3, 0, 3};
  TokenProb out[kMaxCandidates];
  ASSERT_EQ(TopCandidates(row, 3, out), 3);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_EQ(out[1].token, 3);
  EXPECT_EQ(out[2].token, 4);
  EXPECT_EQ(out[0].prob, out[2].prob);
  ASSERT_EQ(TopCandidates(row, 5, out), 5);
  EXPECT_EQ(out[3].token, 6);
  EXPECT_EQ(out[4].token, 2);
}

TEST(CandidatesTest, ProbabilitiesAreTheSoftmaxAtTemperatureOne) {
  const std::vector<float> row = {0.0f, std::log(3.0f)};  // softmax = 1/4, 3/4
  TokenProb out[kMaxCandidates];
  ASSERT_EQ(TopCandidates(row, 8, out), 2);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_NEAR(out[0].prob, 0.75f, 1e-6);
  EXPECT_NEAR(out[1].prob, 0.25f, 1e-6);
}

TEST(CandidatesTest, NanIsNeverACandidateAndInfinitiesAreSafe) {
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  TokenProb out[kMaxCandidates];
  const std::vector<float> with_nan = {nan, 1.0f, nan, 2.0f};
  ASSERT_EQ(TopCandidates(with_nan, 4, out), 2);
  EXPECT_EQ(out[0].token, 3);
  EXPECT_EQ(out[1].token, 1);

  const std::vector<float> masked = {-inf, 0.0f, -inf};  // filtered-out tokens
  ASSERT_EQ(TopCandidates(masked, 2, out), 2);
  EXPECT_EQ(out[0].token, 1);
  EXPECT_FLOAT_EQ(out[0].prob, 1.0f);
  EXPECT_EQ(out[1].prob, 0.0f);

  const std::vector<float> all_inf = {-inf, -inf};
  ASSERT_EQ(TopCandidates(all_inf, 1, out), 1);
  EXPECT_EQ(out[0].prob, 0.0f);
}

}  // namespace
}  // namespace dllm
