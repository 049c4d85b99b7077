// DiffusionGemma generations end to end on the tiny reference file
// (tests/data/logits-dg): the exact prompt cache gives the uncached run's
// bits step by step, canvas after canvas; a finished canvas joins the
// prompt and is encoded once; and the response is trimmed as the
// reference CLI trims it.
#include <vector>

#include "engine/model/model.h"
#include "engine/sampler/entropy_bound_denoiser.h"
#include "engine/session/denoise_session.h"
#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

std::shared_ptr<const Model> TinyModel(IsaLevel isa) {
  absl::StatusOr<std::shared_ptr<const Model>> model = Model::Load(
      testing::TestDataDir() + "/logits-dg/tiny-diffusion-gemma-q8_0.gguf", {.isa = isa});
  EXPECT_TRUE(model.ok()) << model.status();
  return model.ok() ? *model : nullptr;
}

struct GenerationRun {
  std::vector<std::vector<float>> logits;  // each step's
  std::vector<int> rows_computed;
  std::vector<int32_t> output, canvas;
  int prompt_len = 0;
  int refreshes = 0;
};

GenerationRun Generate(const std::shared_ptr<const Model>& model, CacheMode cache, int canvases,
                       uint32_t seed) {
  EntropyBoundConfig config;
  config.canvas_length = static_cast<int>(model->config().canvas_length);
  config.max_steps = 6;
  config.seed = seed;
  CanvasRun run;
  run.max_canvases = canvases;
  run.stop_ids = {1};  // EOS only: the loop rule alone would end most random canvases
  CachingOptions caching;
  caching.cache = cache;
  absl::StatusOr<std::unique_ptr<DenoiseSession>> session =
      DenoiseSession::Create(model, config, {2, 92, 104, 125, 127, 8, 110}, run, caching);
  EXPECT_TRUE(session.ok()) << session.status();
  GenerationRun out;
  if (!session.ok()) return out;
  DenoiseSession& s = **session;
  while (!s.done()) {
    absl::StatusOr<StepReport> step = s.Advance();
    EXPECT_TRUE(step.ok()) << step.status();
    if (!step.ok()) break;
    absl::StatusOr<DenoiseSession::StepLogits> logits = s.LastStepLogits();
    EXPECT_TRUE(logits.ok());
    out.logits.emplace_back(logits->logits.begin(), logits->logits.end());
    out.rows_computed.push_back(static_cast<int>(step->rows_computed));
  }
  out.output.assign(s.OutputTokens().begin(), s.OutputTokens().end());
  out.canvas.assign(s.canvas().begin(), s.canvas().end());
  out.prompt_len = s.prompt_len();
  out.refreshes = s.cache_refreshes();
  return out;
}

TEST(DiffusionGemmaSessionTest, ExactCacheGivesTheUncachedBitsCanvasAfterCanvas) {
  for (IsaLevel isa : SupportedIsaLevels()) {
    SCOPED_TRACE(IsaLevelName(isa));
    std::shared_ptr<const Model> model = TinyModel(isa);
    ASSERT_NE(model, nullptr);
    const int C = static_cast<int>(model->config().canvas_length);
    for (uint32_t seed : {1u, 7u, 11u}) {
      const GenerationRun exact = Generate(model, CacheMode::kNone, 3, seed);
      const GenerationRun cached = Generate(model, CacheMode::kExact, 3, seed);
      EXPECT_EQ(cached.logits, exact.logits) << "seed " << seed;
      EXPECT_EQ(cached.output, exact.output);
      EXPECT_EQ(cached.canvas, exact.canvas);
      // One full step; after it only the canvas (and, on a canvas's first
      // step, the canvas just joined to the prompt) is computed.
      EXPECT_EQ(cached.refreshes, 1);
      ASSERT_FALSE(cached.rows_computed.empty());
      EXPECT_EQ(cached.rows_computed[0], 7 + C);
      for (size_t i = 1; i < cached.rows_computed.size(); ++i) {
        EXPECT_TRUE(cached.rows_computed[i] == C || cached.rows_computed[i] == 2 * C)
            << "step " << i << ": " << cached.rows_computed[i];
      }
    }
  }
}

TEST(DiffusionGemmaSessionTest, AWholeCanvasJoinsThePromptAndTheNextStartsAfterIt) {
  std::shared_ptr<const Model> model = TinyModel(IsaLevel::kScalar);
  ASSERT_NE(model, nullptr);
  const int C = static_cast<int>(model->config().canvas_length);
  // Find a seed whose first canvas is kept whole, so a second one runs.
  for (uint32_t seed = 1; seed < 40; ++seed) {
    const GenerationRun one = Generate(model, CacheMode::kExact, 1, seed);
    if (static_cast<int>(one.output.size()) != C) continue;
    const GenerationRun two = Generate(model, CacheMode::kExact, 2, seed);
    // The first canvas is the one-canvas run's, now part of the prompt.
    EXPECT_EQ(two.prompt_len, 7 + C);
    EXPECT_EQ(std::vector<int32_t>(two.canvas.begin() + 7, two.canvas.begin() + 7 + C), one.output);
    EXPECT_EQ(std::vector<int32_t>(two.output.begin(), two.output.begin() + C), one.output);
    // The second canvas's first step computed the joined canvas and the new one.
    EXPECT_EQ(two.rows_computed[one.rows_computed.size()], 2 * C);
    return;
  }
  ADD_FAILURE() << "no seed below 40 keeps a whole first canvas: the test no longer runs a "
                   "second canvas";
}

TEST(TrimCanvasTest, CutsAtTheFirstStopTokenThenAtALoop) {
  const std::vector<int32_t> stop = {1};
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{5, 6, 1, 7}, stop), 2u);
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{5, 6, 7, 8}, stop), 4u);
  // Stride 1: seven equal tokens make six repeats, from index 1.
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{5, 9, 9, 9, 9, 9, 9, 9}, stop), 1u);
  // Five repeats are not a loop.
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{5, 9, 9, 9, 9, 9, 9}, stop), 7u);
  // Stride 2: a b a b ...: six steps of two need 13 tokens; four are no loop.
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{3, 4, 3, 4, 3, 4, 3, 4, 3, 4, 3, 4, 3}, stop), 0u);
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{3, 4, 3, 4, 3, 4, 3, 4, 3}, stop), 9u);
  // The loop's count runs past a stop token, as the reference's does, but
  // the cut is where the loop starts only when that is before the stop.
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{8, 9, 9, 9, 1, 9, 9, 9, 9}, stop), 4u);
  EXPECT_EQ(TrimCanvas(std::vector<int32_t>{}, stop), 0u);
}

}  // namespace
}  // namespace dllm
