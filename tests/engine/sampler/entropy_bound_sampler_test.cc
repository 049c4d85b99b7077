// EntropyBoundSampler replays the reference's entropy-bound runs
// (tests/data/sampler-eb: the pinned llama.cpp's diffusion_generate_entropy_bound
// on a tiny diffusion-gemma file, its state written at every step): fed
// the same logits, every step's draws, argmax, entropies (bit for bit),
// samples, accepted positions, next canvas and stop decision are the
// reference's, and so is the output.
#include "engine/sampler/entropy_bound_sampler.h"

#include <gtest/gtest.h>

#include <cstring>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;
using ::dllm::testing::StatusIs;

std::string Slurp(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
}

template <typename T>
std::vector<T> Vec(const Json& j) {
  std::vector<T> out;
  for (const Json& x : j) out.push_back(x.get<T>());
  return out;
}

template <typename T>
std::vector<T> Vec(std::span<const T> s) {
  return {s.begin(), s.end()};
}

// The float a reference's "%.9g" printed, exactly.
std::vector<float> Floats(const Json& j) {
  std::vector<float> out;
  for (const Json& x : j) out.push_back(static_cast<float>(x.get<double>()));
  return out;
}

void Replay(const std::string& name) {
  SCOPED_TRACE(name);
  const std::string dir = testing::TestDataDir() + "/sampler-eb/" + name;
  absl::StatusOr<Json> meta = ReadJsonFile(dir + "/prompt.json");
  absl::StatusOr<Json> output = ReadJsonFile(dir + "/output.json");
  ASSERT_TRUE(meta.ok() && output.ok());
  EntropyBoundConfig c;
  c.canvas_length = (*meta)["canvas_length"].get<int>();
  c.max_steps = (*meta)["max_steps"].get<int>();
  c.t_min = static_cast<float>((*meta)["t_min"].get<double>());
  c.t_max = static_cast<float>((*meta)["t_max"].get<double>());
  c.entropy_bound = static_cast<float>((*meta)["entropy_bound"].get<double>());
  c.stability_threshold = (*meta)["stability_threshold"].get<int>();
  c.confidence_threshold = static_cast<float>((*meta)["confidence_threshold"].get<double>());
  c.seed = (*meta)["seed"].get<uint32_t>();
  const int n_vocab = (*meta)["n_vocab"].get<int>();
  absl::StatusOr<EntropyBoundSampler> s = EntropyBoundSampler::Create(c, n_vocab);
  ASSERT_THAT(s.status(), IsOk());

  const std::string logits = Slurp(dir + "/logits.f32");
  const size_t per_step = static_cast<size_t>(c.canvas_length) * n_vocab;
  std::ifstream trace(dir + "/trace.jsonl");
  std::string line;
  int steps = 0;
  while (std::getline(trace, line)) {
    absl::StatusOr<Json> want = ParseJson(line);
    ASSERT_TRUE(want.ok()) << want.status();
    const Json& w = *want;
    SCOPED_TRACE(::testing::Message() << "step " << steps);
    ASSERT_FALSE(s->done());
    ASSERT_EQ(Vec(s->canvas()), Vec<int32_t>(w["canvas_in"]));
    ASSERT_GE(logits.size(), (steps + 1) * per_step * sizeof(float));
    std::vector<float> step_logits(per_step);
    std::memcpy(step_logits.data(), logits.data() + steps * per_step * sizeof(float),
                per_step * sizeof(float));
    const EntropyBoundStep r = s->Step(step_logits);
    EXPECT_EQ(r.step, w["step"].get<int>());
    EXPECT_EQ(r.temperature, static_cast<float>(w["t"].get<double>()));
    EXPECT_EQ(Vec(r.uniform), Floats(w["u"]));
    EXPECT_EQ(Vec(r.renoise), Vec<int32_t>(w["renoise"]));
    EXPECT_EQ(Vec(r.argmax), Vec<int32_t>(w["argmax"]));
    EXPECT_EQ(Vec(r.entropy), Floats(w["entropy"]));
    EXPECT_EQ(Vec(r.sampled), Vec<int32_t>(w["sampled"]));
    std::vector<int32_t> accepted(r.accepted.begin(), r.accepted.end());
    EXPECT_EQ(accepted, Vec<int32_t>(w["accepted"]));
    EXPECT_EQ(Vec(s->canvas()), Vec<int32_t>(w["canvas_next"]));
    EXPECT_EQ(r.held, w["held"].get<int>());
    EXPECT_EQ(r.confident, w["confident"].get<bool>());
    EXPECT_EQ(r.finished, w["finished"].get<bool>());
    ++steps;
  }
  EXPECT_GT(steps, 0);
  EXPECT_TRUE(s->done());
  EXPECT_EQ(Vec(s->output()), Vec<int32_t>((*output)["output"]));
}

TEST(EntropyBoundSamplerTest, ReplaysAFullReferenceRun) { Replay("seed7-full"); }

TEST(EntropyBoundSamplerTest, ReplaysAReferenceRunThatStopsOnConfidence) { Replay("seed11-stops"); }

TEST(EntropyBoundSamplerTest, BadSettingsAreNamed) {
  EntropyBoundConfig c;
  c.t_min = 0;
  EXPECT_THAT(EntropyBoundSampler::Create(c, 10).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "t_min"));
  c = EntropyBoundConfig();
  c.t_max = 0.1f;
  EXPECT_THAT(EntropyBoundSampler::Create(c, 10).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "t_max"));
  c = EntropyBoundConfig();
  c.max_steps = 0;
  EXPECT_THAT(EntropyBoundSampler::Create(c, 10).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "max_steps"));
  EXPECT_THAT(EntropyBoundSampler::Create(EntropyBoundConfig(), 0).status(),
              StatusIs(absl::StatusCode::kInvalidArgument, "n_vocab"));
}

}  // namespace
}  // namespace dllm
