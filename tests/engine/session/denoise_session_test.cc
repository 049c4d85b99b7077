// DenoiseSession end to end on real forward passes: seeded sampling does not
// depend on the thread count, and early exit never changes the output (the
// generated tokens up to the first stop token) while saving steps.
#include "engine/session/denoise_session.h"

#include <tbb/task_arena.h>

#include <cmath>
#include <cstring>
#include <random>

#include "gtest/gtest.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

struct RunResult {
  std::vector<int32_t> canvas, output;
  int steps = 0;
  bool early = false;
};

RunResult Generate(const std::shared_ptr<const Model>& model, const SamplerConfig& config,
                   const std::vector<int32_t>& prompt, int threads) {
  tbb::task_arena arena(threads);
  RunResult r;
  arena.execute([&] {
    auto session = DenoiseSession::Create(model, config, prompt);
    EXPECT_TRUE(session.ok()) << session.status();
    if (!session.ok()) return;
    while (!(*session)->done()) {
      auto step = (*session)->Advance();
      ASSERT_TRUE(step.ok()) << step.status();
    }
    r.canvas.assign((*session)->canvas().begin(), (*session)->canvas().end());
    r.output.assign((*session)->OutputTokens().begin(), (*session)->OutputTokens().end());
    r.steps = (*session)->sampler().step();
    r.early = (*session)->exited_early();
  });
  return r;
}

TEST(DenoiseSessionTest, SeededSamplingIsIndependentOfThreadCount) {
  for (const char* name : {"tiny-llada-k-q4_k_m.gguf", "tiny-dream-k-q4_k_m.gguf"}) {
    SCOPED_TRACE(name);
    auto model = Model::Load(testing::TestDataDir() + "/models/" + name, {BestIsaLevel()});
    ASSERT_TRUE(model.ok()) << model.status();
    SamplerConfig c;
    c.family = SamplerFamilyOf((*model)->config().arch);
    c.algorithm =
        c.family == SamplerFamily::kLlada ? Algorithm::kLowConfidence : Algorithm::kMaskgitPlus;
    c.gen_length = 32;
    c.steps = 16;
    c.block_length = c.family == SamplerFamily::kLlada ? 8 : 0;
    c.temperature = 0.9f;
    c.top_p = c.family == SamplerFamily::kDream ? 0.95f : 1.0f;
    c.seed = 1234;
    const std::vector<int32_t> prompt = {464, 3139, 286, 4881, 318};
    const RunResult one = Generate(*model, c, prompt, 1);
    const RunResult two = Generate(*model, c, prompt, 2);
    EXPECT_EQ(one.canvas, two.canvas);
    c.seed = 1235;
    EXPECT_NE(Generate(*model, c, prompt, 2).canvas, one.canvas) << "the seed must matter";
  }
}

// A Dream model whose layers do nothing (zero attention/FFN weights), so
// row p-1's logits depend only on token p-1: token i predicts i+1 for
// i < 40, token 40 predicts EOS, and a mask predicts token 40 weakly.
// Generations therefore count up from the prompt and end with EOS well
// before the canvas does: what early exit is for.
std::string WriteCountingModel() {
  testing::GgufBuilder b = testing::TinyModelBuilder("dream");
  const int d = 32, vocab = 300, eos = 256, mask = 258;
  std::mt19937 rng(5);
  std::normal_distribution<float> gauss;
  std::vector<std::vector<float>> u(vocab, std::vector<float>(d));
  for (auto& v : u) {
    double n = 0;
    for (float& x : v) {
      x = gauss(rng);
      n += double(x) * x;
    }
    for (float& x : v) x = static_cast<float>(x / std::sqrt(n));
  }
  std::vector<float> embd(vocab * d), out(vocab * d, 0.0f);
  for (int t = 0; t < vocab; ++t) std::memcpy(&embd[t * d], u[t].data(), d * 4);
  for (int t = 0; t <= 40; ++t) {
    const int next = t < 40 ? t + 1 : eos;
    for (int c = 0; c < d; ++c) out[next * d + c] += 3.0f * u[t][c];
  }
  for (int c = 0; c < d; ++c) out[40 * d + c] += 0.5f * u[mask][c];
  for (auto& t : b.tensors()) {
    if (t.name == "token_embd.weight")
      t.data.assign(reinterpret_cast<char*>(embd.data()), embd.size() * 4);
    if (t.name == "output_norm.weight") {
      std::vector<float> ones(d, 1.0f);
      t.data.assign(reinterpret_cast<char*>(ones.data()), d * 4);
    }
  }
  b.AddTensor({"output.weight",
               0,
               {static_cast<uint64_t>(d), static_cast<uint64_t>(vocab)},
               std::string(reinterpret_cast<char*>(out.data()), out.size() * 4),
               std::nullopt});
  const std::string path = testing::TempDir() + "/counting-dream.gguf";
  testing::WriteFileOrDie(path, b.Build());
  return path;
}

TEST(DenoiseSessionTest, EarlyExitIsOutputIdenticalAndSavesSteps) {
  auto counting = Model::Load(WriteCountingModel(), {BestIsaLevel()});
  ASSERT_TRUE(counting.ok()) << counting.status();
  auto llada =
      Model::Load(testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf", {BestIsaLevel()});
  ASSERT_TRUE(llada.ok()) << llada.status();
  int runs = 0, runs_exited = 0, steps_full = 0, steps_early = 0;
  for (const auto& model : {*counting, *llada}) {
    const bool dream = model->config().arch == Arch::kDream;
    const std::vector<Algorithm> algs =
        dream ? std::vector<Algorithm>{Algorithm::kEntropy, Algorithm::kMaskgitPlus,
                                       Algorithm::kTopkMargin}
              : std::vector<Algorithm>{Algorithm::kLowConfidence};
    for (Algorithm alg : algs) {
      for (int first : {20, 28, 35}) {
        for (auto [gen, steps] : {std::pair{32, 32}, {32, 16}, {64, 32}}) {
          SamplerConfig c;
          c.family = SamplerFamilyOf(model->config().arch);
          c.algorithm = alg;
          c.gen_length = gen;
          c.steps = steps;
          c.block_length = dream ? 0 : 16;
          std::vector<int32_t> prompt = {first - 2, first - 1, first};
          c.early_exit = false;
          const RunResult full = Generate(model, c, prompt, 2);
          c.early_exit = true;
          const RunResult early = Generate(model, c, prompt, 2);
          SCOPED_TRACE(::testing::Message()
                       << SamplerFamilyName(c.family) << " " << AlgorithmName(alg) << " prompt "
                       << first << " gen " << gen << " steps " << steps);
          EXPECT_EQ(early.output, full.output);

          EXPECT_EQ(full.steps, steps);
          EXPECT_LE(early.steps, full.steps);
          ++runs;
          runs_exited += early.early;
          steps_full += full.steps;
          steps_early += early.steps;
        }
      }
    }
  }
  std::printf("early exit: %d of %d runs stopped early; %d of %d steps run (%.0f%% saved)\n",
              runs_exited, runs, steps_early, steps_full,
              100.0 * (steps_full - steps_early) / steps_full);
  EXPECT_GT(runs_exited, 0);
  EXPECT_LT(steps_early, steps_full);
}

}  // namespace
}  // namespace dllm
