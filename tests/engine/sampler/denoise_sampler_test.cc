// Tests for engine/sampler/denoise_sampler, driven through DenoiseSession: rows asked
// for (block eligibility, Dream shift), ranking and ties, threshold mode,
// CFG, keyed determinism, and early exit's output identity.
#include "engine/sampler/denoise_sampler.h"

#include <gtest/gtest.h>

#include <map>
#include <vector>

#include "engine/sampler/schedule.h"
#include "tests/testing/session_trace.h"
#include "tests/testing/test_paths.h"
#include "tests/testing/toy_sampler.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::toy::Dream;
using ::dllm::testing::toy::kEos;
using ::dllm::testing::toy::kMask;
using ::dllm::testing::toy::kPrompt;
using ::dllm::testing::toy::kVocab;
using ::dllm::testing::toy::Llada;
using ::dllm::testing::toy::Special;

// Per served position: the token it predicts and how sure it is (peak logit).
struct Wish {
  int32_t token;
  float peak;
};

// Rows with one peaked token; served position = row (LLaDA) or row + 1 (Dream).
LogitsFn WishLogits(std::map<int, Wish> wishes, bool shifted) {
  return [wishes, shifted](std::span<const int32_t>, std::span<const int32_t> rows,
                           std::span<float> out) {
    for (size_t i = 0; i < rows.size(); ++i) {
      const int served = rows[i] + (shifted ? 1 : 0);
      const auto it = wishes.find(served);
      const Wish w = it == wishes.end() ? Wish{0, 0.5f} : it->second;
      for (int v = 0; v < kVocab; ++v) out[i * kVocab + v] = v == w.token ? w.peak : 0.0f;
    }
    return absl::OkStatus();
  };
}

TEST(DenoiseSamplerTest, LladaAsksForMaskedRowsOfTheCurrentBlockOnly) {
  auto s = DenoiseSampler::Create(Llada(8, 4, 4), Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(std::vector<int32_t>(s->rows().begin(), s->rows().end()),
            (std::vector<int32_t>{3, 4, 5, 6}));
  std::vector<float> logits(4 * kVocab, 0.0f);
  logits[2 * kVocab + 5] = 9.0f;  // row 5 is the most confident
  logits[0 * kVocab + 4] = 3.0f;
  StepCommits c = s->Step(logits);
  EXPECT_EQ(std::vector<int32_t>(c.positions.begin(), c.positions.end()),
            (std::vector<int32_t>{3, 5}));  // 2 per step; rows 3 and 5 rank first
  EXPECT_EQ(std::vector<int32_t>(c.tokens.begin(), c.tokens.end()), (std::vector<int32_t>{4, 5}));
  EXPECT_EQ(std::vector<int32_t>(s->rows().begin(), s->rows().end()), (std::vector<int32_t>{4, 6}));
  logits.assign(2 * kVocab, 0.0f);
  s->Step(logits);
  EXPECT_EQ(s->block(), 1);
  EXPECT_EQ(std::vector<int32_t>(s->rows().begin(), s->rows().end()),
            (std::vector<int32_t>{7, 8, 9, 10}));
}

TEST(DenoiseSamplerTest, TiesGoToLowestPosition) {
  auto s = DenoiseSampler::Create(Llada(6, 3, 6), Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  std::vector<float> logits(6 * kVocab, 0.0f);  // all rows identical
  StepCommits c = s->Step(logits);
  EXPECT_EQ(std::vector<int32_t>(c.positions.begin(), c.positions.end()),
            (std::vector<int32_t>{3, 4}));
}

TEST(DenoiseSamplerTest, DreamAsksForShiftedRows) {
  auto s = DenoiseSampler::Create(Dream(4, 2), Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  // Masked positions 3..6 read rows 2..5.
  EXPECT_EQ(std::vector<int32_t>(s->rows().begin(), s->rows().end()),
            (std::vector<int32_t>{2, 3, 4, 5}));
  std::vector<float> logits(4 * kVocab, 0.0f);
  logits[3 * kVocab + 6] = 9.0f;    // row 5 -> position 6
  StepCommits c = s->Step(logits);  // Dream 4/2: commits 1 then 3
  ASSERT_EQ(c.positions.size(), 1u);
  EXPECT_EQ(c.positions[0], 6);
  EXPECT_EQ(c.tokens[0], 6);
  EXPECT_EQ(std::vector<int32_t>(s->rows().begin(), s->rows().end()),
            (std::vector<int32_t>{2, 3, 4}));
}

TEST(DenoiseSamplerTest, DreamPositionZeroReadsRowZero) {
  // A fully masked canvas (prompt of one mask token) is legal for Dream:
  // positions 0 and 1 both read row 0, asked for once.
  auto s = DenoiseSampler::Create(Dream(2, 1), Special(), std::vector<int32_t>{kMask}, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(std::vector<int32_t>(s->rows().begin(), s->rows().end()), (std::vector<int32_t>{0, 1}));
  std::vector<float> logits(2 * kVocab, 0.0f);
  logits[0 * kVocab + 3] = 5.0f;
  logits[1 * kVocab + 4] = 5.0f;
  StepCommits c = s->Step(logits);
  EXPECT_EQ(std::vector<int32_t>(c.tokens.begin(), c.tokens.end()),
            (std::vector<int32_t>{3, 3, 4}));
  EXPECT_TRUE(s->done());
}

// Fast-dLLM's block-wise Dream (block_length < gen_length): blocks in
// order, each running Dream's own schedule over steps / blocks steps; only
// the current block's masks are candidates, and their rows are the shifted
// ones. block_length = gen_length is the official one-block run.
TEST(DenoiseSamplerTest, DreamBlocksRunTheScheduleWithinEachBlock) {
  SamplerConfig c = Dream(16, 8, Algorithm::kEntropy);
  c.block_length = 8;
  auto s = DenoiseSampler::Create(c, Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  const std::vector<int> per_block = DreamSchedule(8, 4, c.eps);
  std::vector<int> counts;
  for (int step = 0; !s->done(); ++step) {
    const int block = step / 4;
    EXPECT_EQ(s->block(), block) << step;
    const int lo = 3 + 8 * block;  // canvas positions of the block
    std::vector<float> logits(s->rows().size() * kVocab, 0.0f);
    for (int32_t row : s->rows()) {
      EXPECT_GE(row + 1, lo) << step;
      EXPECT_LT(row + 1, lo + 8) << step;
    }
    StepCommits commits = s->Step(logits);
    for (int32_t p : commits.positions) {
      EXPECT_GE(p, lo) << step;
      EXPECT_LT(p, lo + 8) << step;
    }
    counts.push_back(static_cast<int>(commits.positions.size()));
  }
  std::vector<int> want = per_block;
  want.insert(want.end(), per_block.begin(), per_block.end());
  EXPECT_EQ(counts, want);

  // One block of the whole length: the official run, step for step.
  for (int block_length : {0, 16}) {
    SamplerConfig one = Dream(16, 8, Algorithm::kEntropy);
    one.block_length = block_length;
    auto trace =
        ::dllm::testing::RunSessionToEnd(one, Special(), kPrompt, kVocab, 64, WishLogits({}, true));
    ASSERT_THAT(trace.status(), IsOk());
    std::vector<int> one_counts;
    for (const auto& step : trace->steps)
      one_counts.push_back(static_cast<int>(step.positions.size()));
    EXPECT_EQ(one_counts, DreamSchedule(16, 8, one.eps)) << block_length;
  }
}

TEST(DenoiseSamplerTest, DreamZeroCountStepNeedsNoForward) {
  // 32/32: the first step commits nothing (samplers.md 4.4).
  auto s = DenoiseSampler::Create(Dream(32, 32), Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_TRUE(s->rows().empty());
  StepCommits c = s->Step({});
  EXPECT_TRUE(c.positions.empty());
  EXPECT_EQ(s->rows().size(), 32u);
}

TEST(DenoiseSamplerTest, ThresholdCommitsBestPlusConfidentOnes) {
  SamplerConfig cfg = Llada(4, 4, 4);
  cfg.threshold = 0.9f;
  // Position 3: very sure; 4: sure; 5, 6: unsure.
  auto trace = ::dllm::testing::RunSessionToEnd(
      cfg, Special(), kPrompt, kVocab, 64, WishLogits({{3, {2, 12.0f}}, {4, {3, 10.0f}}}, false));
  ASSERT_THAT(trace.status(), IsOk());
  ASSERT_GE(trace->steps.size(), 2u);
  EXPECT_EQ(trace->steps[0].positions, (std::vector<int32_t>{3, 4}));
  // Then one at a time (best only) for the unsure ones.
  EXPECT_EQ(trace->steps[1].positions.size(), 1u);
  EXPECT_EQ(trace->steps.size(), 3u);
}

TEST(DenoiseSamplerTest, CfgRunsUnconditionalPassWithPromptMasked) {
  SamplerConfig cfg = Llada(2, 2, 2);
  cfg.cfg_scale = 1.0f;
  int calls = 0;
  LogitsFn fn = [&](std::span<const int32_t> canvas, std::span<const int32_t> rows,
                    std::span<float> out) {
    ++calls;
    const bool uncond = canvas[0] == kMask;
    if (uncond) {
      EXPECT_TRUE(canvas[1] == kMask && canvas[2] == kMask);
    }
    for (size_t i = 0; i < rows.size(); ++i) {
      for (int v = 0; v < kVocab; ++v) out[i * kVocab + v] = 0;
      // Conditional prefers token 1 by a little, unconditional token 2 by a lot:
      // u + 2 (c - u) = 2c - u makes token 1 win.
      out[i * kVocab + 1] = uncond ? 0.0f : 1.0f;
      out[i * kVocab + 2] = uncond ? 1.5f : 1.2f;
    }
    return absl::OkStatus();
  };
  auto trace = ::dllm::testing::RunSessionToEnd(cfg, Special(), kPrompt, kVocab, 64, fn);
  ASSERT_THAT(trace.status(), IsOk());
  EXPECT_EQ(calls, 4);
  EXPECT_EQ(trace->n_forward, 4);
  EXPECT_EQ(trace->canvas, (std::vector<int32_t>{1, 2, 3, 1, 1}));
}

TEST(DenoiseSamplerTest, RandomDrawsAreKeyedBySeed) {
  {
    SamplerConfig cfg = Llada(16, 4, 16);
    cfg.algorithm = Algorithm::kRandom;
    cfg.temperature = 0.7f;
    cfg.seed = 42;
    const LogitsFn fn = WishLogits({}, false);
    auto a = ::dllm::testing::RunSessionToEnd(cfg, Special(), kPrompt, kVocab, 64, fn);
    auto b = ::dllm::testing::RunSessionToEnd(cfg, Special(), kPrompt, kVocab, 64, fn);
    cfg.seed = 43;
    auto c = ::dllm::testing::RunSessionToEnd(cfg, Special(), kPrompt, kVocab, 64, fn);
    ASSERT_THAT(a.status(), IsOk());
    EXPECT_EQ(a->canvas, b->canvas);
    EXPECT_NE(a->canvas, c->canvas);
  }
  SamplerConfig d = Dream(16, 4, Algorithm::kOrigin);
  d.seed = 1;
  auto a =
      ::dllm::testing::RunSessionToEnd(d, Special(), kPrompt, kVocab, 64, WishLogits({}, true));
  auto b =
      ::dllm::testing::RunSessionToEnd(d, Special(), kPrompt, kVocab, 64, WishLogits({}, true));
  ASSERT_THAT(a.status(), IsOk());
  EXPECT_EQ(a->steps.size(), 4u);
  for (size_t i = 0; i < a->steps.size(); ++i)
    EXPECT_EQ(a->steps[i].positions, b->steps[i].positions);
  for (int32_t t : a->canvas) EXPECT_NE(t, kMask);  // the last step takes everything
}

TEST(DenoiseSamplerTest, DreamAlgTempDrawsDistinctPositions) {
  SamplerConfig d = Dream(16, 4, Algorithm::kEntropy);
  d.alg_temp = 0.5f;
  d.seed = 9;
  auto a =
      ::dllm::testing::RunSessionToEnd(d, Special(), kPrompt, kVocab, 64, WishLogits({}, true));
  ASSERT_THAT(a.status(), IsOk());
  for (int32_t t : a->canvas) EXPECT_NE(t, kMask);
}

TEST(EarlyExitTest, Predicate) {
  const std::vector<int32_t> stop = {kEos};
  auto reached = [&](std::vector<int32_t> gen) {
    std::vector<int32_t> canvas = kPrompt;
    canvas.insert(canvas.end(), gen.begin(), gen.end());
    return EarlyExitReached(canvas, 3, kMask, stop);
  };
  EXPECT_TRUE(reached({4, 5, kEos, kMask}));
  EXPECT_TRUE(reached({kEos, kMask, kMask}));
  EXPECT_FALSE(reached({4, kMask, kEos, 5}));
  EXPECT_FALSE(reached({4, 5, 6}));
  EXPECT_FALSE(reached({kMask, kMask}));
  // A stop token inside the prompt does not count.
  EXPECT_FALSE(EarlyExitReached(std::vector<int32_t>{kEos, 1, kMask}, 2, kMask, stop));
  EXPECT_EQ(OutputTokens(std::vector<int32_t>{1, 2, 4, kEos, 5}, 2, stop).size(), 1u);
}

// Early exit only drops steps after the predicate holds; the output up to
// the first stop token is identical (denoise_sampler.h).
TEST(EarlyExitTest, OutputUpToFirstStopIsIdentical) {
  const std::map<int, Wish> wishes = {
      {3, {4, 9.0f}}, {4, {5, 8.5f}}, {5, {kEos, 8.0f}}, {6, {2, 1.0f}}, {7, {6, 0.9f}}};
  struct Case {
    SamplerConfig cfg;
    bool shifted;
  };
  std::vector<Case> cases = {{Llada(16, 16, 16), false},
                             {Llada(16, 8, 4), false},
                             {Dream(16, 16), true},
                             {Dream(16, 8, Algorithm::kEntropy), true}};
  SamplerConfig thr = Llada(16, 16, 8);
  thr.threshold = 0.5f;
  cases.push_back({thr, false});
  for (Case& c : cases) {
    auto full = ::dllm::testing::RunSessionToEnd(c.cfg, Special(), kPrompt, kVocab, 64,
                                                 WishLogits(wishes, c.shifted));
    c.cfg.early_exit = true;
    auto early = ::dllm::testing::RunSessionToEnd(c.cfg, Special(), kPrompt, kVocab, 64,
                                                  WishLogits(wishes, c.shifted));
    ASSERT_THAT(full.status(), IsOk());
    ASSERT_THAT(early.status(), IsOk());
    const std::vector<int32_t> stop = {kEos};
    const auto a = OutputTokens(full->canvas, 3, stop);
    const auto b = OutputTokens(early->canvas, 3, stop);
    EXPECT_EQ(std::vector<int32_t>(a.begin(), a.end()), std::vector<int32_t>(b.begin(), b.end()));
    EXPECT_EQ(std::vector<int32_t>(a.begin(), a.end()), (std::vector<int32_t>{4, 5}));
    EXPECT_TRUE(early->early_exited);
    EXPECT_LT(early->n_forward, full->n_forward);
    // The steps that did run are the same steps.
    for (size_t i = 0; i < early->steps.size(); ++i) {
      EXPECT_EQ(early->steps[i].positions, full->steps[i].positions);
      EXPECT_EQ(early->steps[i].tokens, full->steps[i].tokens);
    }
  }
}

}  // namespace
}  // namespace dllm
