// DenoiseSession's client-driven operations on the tiny models: Rewind then
// Advance reproduces the uninterrupted run (greedy and seeded T > 0, LLaDA
// blocks with and without CFG, Dream), Forward changes nothing, commits
// replay, candidates agree with what the sampler commits, and every failed
// operation leaves the session usable.
#include <tbb/task_arena.h>

#include <optional>
#include <sstream>
#include <string>
#include <vector>

#include "engine/session/denoise_session.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::StatusIs;

const std::vector<int32_t> kPrompt = {464, 3139, 286, 4881, 318};

std::shared_ptr<const Model> LoadModel(const char* name) {
  auto model = Model::Load(testing::TestDataDir() + "/models/" + name, {BestIsaLevel()});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

struct Setting {
  const char* model;
  float temperature;
  float cfg_scale = 0;
  std::optional<Algorithm> algorithm = std::nullopt;  // unset: low_confidence / entropy
  std::optional<float> threshold = std::nullopt;
  bool early_exit = false;
  float alg_temp = 0;
};

std::string Name(const Setting& s) {
  std::ostringstream out;
  out << s.model << " T=" << s.temperature << " cfg=" << s.cfg_scale;
  if (s.algorithm) out << " " << AlgorithmName(*s.algorithm);
  if (s.threshold) out << " threshold " << *s.threshold;
  if (s.early_exit) out << " early_exit";
  if (s.alg_temp > 0) out << " alg_temp " << s.alg_temp;
  return out.str();
}

const Setting kSettings[] = {
    {"tiny-llada-k-q4_k_m.gguf", 0.0f},
    {"tiny-llada-k-q4_k_m.gguf", 0.9f},
    {"tiny-llada-k-q4_k_m.gguf", 0.9f, 1.5f},
    {"tiny-dream-k-q4_k_m.gguf", 0.0f},
    {"tiny-dream-k-q4_k_m.gguf", 0.9f},
    {"tiny-llada-k-q4_k_m.gguf", 0.9f, 0, Algorithm::kRandom},
    {"tiny-llada-k-q4_k_m.gguf", 0.5f, 0, std::nullopt, 0.05f, true},
    {"tiny-dream-k-q4_k_m.gguf", 0.9f, 0, Algorithm::kOrigin},
    {"tiny-dream-k-q4_k_m.gguf", 0.5f, 0, Algorithm::kTopkMargin, std::nullopt, false, 0.3f},
};

SamplerConfig Config(const Model& model, const Setting& s) {
  SamplerConfig c;
  c.family = SamplerFamilyOf(model.config().arch);
  const bool llada = c.family == SamplerFamily::kLlada;
  c.algorithm = s.algorithm.value_or(llada ? Algorithm::kLowConfidence : Algorithm::kEntropy);
  c.threshold = s.threshold;
  c.early_exit = s.early_exit;
  c.alg_temp = s.alg_temp;
  c.gen_length = 16;
  c.steps = 8;
  c.block_length = llada ? 8 : 0;
  c.temperature = s.temperature;
  c.top_p = llada ? 1.0f : 0.95f;
  c.cfg_scale = s.cfg_scale;
  c.seed = 77;
  return c;
}

using Canvas = std::vector<int32_t>;
Canvas Snapshot(const DenoiseSession& s) { return Canvas(s.canvas().begin(), s.canvas().end()); }

// Runs to the end; the canvas after every Advance.
std::vector<Canvas> RunToEnd(DenoiseSession& s) {
  std::vector<Canvas> canvases;
  while (!s.done()) {
    auto step = s.Advance();
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) break;
    canvases.push_back(Snapshot(s));
  }
  return canvases;
}

class SessionOpsTest : public ::testing::Test {
 protected:
  // Session work runs in an arena like the server's engine thread.
  tbb::task_arena arena_{2};
};

TEST_F(SessionOpsTest, RewindThenAdvanceReproducesTheRun) {
  for (const Setting& setting : kSettings) {
    SCOPED_TRACE(Name(setting));
    auto model = LoadModel(setting.model);
    ASSERT_NE(model, nullptr);
    const SamplerConfig config = Config(*model, setting);
    arena_.execute([&] {
      auto reference = DenoiseSession::Create(model, config, kPrompt);
      ASSERT_THAT(reference.status(), IsOk());
      const std::vector<Canvas> want = RunToEnd(**reference);
      ASSERT_GE(want.size(), 4u);
      EXPECT_EQ((*reference)->history_size(), static_cast<int>(want.size()));

      auto session = DenoiseSession::Create(model, config, kPrompt);
      ASSERT_THAT(session.status(), IsOk());
      DenoiseSession& s = **session;
      const Canvas initial = Snapshot(s);
      for (int i = 0; i < 5; ++i) ASSERT_THAT(s.Advance().status(), IsOk());
      // Back to 2, forward to 5 again, back to 0, then the whole run.
      ASSERT_THAT(s.Rewind(2), IsOk());
      EXPECT_EQ(Snapshot(s), want[1]);
      EXPECT_EQ(s.history_size(), 2);
      EXPECT_EQ(s.sampler().step(), 2);
      for (int i = 2; i < 5; ++i) {
        ASSERT_THAT(s.Advance().status(), IsOk());
        EXPECT_EQ(Snapshot(s), want[i]) << "step " << i;
      }
      ASSERT_THAT(s.Rewind(0), IsOk());
      EXPECT_EQ(Snapshot(s), initial);
      EXPECT_EQ(s.masked_remaining(), config.gen_length);
      EXPECT_EQ(RunToEnd(s), want);
      // After the end: rewind into the middle and finish again.
      EXPECT_THAT(s.Advance().status(),
                  StatusIs(absl::StatusCode::kFailedPrecondition, "finished"));
      ASSERT_THAT(s.Rewind(3), IsOk());
      EXPECT_FALSE(s.done());
      const std::vector<Canvas> rest = RunToEnd(s);
      EXPECT_EQ(rest, std::vector<Canvas>(want.begin() + 3, want.end()));
    });
  }
}

TEST_F(SessionOpsTest, ForwardChangesNothingAndCommitsReplay) {
  for (const Setting& setting : kSettings) {
    SCOPED_TRACE(Name(setting));
    auto model = LoadModel(setting.model);
    ASSERT_NE(model, nullptr);
    const SamplerConfig config = Config(*model, setting);
    arena_.execute([&] {
      auto reference = DenoiseSession::Create(model, config, kPrompt);
      ASSERT_THAT(reference.status(), IsOk());
      const std::vector<Canvas> want = RunToEnd(**reference);

      auto session = DenoiseSession::Create(model, config, kPrompt);
      ASSERT_THAT(session.status(), IsOk());
      DenoiseSession& s = **session;
      ASSERT_THAT(s.Advance().status(), IsOk());
      const std::vector<int32_t> rows(s.sampler().rows().begin(), s.sampler().rows().end());
      auto forward = s.Forward({}, 3);
      ASSERT_THAT(forward.status(), IsOk());
      EXPECT_EQ(static_cast<int>(forward->candidates.size()), s.masked_remaining());
      EXPECT_EQ(forward->forward_passes, setting.cfg_scale > 0 ? 2 : 1);
      for (const PositionCandidates& pc : forward->candidates) {
        EXPECT_EQ(s.canvas()[s.prompt_len() + pc.position], model->config().tokens.mask);
        ASSERT_EQ(pc.top.size(), 3u);
        EXPECT_GE(pc.top[0].prob, pc.top[1].prob);
        EXPECT_GE(pc.top[1].prob, pc.top[2].prob);
        EXPECT_LE(pc.top[0].prob + pc.top[1].prob + pc.top[2].prob, 1.0f + 1e-5f);
      }
      EXPECT_EQ(s.history_size(), 1);
      EXPECT_EQ(std::vector<int32_t>(s.sampler().rows().begin(), s.sampler().rows().end()), rows);
      // Forward left the schedule alone: the run continues as the reference.
      ASSERT_THAT(s.Advance().status(), IsOk());
      EXPECT_EQ(Snapshot(s), want[1]);

      // Commit the best candidate at the last masked position, then finish;
      // rewinding to before or after the commit and redoing reproduces it.
      auto last = s.Forward({}, 1);
      ASSERT_THAT(last.status(), IsOk());
      ASSERT_FALSE(last->candidates.empty());
      const PositionCandidates& pick = last->candidates.back();
      ASSERT_THAT(
          s.Commit(std::vector<int32_t>{pick.position}, std::vector<int32_t>{pick.top[0].token}),
          IsOk());
      EXPECT_EQ(s.history_size(), 3);
      EXPECT_EQ(s.sampler().step(), 2) << "a commit takes no scheduled step";
      const Canvas after_commit = Snapshot(s);
      const std::vector<Canvas> finish = RunToEnd(s);
      ASSERT_FALSE(finish.empty());
      EXPECT_EQ(s.masked_remaining(), 0);

      ASSERT_THAT(s.Rewind(3), IsOk());
      EXPECT_EQ(Snapshot(s), after_commit);
      EXPECT_EQ(RunToEnd(s), finish);
      ASSERT_THAT(s.Rewind(2), IsOk());
      EXPECT_EQ(Snapshot(s), want[1]);
      ASSERT_THAT(
          s.Commit(std::vector<int32_t>{pick.position}, std::vector<int32_t>{pick.top[0].token}),
          IsOk());
      EXPECT_EQ(RunToEnd(s), finish);
    });
  }
}

TEST_F(SessionOpsTest, StepCandidatesAgreeWithGreedyCommits) {
  for (const Setting& setting : kSettings) {
    if (setting.temperature > 0) continue;
    SCOPED_TRACE(Name(setting));
    auto model = LoadModel(setting.model);
    ASSERT_NE(model, nullptr);
    SamplerConfig config = Config(*model, setting);
    config.top_p = 1.0f;
    arena_.execute([&] {
      auto session = DenoiseSession::Create(model, config, kPrompt);
      ASSERT_THAT(session.status(), IsOk());
      DenoiseSession& s = **session;
      EXPECT_THAT(s.StepCandidates(2).status(),
                  StatusIs(absl::StatusCode::kFailedPrecondition, "advance"));
      int checked = 0;
      while (!s.done()) {
        // What Forward predicts for the positions the next step commits...
        auto forward = s.Forward({}, 2);
        ASSERT_THAT(forward.status(), IsOk());
        auto step = s.Advance();
        ASSERT_THAT(step.status(), IsOk());
        auto candidates = s.StepCandidates(2);
        ASSERT_THAT(candidates.status(), IsOk());
        ASSERT_EQ(candidates->size(), step->positions.size());
        for (size_t i = 0; i < candidates->size(); ++i) {
          const PositionCandidates& pc = (*candidates)[i];
          EXPECT_EQ(pc.position, step->positions[i] - s.prompt_len());
          // ...equals what Advance committed, and the step's own logits agree.
          ASSERT_FALSE(pc.top.empty());
          EXPECT_EQ(pc.top[0].token, step->tokens[i]);
          for (const PositionCandidates& f : forward->candidates) {
            if (f.position != pc.position) continue;
            EXPECT_EQ(f.top[0].token, pc.top[0].token);
            EXPECT_FLOAT_EQ(f.top[0].prob, pc.top[0].prob);
            ++checked;
          }
        }
      }
      EXPECT_GT(checked, 0);
      // The logits are gone once another operation ran.
      ASSERT_THAT(s.Rewind(1), IsOk());
      EXPECT_THAT(s.StepCandidates(2).status(),
                  StatusIs(absl::StatusCode::kFailedPrecondition, "advance"));
    });
  }
}

TEST_F(SessionOpsTest, FailedOperationsLeaveTheSessionUsable) {
  auto model = LoadModel("tiny-llada-k-q4_k_m.gguf");
  ASSERT_NE(model, nullptr);
  const SamplerConfig config = Config(*model, kSettings[1]);
  const int32_t mask = model->config().tokens.mask;
  const int32_t n_vocab = static_cast<int32_t>(model->config().n_vocab);
  arena_.execute([&] {
    auto reference = DenoiseSession::Create(model, config, kPrompt);
    ASSERT_THAT(reference.status(), IsOk());
    const std::vector<Canvas> want = RunToEnd(**reference);

    auto session = DenoiseSession::Create(model, config, kPrompt);
    ASSERT_THAT(session.status(), IsOk());
    DenoiseSession& s = **session;
    ASSERT_THAT(s.Advance().status(), IsOk());
    int committed = -1;  // a position the first step committed
    for (int p = 0; p < config.gen_length; ++p) {
      if (s.canvas()[s.prompt_len() + p] != mask) committed = p;
    }
    ASSERT_GE(committed, 0);
    int masked = -1;
    for (int p = 0; p < config.gen_length; ++p) {
      if (s.canvas()[s.prompt_len() + p] == mask) masked = p;
    }
    using V = std::vector<int32_t>;
    const auto kInvalid = absl::StatusCode::kInvalidArgument;
    const auto kPrecondition = absl::StatusCode::kFailedPrecondition;
    EXPECT_THAT(s.Commit(V{}, V{}), StatusIs(kInvalid, "no tokens"));
    EXPECT_THAT(s.Commit(V{masked}, V{1, 2}), StatusIs(kInvalid, "1 positions but 2 tokens"));
    EXPECT_THAT(s.Commit(V{16}, V{1}), StatusIs(kInvalid, "position 16 is outside"));
    EXPECT_THAT(s.Commit(V{-1}, V{1}), StatusIs(kInvalid, "position -1 is outside"));
    EXPECT_THAT(s.Commit(V{masked, masked}, V{1, 1}), StatusIs(kInvalid, "appears twice"));
    EXPECT_THAT(s.Commit(V{masked}, V{n_vocab}), StatusIs(kInvalid, "outside the vocabulary"));
    EXPECT_THAT(s.Commit(V{masked}, V{-3}), StatusIs(kInvalid, "outside the vocabulary"));
    EXPECT_THAT(s.Commit(V{masked}, V{mask}), StatusIs(kInvalid, "is the mask token"));
    // Nor may a prompt hold one (issue #25 N2: it became a generated position).
    V masked_prompt(kPrompt.begin(), kPrompt.end());
    masked_prompt[1] = mask;
    EXPECT_THAT(DenoiseSession::Create(model, config, masked_prompt).status(),
                StatusIs(kInvalid,
                         "prompt token " + std::to_string(mask) + " at index 1 is the mask token"));
    EXPECT_THAT(
        s.Commit(V{masked, committed}, V{1, 1}),
        StatusIs(kPrecondition, "position " + std::to_string(committed) + " is not masked"));
    EXPECT_THAT(s.Forward({}, 0).status(), StatusIs(kInvalid, "top_candidates"));
    EXPECT_THAT(s.Forward({}, 9).status(), StatusIs(kInvalid, "top_candidates"));
    EXPECT_THAT(s.Forward(V{3, 16}, 2).status(), StatusIs(kInvalid, "position 16 is outside"));
    EXPECT_THAT(s.Forward(V{3, 3}, 2).status(), StatusIs(kInvalid, "asked for twice"));
    EXPECT_THAT(s.Rewind(2), StatusIs(kPrecondition, "beyond the history of 1"));
    EXPECT_THAT(s.Rewind(-1), StatusIs(kInvalid, "negative"));
    EXPECT_THAT(s.StepCandidates(9).status(), StatusIs(kInvalid, "top_candidates"));
    // Nothing changed: the candidates of the first step are still there, and
    // the run goes on as the reference.
    EXPECT_THAT(s.StepCandidates(1).status(), IsOk());
    EXPECT_EQ(s.history_size(), 1);
    EXPECT_EQ(Snapshot(s), want[0]);
    const std::vector<Canvas> rest = RunToEnd(s);
    EXPECT_EQ(rest, std::vector<Canvas>(want.begin() + 1, want.end()));
    EXPECT_THAT(s.Commit(V{0}, V{1}), StatusIs(kPrecondition, "finished"));
    // Forward still answers for explicit positions after the end.
    auto forward = s.Forward(V{0, 5}, 1);
    ASSERT_THAT(forward.status(), IsOk());
    ASSERT_EQ(forward->candidates.size(), 2u);
    EXPECT_EQ(forward->candidates[1].position, 5);
    auto none = s.Forward({}, 1);
    ASSERT_THAT(none.status(), IsOk());
    EXPECT_TRUE(none->candidates.empty());
  });
}

TEST_F(SessionOpsTest, ClientCommitsCanFinishABlockAndTheCanvas) {
  auto model = LoadModel("tiny-llada-k-q4_k_m.gguf");
  ASSERT_NE(model, nullptr);
  const SamplerConfig config = Config(*model, kSettings[0]);  // blocks of 8, 4 steps each
  arena_.execute([&] {
    auto session = DenoiseSession::Create(model, config, kPrompt);
    ASSERT_THAT(session.status(), IsOk());
    DenoiseSession& s = **session;
    ASSERT_THAT(s.Advance().status(), IsOk());  // 2 of block 0
    std::vector<int32_t> positions, tokens;
    for (int p = 0; p < 8; ++p) {
      if (s.canvas()[s.prompt_len() + p] == model->config().tokens.mask) {
        positions.push_back(p);
        tokens.push_back(100 + p);
      }
    }
    ASSERT_EQ(positions.size(), 6u);
    ASSERT_THAT(s.Commit(positions, tokens), IsOk());
    // Block 0 is done: the next step works on block 1 and reads its rows only.
    EXPECT_EQ(s.sampler().block(), 1);
    auto step = s.Advance();
    ASSERT_THAT(step.status(), IsOk());
    ASSERT_EQ(step->positions.size(), 2u);
    EXPECT_GE(step->positions[0], s.prompt_len() + 8);
    positions.clear();
    tokens.clear();
    for (int p = 8; p < 16; ++p) {
      if (s.canvas()[s.prompt_len() + p] == model->config().tokens.mask) {
        positions.push_back(p);
        tokens.push_back(200);
      }
    }
    ASSERT_THAT(s.Commit(positions, tokens), IsOk());
    EXPECT_TRUE(s.done());
    EXPECT_EQ(s.masked_remaining(), 0);
    EXPECT_EQ(s.history_size(), 4);
  });
}

// Infill on a real model: the suffix stays as given through a run, a
// rewind to the start and a replay; the session's positions, masks, output
// and candidates are the span's; committing into the suffix is refused.
TEST(SessionInfillTest, TheSuffixIsFixedAndOutsideTheSpan) {
  for (const char* name : {"tiny-llada-k-q4_k_m.gguf", "tiny-dream-k-q4_k_m.gguf"}) {
    SCOPED_TRACE(name);
    std::shared_ptr<const Model> model = LoadModel(name);
    ASSERT_NE(model, nullptr);
    SamplerConfig c = Config(*model, Setting{name, 0.9f});
    const std::vector<int32_t> suffix = {318, 4881, 286};
    auto session = DenoiseSession::Create(model, c, CanvasInput(kPrompt, suffix));
    ASSERT_THAT(session.status(), IsOk());
    DenoiseSession& s = **session;
    EXPECT_EQ(s.suffix_len(), 3);
    EXPECT_EQ(s.generated().size(), 16u);
    EXPECT_EQ(s.masked_remaining(), 16);
    const auto tail = [&] { return Canvas(s.canvas().end() - 3, s.canvas().end()); };
    // Position 16 would be the suffix's first token: not a span position.
    EXPECT_THAT(s.Commit(std::vector<int32_t>{16}, std::vector<int32_t>{5}),
                StatusIs(absl::StatusCode::kInvalidArgument, "outside the generated region"));
    EXPECT_THAT(s.Forward(std::vector<int32_t>{16}, 3).status(),
                StatusIs(absl::StatusCode::kInvalidArgument, "outside the generated region"));
    const std::vector<Canvas> first = RunToEnd(s);
    ASSERT_FALSE(first.empty());
    EXPECT_EQ(tail(), suffix);
    EXPECT_EQ(s.masked_remaining(), 0);
    EXPECT_LE(s.OutputTokens().size(), 16u);
    ASSERT_THAT(s.Rewind(0), IsOk());
    EXPECT_EQ(tail(), suffix);
    EXPECT_EQ(s.masked_remaining(), 16);
    EXPECT_EQ(RunToEnd(s), first);  // the replay is the same run
  }
}

}  // namespace
}  // namespace dllm
