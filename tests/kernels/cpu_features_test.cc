#include "kernels/cpu_features.h"

#include "gtest/gtest.h"

namespace dllm {
namespace {

TEST(CpuFeaturesTest, ScalarIsAlwaysSupportedAndLevelsAreOrdered) {
  const std::vector<IsaLevel> levels = SupportedIsaLevels();
  ASSERT_FALSE(levels.empty());
  EXPECT_EQ(levels.front(), IsaLevel::kScalar);
  for (size_t k = 1; k < levels.size(); ++k) EXPECT_LT(levels[k - 1], levels[k]);
  EXPECT_EQ(BestIsaLevel(), levels.back());
}

TEST(CpuFeaturesTest, AmxNeedsTheKernelsPermission) {
  const CpuFeatures& f = GetCpuFeatures();
  if (IsaLevelSupported(IsaLevel::kAmx)) {
    EXPECT_TRUE(f.amx_permitted);
  }
  if (f.amx_tile && !f.amx_permitted) {
    EXPECT_FALSE(f.amx_denied_reason.empty());
  }
}

TEST(CpuFeaturesTest, NamesRoundTrip) {
  for (IsaLevel l : {IsaLevel::kScalar, IsaLevel::kAvx2, IsaLevel::kAvx512Vnni, IsaLevel::kAmx}) {
    EXPECT_EQ(ParseIsaLevel(IsaLevelName(l)), l);
  }
  EXPECT_EQ(ParseIsaLevel("avx512"), IsaLevel::kAvx512Vnni);
  EXPECT_FALSE(ParseIsaLevel("sse2").has_value());
}

}  // namespace
}  // namespace dllm
