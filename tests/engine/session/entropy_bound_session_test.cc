// DiffusionGemma's entropy-bound denoiser driven through DenoiseSession
// (the Denoiser interface): fed the reference's logits for each step
// (tests/data/sampler-eb), the session's canvas before every forward, its
// self-conditioning input and its output are the reference run's. The
// masked-only operations say so.
#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "engine/session/denoise_session.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::StatusIs;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

std::vector<int32_t> Ints(const Json& j) {
  std::vector<int32_t> out;
  for (const Json& x : j) out.push_back(x.get<int32_t>());
  return out;
}

struct ReferenceRun {
  EntropyBoundConfig config;
  SessionModel model;
  std::vector<int32_t> prompt;
  std::string logits;  // steps x canvas_length x n_vocab floats
  std::vector<Json> trace;
  std::vector<int32_t> output;
};

ReferenceRun Load(const std::string& name) {
  const std::string dir = testing::TestDataDir() + "/sampler-eb/" + name;
  ReferenceRun r;
  const Json meta = *ReadJsonFile(dir + "/prompt.json");
  r.config.canvas_length = meta["canvas_length"].get<int>();
  r.config.max_steps = meta["max_steps"].get<int>();
  r.config.t_min = static_cast<float>(meta["t_min"].get<double>());
  r.config.t_max = static_cast<float>(meta["t_max"].get<double>());
  r.config.entropy_bound = static_cast<float>(meta["entropy_bound"].get<double>());
  r.config.stability_threshold = meta["stability_threshold"].get<int>();
  r.config.confidence_threshold = static_cast<float>(meta["confidence_threshold"].get<double>());
  r.config.seed = meta["seed"].get<uint32_t>();
  r.model.n_vocab = meta["n_vocab"].get<int>();
  r.model.n_ctx = 1 << 12;
  r.model.tokens.mask = -1;  // DiffusionGemma's canvas has no mask token
  r.prompt = Ints(meta["prompt_ids"]);
  r.logits = Slurp(dir + "/logits.f32");
  std::ifstream trace(dir + "/trace.jsonl");
  for (std::string line; std::getline(trace, line);) r.trace.push_back(*ParseJson(line));
  r.output = Ints((*ReadJsonFile(dir + "/output.json"))["output"]);
  return r;
}

TEST(EntropyBoundSessionTest, ReplaysTheReferenceRunsThroughTheSession) {
  for (const char* name : {"seed7-full", "seed11-stops"}) {
    SCOPED_TRACE(name);
    const ReferenceRun run = Load(name);
    const int C = run.config.canvas_length, V = run.model.n_vocab;
    const int P = static_cast<int>(run.prompt.size());
    const size_t per_step = static_cast<size_t>(C) * V;
    std::vector<float> previous;
    // This session's steps are planned and finished by hand below (as the
    // server's worker does); its own source is never asked.
    auto source = FunctionLogits(
        [](std::span<const int32_t>, std::span<const int32_t>, std::span<float>) {
          ADD_FAILURE() << "the session ran a forward of its own";
          return absl::OkStatus();
        },
        V);
    auto session =
        DenoiseSession::Create(run.model, run.config, run.prompt, CanvasRun{}, std::move(source));
    ASSERT_TRUE(session.ok()) << session.status();
    DenoiseSession& s = **session;
    EXPECT_EQ(s.prompt_len(), P);
    EXPECT_EQ(s.gen_length(), C);
    while (!s.done()) {
      const int step = s.steps();
      // From the second step on, the forward carries the previous step's
      // logits at the previous step's temperature.
      auto planned = s.PlanStep();
      ASSERT_TRUE(planned.ok()) << planned.status();
      ASSERT_EQ(planned->size(), 1u);
      const SequenceInput& in = (*planned)[0];
      // The canvas the reference's forward read: the prompt, then canvas_in.
      EXPECT_EQ(std::vector<int32_t>(in.tokens.begin(), in.tokens.begin() + P), run.prompt);
      EXPECT_EQ(std::vector<int32_t>(in.tokens.begin() + P, in.tokens.end()),
                Ints(run.trace[static_cast<size_t>(step)]["canvas_in"]));
      EXPECT_EQ(in.logit_rows.size(), static_cast<size_t>(C));
      EXPECT_EQ(in.logit_rows.front(), P);
      if (step == 0) {
        EXPECT_TRUE(in.self_conditioning.empty());
      } else {
        ASSERT_EQ(in.self_conditioning.size(), per_step);
        EXPECT_EQ(0, std::memcmp(in.self_conditioning.data(),
                                 run.logits.data() + (step - 1) * per_step * sizeof(float),
                                 per_step * sizeof(float)));
        EXPECT_EQ(
            in.self_conditioning_temp_inv,
            static_cast<float>(run.trace[static_cast<size_t>(step - 1)]["temp_inv"].get<double>()));
      }
      ForwardStats stats;
      ForwardBatch batch;
      batch.sequences.assign(planned->begin(), planned->end());
      // The scripted source fills the planned sequence's logits.
      auto direct = FunctionLogits(
          [&](std::span<const int32_t>, std::span<const int32_t>, std::span<float> out) {
            std::memcpy(out.data(), run.logits.data() + step * per_step * sizeof(float),
                        per_step * sizeof(float));
            return absl::OkStatus();
          },
          V);
      ASSERT_TRUE(direct->Run(batch, nullptr, &stats).ok());
      auto report = s.FinishStep(stats, 0.0);
      ASSERT_TRUE(report.ok()) << report.status();
      EXPECT_EQ(report->positions.size(), static_cast<size_t>(C));
      EXPECT_EQ(std::vector<int32_t>(s.generated().begin(), s.generated().end()),
                Ints(run.trace[static_cast<size_t>(step)]["canvas_next"]));
    }
    EXPECT_EQ(s.steps(), static_cast<int>(run.trace.size()));
    // The response is the last argmax canvas, trimmed as the reference CLI
    // trims it (no stop token in this vocabulary: at a repetition loop).
    const std::vector<int32_t> response(run.output.begin(),
                                        run.output.begin() + TrimCanvas(run.output, {}));
    EXPECT_EQ(std::vector<int32_t>(s.OutputTokens().begin(), s.OutputTokens().end()), response);

    // Advance() runs the same loop through the session's own source.
    auto again = DenoiseSession::Create(
        run.model, run.config, run.prompt, CanvasRun{},
        FunctionLogits(
            [&](std::span<const int32_t> canvas, std::span<const int32_t>, std::span<float> out) {
              const size_t step = previous.size();
              EXPECT_EQ(std::vector<int32_t>(canvas.begin() + P, canvas.end()),
                        Ints(run.trace.at(step)["canvas_in"]));
              std::memcpy(out.data(), run.logits.data() + step * per_step * sizeof(float),
                          per_step * sizeof(float));
              previous.push_back(0);
              return absl::OkStatus();
            },
            V));
    ASSERT_TRUE(again.ok()) << again.status();
    while (!(*again)->done()) ASSERT_TRUE((*again)->Advance().ok());
    EXPECT_EQ(
        std::vector<int32_t>((*again)->OutputTokens().begin(), (*again)->OutputTokens().end()),
        response);
  }
}

TEST(EntropyBoundSessionTest, MaskedOnlyOperationsSaySo) {
  const ReferenceRun run = Load("seed7-full");
  auto session = DenoiseSession::Create(
      run.model, run.config, run.prompt, CanvasRun{},
      FunctionLogits(
          [](std::span<const int32_t>, std::span<const int32_t>, std::span<float> out) {
            std::fill(out.begin(), out.end(), 0.0f);
            return absl::OkStatus();
          },
          run.model.n_vocab));
  ASSERT_TRUE(session.ok()) << session.status();
  DenoiseSession& s = **session;
  ASSERT_TRUE(s.Advance().ok());
  const std::vector<int32_t> positions = {0}, tokens = {5};
  EXPECT_THAT(s.Commit(positions, tokens),
              StatusIs(absl::StatusCode::kFailedPrecondition, "commit: the session's denoiser"));
  EXPECT_THAT(s.Rewind(0), StatusIs(absl::StatusCode::kFailedPrecondition, "rewind:"));
  EXPECT_THAT(s.Forward({}, 3).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "forward:"));
  EXPECT_THAT(s.StepCandidates(3).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "step candidates:"));
  EXPECT_THAT(s.AdvanceWith(positions, tokens).status(),
              StatusIs(absl::StatusCode::kFailedPrecondition, "advance with:"));
  // A prompt token outside the vocabulary is refused before anything is sized.
  const std::vector<int32_t> bad = {run.model.n_vocab};
  EXPECT_THAT(DenoiseSession::Create(run.model, run.config, bad, CanvasRun{}, nullptr).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "prompt token"));
}

}  // namespace
}  // namespace dllm
