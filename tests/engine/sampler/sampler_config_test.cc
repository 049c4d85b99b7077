// Tests for engine/sampler/sampler_config: every bad setting is rejected
// with the field named, before any work.
#include "engine/sampler/sampler_config.h"

#include <gtest/gtest.h>

#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::StatusIs;

SamplerConfig Llada() {
  SamplerConfig c;
  c.family = SamplerFamily::kLlada;
  c.gen_length = 64;
  c.steps = 32;
  c.block_length = 8;
  return c;
}

SamplerConfig Dream() {
  SamplerConfig c;
  c.family = SamplerFamily::kDream;
  c.shift_logits = true;
  c.algorithm = Algorithm::kEntropy;
  c.gen_length = 64;
  c.steps = 32;
  return c;
}

TEST(SamplerConfigTest, AcceptsOfficialSettings) {
  EXPECT_THAT(Llada().Validate(), IsOk());
  EXPECT_THAT(Dream().Validate(), IsOk());
  SamplerConfig d = Dream();
  d.temperature = 0.2f;
  d.top_p = 0.95f;
  d.alg_temp = 0.1f;
  EXPECT_THAT(d.Validate(), IsOk());
  SamplerConfig l = Llada();
  l.threshold = 0.9f;
  l.cfg_scale = 1.5f;
  EXPECT_THAT(l.Validate(), IsOk());
}

TEST(SamplerConfigTest, RejectsStepsAboveGenLength) {
  SamplerConfig c = Llada();
  c.steps = 128;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "steps: 128 exceeds"));
}

TEST(SamplerConfigTest, RejectsBlockNotDividingGenLength) {
  SamplerConfig c = Llada();
  c.block_length = 24;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "block_length: 24 does not divide gen_length 64"));
}

TEST(SamplerConfigTest, RejectsStepsNotDivisibleByBlocks) {
  SamplerConfig c = Llada();  // 8 blocks
  c.steps = 12;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "not divisible by the number of blocks 8"));
}

TEST(SamplerConfigTest, RejectsAlgorithmOfOtherFamily) {
  SamplerConfig c = Llada();
  c.algorithm = Algorithm::kEntropy;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "algorithm: 'entropy' is not a llada algorithm"));
  SamplerConfig d = Dream();
  d.algorithm = Algorithm::kLowConfidence;
  EXPECT_THAT(d.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "algorithm"));
  d.algorithm = static_cast<Algorithm>(42);
  EXPECT_THAT(d.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "unknown algorithm 42"));
}

TEST(SamplerConfigTest, ParsesAlgorithmNames) {
  for (int i = 0; i < static_cast<int>(Algorithm::kSentinel); ++i) {
    const auto a = static_cast<Algorithm>(i);
    auto parsed = ParseAlgorithm(AlgorithmName(a));
    ASSERT_THAT(parsed.status(), IsOk());
    EXPECT_EQ(*parsed, a);
  }
  EXPECT_THAT(ParseAlgorithm("greedy").status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "unknown algorithm 'greedy'"));
}

TEST(SamplerConfigTest, RejectsBadNumbers) {
  SamplerConfig c = Dream();
  c.temperature = -0.1f;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "temperature"));
  c = Dream();
  c.top_p = 0;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "top_p"));
  c = Dream();
  c.top_k = -1;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "top_k"));
  c = Dream();
  c.eps = 0;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "eps"));
  // Blocks opt Dream into Fast-dLLM's block-wise decoding, under LLaDA's rules.
  c = Dream();
  c.block_length = 8;
  EXPECT_THAT(c.Validate(), IsOk());
  c.block_length = 24;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "block_length: 24 does not divide gen_length 64"));
  c.block_length = 1;  // 64 blocks for 32 steps
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument,
                                     "steps: 32 is not divisible by the number of blocks 64"));
  c = Dream();
  c.cfg_scale = 1;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "cfg_scale: LLaDA only"));
  c = Llada();
  c.top_p = 0.9f;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "top_p: Dream only"));
  c = Llada();
  c.gen_length = 0;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "gen_length"));
}

TEST(SamplerConfigTest, RejectsThresholdMisuse) {
  SamplerConfig c = Llada();
  c.threshold = 1.5f;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "threshold: 1.5"));
  c = Dream();
  c.threshold = 0.9f;  // entropy is not a probability
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "threshold"));
  c = Llada();
  c.algorithm = Algorithm::kRandom;
  c.threshold = 0.9f;
  EXPECT_THAT(c.Validate(), StatusIs(absl::StatusCode::kInvalidArgument, "threshold"));
}

TEST(SamplerConfigTest, RejectsCanvasLongerThanContext) {
  SamplerConfig c = Llada();
  EXPECT_THAT(c.ValidateForCanvas(64, 128), IsOk());
  EXPECT_THAT(c.ValidateForCanvas(65, 128),
              StatusIs(absl::StatusCode::kInvalidArgument,
                       "prompt length 65 + gen_length 64 = 129 exceeds the model context 128"));
  EXPECT_THAT(c.ValidateForCanvas(0, 128), StatusIs(absl::StatusCode::kInvalidArgument, "prompt"));
}

}  // namespace
// Issue #40: /infill's default blocks, 8 to 16 long, the largest that
// divides the span and whose count divides the steps.
TEST(InfillBlockLengthTest, TheLargestOfEightToSixteenThatFits) {
  EXPECT_EQ(InfillBlockLength(128, 128), 16);
  EXPECT_EQ(InfillBlockLength(128, 64), 16);  // 8 blocks divide 64 steps
  EXPECT_EQ(InfillBlockLength(128, 4), 0);    // no count of 8-16 blocks divides 4 steps
  EXPECT_EQ(InfillBlockLength(96, 96), 16);
  EXPECT_EQ(InfillBlockLength(24, 24), 12);
  EXPECT_EQ(InfillBlockLength(24, 3), 8);  // 3 blocks of 8
  EXPECT_EQ(InfillBlockLength(12, 6), 12);
  EXPECT_EQ(InfillBlockLength(9, 9), 9);
  EXPECT_EQ(InfillBlockLength(31, 31), 0);  // a prime: the family's default
  EXPECT_EQ(InfillBlockLength(5, 5), 0);
  // What it gives always validates.
  for (int span = 1; span <= 256; ++span) {
    for (int steps : {span, std::max(1, span / 2), 1}) {
      SamplerConfig c = DefaultSamplerConfig(Arch::kDream, span);
      c.steps = steps;
      c.block_length = InfillBlockLength(span, steps);
      EXPECT_TRUE(c.Validate().ok()) << span << " " << steps << ": " << c.Validate();
    }
  }
}

}  // namespace dllm
