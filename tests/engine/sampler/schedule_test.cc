// Tests for engine/sampler/schedule: LLaDA's integer split and Dream's
// float32 timestep schedule, against the counts the official code produced
// (reference/official/README.md "Observed", samplers.md 4.4).
#include "engine/sampler/schedule.h"

#include <gtest/gtest.h>

#include <numeric>
#include <vector>

namespace dllm {
namespace {

// first, `middle` x (middle_count), last.
std::vector<int> Pattern(std::vector<int> head, int middle, int middle_count,
                         std::vector<int> tail) {
  std::vector<int> out = head;
  out.insert(out.end(), middle_count, middle);
  out.insert(out.end(), tail.begin(), tail.end());
  return out;
}

TEST(ScheduleTest, LladaSplitsRemainderToEarliestSteps) {
  EXPECT_EQ(LladaBlockSchedule(32, 32), std::vector<int>(32, 1));
  EXPECT_EQ(LladaBlockSchedule(32, 8), std::vector<int>(8, 4));
  EXPECT_EQ(LladaBlockSchedule(32, 10), (std::vector<int>{4, 4, 3, 3, 3, 3, 3, 3, 3, 3}));
  EXPECT_EQ(LladaBlockSchedule(3, 5), (std::vector<int>{1, 1, 1, 0, 0}));
  EXPECT_EQ(LladaBlockSchedule(0, 2), (std::vector<int>{0, 0}));
}

TEST(ScheduleTest, DreamTimestepsEndpoints) {
  const std::vector<float> t = DreamTimesteps(16, 1e-3f);
  ASSERT_EQ(t.size(), 17u);
  EXPECT_EQ(t.front(), 1.0f);
  EXPECT_EQ(t.back(), 1e-3f);
  for (size_t i = 1; i < t.size(); ++i) EXPECT_LT(t[i], t[i - 1]);
}

TEST(ScheduleTest, DreamMatchesObservedOfficialCounts) {
  EXPECT_EQ(DreamSchedule(32, 32, 1e-3f), Pattern({0}, 1, 30, {2}));
  EXPECT_EQ(DreamSchedule(32, 16, 1e-3f), Pattern({1}, 2, 14, {3}));
  EXPECT_EQ(DreamSchedule(64, 32, 1e-3f), Pattern({1}, 2, 30, {3}));
  EXPECT_EQ(DreamSchedule(64, 16, 1e-3f), Pattern({3}, 4, 14, {5}));
}

TEST(ScheduleTest, DreamMatchesSamplersMdTable) {
  for (int n : {128, 256, 512, 768})
    EXPECT_EQ(DreamSchedule(n, n, 1e-3f), Pattern({0}, 1, n - 2, {2}));
  EXPECT_EQ(DreamSchedule(1024, 1024, 1e-3f), Pattern({0, 0}, 1, 1021, {3}));
  EXPECT_EQ(DreamSchedule(256, 128, 1e-3f), Pattern({1}, 2, 126, {3}));
  EXPECT_EQ(DreamSchedule(512, 256, 1e-3f), Pattern({1}, 2, 254, {3}));
  EXPECT_EQ(DreamSchedule(256, 64, 1e-3f), Pattern({3}, 4, 62, {5}));
  EXPECT_EQ(DreamSchedule(256, 32, 1e-3f), Pattern({7}, 8, 30, {9}));
  EXPECT_EQ(DreamSchedule(512, 64, 1e-3f), Pattern({7}, 8, 62, {9}));
  EXPECT_EQ(DreamSchedule(256, 8, 1e-3f), Pattern({31}, 32, 6, {33}));
}

TEST(ScheduleTest, DreamScheduleAlwaysSumsToMasks) {
  for (int n : {1, 7, 33, 100}) {
    for (int s = 1; s <= n; s += 3) {
      const std::vector<int> counts = DreamSchedule(n, s, 1e-3f);
      EXPECT_EQ(std::accumulate(counts.begin(), counts.end(), 0), n) << n << "/" << s;
    }
  }
}

TEST(ScheduleTest, DreamLastStepFractionIsOne) {
  const std::vector<float> t = DreamTimesteps(4, 1e-3f);
  EXPECT_EQ(DreamTransferFraction(t, 3), 1.0f);
  EXPECT_GT(DreamTransferFraction(t, 0), 0.0f);
  EXPECT_LT(DreamTransferFraction(t, 0), 0.25f);  // eps makes it a bit under 1/4
}

}  // namespace
}  // namespace dllm
