// The official LLaDA2.0 and LLaDA2.1 samplers' runs, reproduced token for
// token: tests/data/llada2/traces/*.json hold every forward of
// dllm/pipelines/llada2/sampler.py (LLaDA2Sampler) and llada21/sampler.py
// (LLaDA21Sampler), at temperature 0, on the tiny F32 file, with the
// official modeling code's logits (README there). dllm runs the same
// settings through a DenoiseSession over its own forward pass, with the
// exact block cache and without, on every ISA path, and must write the
// same positions with the same tokens at every step (mask to token, and
// 2.1's edits of written tokens), and end on the same canvas.
//
// One deviation, by design: with eos_early_stop, LLaDA2.0's sampler.py
// leaves a block's step loop as soon as the block holds an EOS, masks and
// all, and goes on to the next block; dllm stops as the official model's
// generate() does, after a block whose output ends in a stop token (the
// block finished). Those runs are compared up to the step where sampler.py
// leaves its block early, and must hold the same EOS there.
//
// The runs include threshold steps that commit several tokens, steps that
// fall back to the schedule (2.0) or to the best position (2.1), and 2.1
// edits of committed tokens (each run's `facts` say which; the test checks
// the runs cover them).
#include <algorithm>
#include <span>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/model.h"
#include "engine/session/denoise_session.h"
#include "gtest/gtest.h"
#include "kernels/cpu_features.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

std::string DataDir() { return testing::TestDataDir() + "/llada2"; }

struct Write {
  int32_t position, token;
  friend bool operator==(const Write&, const Write&) = default;
};

struct OfficialRun {
  std::string name;
  bool editing = false;
  SamplerConfig config;
  std::vector<int32_t> prompt, final_canvas;
  std::vector<std::vector<Write>> steps;  // each forward's writes, by position
  std::vector<int> step_blocks;           // each forward's block
  Json facts;
  int32_t eos = -1;
  // LLaDA2.0 with eos_early_stop: sampler.py's step loop quirk (above).
  bool quirk_eos_stop = false;
};

std::vector<OfficialRun> ReadRuns() {
  std::vector<OfficialRun> out;
  absl::StatusOr<Json> list = ReadJsonFile(DataDir() + "/runs.json");
  EXPECT_TRUE(list.ok()) << list.status();
  if (!list.ok()) return out;
  for (const Json& entry : (*list)["runs"]) {
    const std::string name = entry["name"].get<std::string>();
    absl::StatusOr<Json> file = ReadJsonFile(absl::StrCat(DataDir(), "/traces/", name, ".json"));
    EXPECT_TRUE(file.ok()) << file.status();
    if (!file.ok()) continue;
    const Json& j = *file;
    OfficialRun& r = out.emplace_back();
    r.name = name;
    r.editing = j["sampler"].get<std::string>() == "llada2.1";
    const Json& s = j["settings"];
    SamplerConfig& c = r.config;
    c = DefaultSamplerConfig(Arch::kLlada2, s["max_new_tokens"].get<int>());
    c.block_length = s["block_size"].get<int>();
    c.threshold = s["threshold"].get<float>();
    if (r.editing) {
      c.editing_threshold = s["editing_threshold"].get<float>();
      c.max_post_steps = s["max_post_steps"].get<int>();
    } else {
      c.steps_per_block = s["steps_per_block"].get<int>();
    }
    c.early_exit = s.contains("eos_early_stop") && s["eos_early_stop"].get<bool>();
    for (const Json& t : j["prompt_ids"]) r.prompt.push_back(t.get<int32_t>());
    for (const Json& t : j["final"]) r.final_canvas.push_back(t.get<int32_t>());
    r.eos = j["eos_id"].get<int32_t>();
    r.quirk_eos_stop = !r.editing && r.config.early_exit;
    for (const Json& step : j["steps"]) {
      r.step_blocks.push_back(step["block"].get<int>());
      std::vector<Write>& w = r.steps.emplace_back();
      for (const Json& e : step["m2t"]) w.push_back({e[0].get<int32_t>(), e[1].get<int32_t>()});
      for (const Json& e : step["t2t"]) w.push_back({e[0].get<int32_t>(), e[2].get<int32_t>()});
      std::sort(w.begin(), w.end(),
                [](const Write& a, const Write& b) { return a.position < b.position; });
    }
    r.facts = j["facts"];
  }
  return out;
}

TEST(Llada2SamplerTest, RunsCoverThresholdFallbackAndEdits) {
  int multi = 0, fallback = 0, edits = 0, v20 = 0, v21 = 0;
  for (const OfficialRun& r : ReadRuns()) {
    multi += r.facts["threshold_multi_commit_steps"].get<int>();
    fallback += r.facts["fallback_steps"].get<int>();
    if (r.editing) edits += r.facts["edits"].get<int>();
    (r.editing ? v21 : v20) += 1;
  }
  EXPECT_GT(v20, 0);
  EXPECT_GT(v21, 0);
  EXPECT_GT(multi, 0) << "no threshold step committed several tokens";
  EXPECT_GT(fallback, 0) << "no step fell back to the schedule";
  EXPECT_GT(edits, 0) << "no LLaDA2.1 edit of a written token";
}

TEST(Llada2SamplerTest, ReproducesTheOfficialRuns) {
  const std::vector<OfficialRun> runs = ReadRuns();
  ASSERT_FALSE(runs.empty());
  for (IsaLevel isa : SupportedIsaLevels()) {
    absl::StatusOr<std::shared_ptr<const Model>> model =
        Model::Load(DataDir() + "/tiny-llada2-f32.gguf", {.isa = isa});
    ASSERT_TRUE(model.ok()) << model.status();
    for (const OfficialRun& r : runs) {
      for (CacheMode cache : {CacheMode::kExact, CacheMode::kNone}) {
        const std::string where =
            absl::StrCat(IsaLevelName(isa), " ", r.name, " cache ", CacheModeName(cache));
        CachingOptions caching;
        caching.cache = cache;
        absl::StatusOr<std::unique_ptr<DenoiseSession>> session =
            DenoiseSession::Create(*model, r.config, CanvasInput(r.prompt), caching);
        ASSERT_TRUE(session.ok()) << where << ": " << session.status();
        size_t step = 0;
        bool left_early = false;
        while (!(*session)->done()) {
          if (r.quirk_eos_stop && step > 0 && step < r.steps.size() &&
              r.step_blocks[step] != r.step_blocks[step - 1] &&
              (*session)->sampler().block() == r.step_blocks[step - 1]) {
            // sampler.py left the block with masks in it, after an EOS.
            const std::span<const int32_t> canvas = (*session)->canvas();
            EXPECT_NE(std::find(canvas.begin(), canvas.end(), r.eos), canvas.end()) << where;
            left_early = true;
            break;
          }
          absl::StatusOr<StepReport> report = (*session)->Advance();
          ASSERT_TRUE(report.ok()) << where << ": " << report.status();
          ASSERT_LT(step, r.steps.size()) << where << ": more forwards than the official run";
          std::vector<Write> got;
          for (size_t i = 0; i < report->positions.size(); ++i) {
            got.push_back({report->positions[i], report->tokens[i]});
          }
          ASSERT_EQ(got, r.steps[step]) << where << " step " << step;
          ++step;
        }
        if (r.quirk_eos_stop) {
          EXPECT_TRUE(left_early) << where;
          continue;
        }
        EXPECT_EQ(step, r.steps.size()) << where;
        const std::span<const int32_t> canvas = (*session)->canvas();
        EXPECT_EQ(std::vector<int32_t>(canvas.begin(), canvas.end()), r.final_canvas) << where;
      }
    }
  }
}

}  // namespace
}  // namespace dllm
