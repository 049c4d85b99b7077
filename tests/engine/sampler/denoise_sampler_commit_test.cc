// Tests for DenoiseSampler's client-driven operations: Commit (how the
// schedule copes with masks the client filled), ApplyStep and Restart
// (replaying a history reproduces every state).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <vector>

#include "engine/sampler/denoise_sampler.h"
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

std::vector<int32_t> Vec(std::span<const int32_t> s) { return {s.begin(), s.end()}; }

// Logits where row r prefers token (r % 5) with a peak growing with r, so
// later rows are more confident and steps commit distinguishable tokens.
std::vector<float> Logits(std::span<const int32_t> rows) {
  std::vector<float> out(rows.size() * kVocab, 0.0f);
  for (size_t i = 0; i < rows.size(); ++i) out[i * kVocab + rows[i] % 5] = 1.0f + 0.1f * rows[i];
  return out;
}

TEST(DenoiseSamplerCommitTest, CommitBeforeABlockStartsReschedulesIt) {
  auto s = DenoiseSampler::Create(Llada(8, 4, 4), Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  s->Commit(std::vector<int32_t>{3, 4, 5}, std::vector<int32_t>{1, 1, 1});
  EXPECT_EQ(s->step(), 0);
  EXPECT_EQ(Vec(s->rows()), (std::vector<int32_t>{6}));  // 1 mask over 2 steps: 1, 0
  StepCommits c = s->Step(Logits(s->rows()));
  EXPECT_EQ(Vec(c.positions), (std::vector<int32_t>{6}));
  // The block has no masks left: its second step is skipped.
  EXPECT_EQ(s->block(), 1);
  EXPECT_EQ(Vec(s->rows()), (std::vector<int32_t>{7, 8, 9, 10}));
}

TEST(DenoiseSamplerCommitTest, CommitMidBlockNeverCommitsMoreThanRemain) {
  auto s = DenoiseSampler::Create(Llada(8, 4, 4), Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  StepCommits c = s->Step(Logits(s->rows()));  // 2 of block 0: rows 5, 6 are the surest
  EXPECT_EQ(Vec(c.positions), (std::vector<int32_t>{5, 6}));
  s->Commit(std::vector<int32_t>{3}, std::vector<int32_t>{4});
  EXPECT_EQ(Vec(s->rows()), (std::vector<int32_t>{4}));  // scheduled 2, 1 left
  c = s->Step(Logits(s->rows()));
  EXPECT_EQ(Vec(c.positions), (std::vector<int32_t>{4}));
  EXPECT_EQ(s->block(), 1);
  // Emptying the current block by commits alone moves on too.
  s->Commit(std::vector<int32_t>{7, 8, 9, 10}, std::vector<int32_t>{1, 2, 3, 4});
  EXPECT_TRUE(s->done());
}

TEST(DenoiseSamplerCommitTest, CommitIntoALaterBlockShrinksItsSchedule) {
  auto s = DenoiseSampler::Create(Llada(8, 4, 4), Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  s->Commit(std::vector<int32_t>{7, 8, 9}, std::vector<int32_t>{1, 2, 3});
  EXPECT_EQ(Vec(s->rows()), (std::vector<int32_t>{3, 4, 5, 6}));  // block 0 unchanged
  s->Step(Logits(s->rows()));
  s->Step(Logits(s->rows()));
  EXPECT_EQ(s->block(), 1);
  EXPECT_EQ(Vec(s->rows()), (std::vector<int32_t>{10}));
  s->Step(Logits(s->rows()));
  EXPECT_TRUE(s->done());
  EXPECT_EQ(s->step(), 3);
}

TEST(DenoiseSamplerCommitTest, DreamCountsFollowTheMasksLeft) {
  SamplerConfig c;
  c.family = SamplerFamily::kDream;
  c.shift_logits = true;
  c.algorithm = Algorithm::kMaskgitPlus;
  c.gen_length = 4;
  c.steps = 2;
  auto s = DenoiseSampler::Create(c, Special(), kPrompt, kVocab, 64);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_EQ(s->rows().size(), 4u);  // 4 masks: step 0 commits 1 (rows 2..5)
  s->Commit(std::vector<int32_t>{3, 4}, std::vector<int32_t>{1, 2});
  EXPECT_TRUE(s->rows().empty());  // trunc(2 x 0.4995) = 0
  s->Step({});
  EXPECT_EQ(Vec(s->rows()), (std::vector<int32_t>{4, 5}));  // the last step: all
  s->Step(Logits(s->rows()));
  EXPECT_TRUE(s->done());
}

TEST(DenoiseSamplerCommitTest, RestartAndReplayReproduceEveryState) {
  for (bool threshold : {false, true}) {
    SamplerConfig c = Llada(12, 6, 4);
    if (threshold) c.threshold = 0.2f;
    c.temperature = 0.8f;
    c.seed = 9;
    auto s = DenoiseSampler::Create(c, Special(), kPrompt, kVocab, 64);
    ASSERT_THAT(s.status(), IsOk());
    struct Entry {
      bool scheduled;
      std::vector<int32_t> positions, tokens, canvas_after, rows_after;
      int step_after, block_after;
    };
    std::vector<Entry> history;
    int i = 0;
    while (!s->done()) {
      Entry e;
      e.scheduled = i++ % 3 != 1;
      if (e.scheduled) {
        StepCommits commits = s->Step(Logits(s->rows()));
        e.positions = Vec(commits.positions);
        e.tokens = Vec(commits.tokens);
      } else {
        for (int p = s->prompt_len() + 11; p >= s->prompt_len(); --p) {
          if (s->canvas()[p] == kMask) {
            e.positions = {p};
            e.tokens = {6};
            break;
          }
        }
        s->Commit(e.positions, e.tokens);
      }
      e.canvas_after = Vec(s->canvas());
      e.rows_after = Vec(s->rows());
      e.step_after = s->step();
      e.block_after = s->block();
      history.push_back(e);
    }
    s->Restart();
    EXPECT_EQ(s->step(), 0);
    for (const Entry& e : history) {
      if (e.scheduled) {
        s->ApplyStep(e.positions, e.tokens);
      } else {
        s->Commit(e.positions, e.tokens);
      }
      EXPECT_EQ(Vec(s->canvas()), e.canvas_after);
      EXPECT_EQ(Vec(s->rows()), e.rows_after);
      EXPECT_EQ(s->step(), e.step_after);
      EXPECT_EQ(s->block(), e.block_after);
    }
    EXPECT_TRUE(s->done());
  }
}

// Infill: the suffix after the span is the same thing as a client's Commit
// of those tokens before the first step, over a canvas that generates them
// too; the sampler then fills only the span.
TEST(DenoiseSamplerCommitTest, ASuffixIsACommitBeforeTheFirstStep) {
  const std::vector<int32_t> suffix = {5, 6, 4};
  for (SamplerConfig span_config : {Dream(6, 4), Llada(6, 3, 6)}) {
    span_config.threshold.reset();
    SamplerConfig whole_config = span_config;
    whole_config.gen_length = 6 + static_cast<int>(suffix.size());
    if (whole_config.family == SamplerFamily::kLlada) whole_config.block_length = 0;
    auto infill = DenoiseSampler::Create(span_config, Special(), kPrompt, kVocab, 64, suffix);
    auto committed = DenoiseSampler::Create(whole_config, Special(), kPrompt, kVocab, 64);
    ASSERT_THAT(infill.status(), IsOk());
    ASSERT_THAT(committed.status(), IsOk());
    committed->Commit(std::vector<int32_t>{9, 10, 11}, suffix);
    EXPECT_EQ(infill->gen_end(), 9);
    EXPECT_EQ(infill->suffix_len(), 3);
    EXPECT_EQ(Vec(infill->canvas()), Vec(committed->canvas()));
    while (!infill->done()) {
      ASSERT_FALSE(committed->done());
      ASSERT_EQ(Vec(infill->rows()), Vec(committed->rows()));
      for (int32_t row : infill->rows()) EXPECT_LT(row, infill->gen_end());
      infill->Step(Logits(infill->rows()));
      committed->Step(Logits(committed->rows()));
      EXPECT_EQ(Vec(infill->canvas()), Vec(committed->canvas()));
    }
    EXPECT_TRUE(committed->done());
    EXPECT_EQ(Vec(infill->canvas().subspan(9)), suffix);
    EXPECT_EQ(infill->generated().size(), 6u);
    // Restart keeps the suffix: it is part of the initial canvas.
    infill->Restart();
    EXPECT_EQ(Vec(infill->canvas().subspan(9)), suffix);
    EXPECT_EQ(std::count(infill->canvas().begin(), infill->canvas().end(), kMask), 6);
  }
}

TEST(DenoiseSamplerCommitTest, ASuffixEndsNoRunAndIsNoOutput) {
  // An end-of-text in the suffix neither exits early nor is output: only
  // the span is the answer.
  SamplerConfig c = Dream(4, 4);
  const std::vector<int32_t> suffix = {kEos, 2};
  auto s = DenoiseSampler::Create(c, Special(), kPrompt, kVocab, 64, suffix);
  ASSERT_THAT(s.status(), IsOk());
  EXPECT_FALSE(s->done());
  while (!s->done()) s->Step(Logits(s->rows()));
  EXPECT_FALSE(s->exited_early());
  const std::span<const int32_t> span = s->canvas().first(static_cast<size_t>(s->gen_end()));
  EXPECT_EQ(OutputTokens(span, s->prompt_len(), s->stop_ids()).size(), 4u);
  // CFG's unconditional canvas masks the suffix with the prompt.
  SamplerConfig cfg = Llada(4, 4, 4);
  cfg.cfg_scale = 1.0f;
  auto guided = DenoiseSampler::Create(cfg, Special(), kPrompt, kVocab, 64, suffix);
  ASSERT_THAT(guided.status(), IsOk());
  for (int32_t t : guided->unconditional_canvas()) EXPECT_EQ(t, kMask);
  // The context holds prompt, span and suffix.
  EXPECT_THAT(DenoiseSampler::Create(c, Special(), kPrompt, kVocab, 8, suffix).status(),
              ::dllm::testing::StatusIs(absl::StatusCode::kInvalidArgument, "suffix length 2"));
}

}  // namespace
}  // namespace dllm
