// Replays of the official-sampler goldens (shared/reference/official): the
// schedule of every run, a scripted replay that makes every recorded step
// happen through the real sampler (checks eligibility, the Dream shift and
// the bookkeeping), and the real replay: the model loaded and driven through
// the production DenoiseSession and its forward pass.
#include <gtest/gtest.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "engine/model/model.h"
#include "engine/sampler/denoise_sampler.h"
#include "engine/sampler/schedule.h"
#include "engine/session/denoise_session.h"
#include "service/json/json.h"
#include "tests/testing/session_trace.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::dllm::testing::IsOk;

struct RunStep {
  int block = 0;
  int n_masked_before = 0;
  std::vector<int32_t> positions;
  std::vector<int32_t> tokens;
};

struct OfficialRun {
  std::string path;
  std::string model_file;
  SamplerConfig config;
  int32_t mask_id = -1;
  std::vector<int32_t> prompt;
  std::vector<int32_t> final_canvas;
  std::vector<RunStep> steps;
};

std::vector<int32_t> Ints(const Json& array) {
  std::vector<int32_t> out;
  for (const Json& v : array) out.push_back(static_cast<int32_t>(v.get<int64_t>()));
  return out;
}

OfficialRun LoadRun(const std::string& path) {
  auto json = ParseJson(::dllm::testing::ReadFileOrDie(path));
  EXPECT_THAT(json.status(), IsOk()) << path;
  const Json& j = *json;
  OfficialRun run;
  run.path = path;
  run.model_file = j["model_file"].get<std::string>();
  run.mask_id = static_cast<int32_t>(j["mask_id"].get<int64_t>());
  run.prompt = Ints(j["prompt_ids"]);
  run.final_canvas = Ints(j["final_canvas"]);
  const Json& params = j["sampler"]["params"];
  SamplerConfig& c = run.config;
  c.steps = static_cast<int>(params["steps"].get<int64_t>());
  if (j["arch"].get<std::string>() == "llada") {
    c.family = SamplerFamily::kLlada;
    c.gen_length = static_cast<int>(params["gen_length"].get<int64_t>());
    c.block_length = static_cast<int>(params["block_length"].get<int64_t>());
    auto alg = ParseAlgorithm(params["remasking"].get<std::string>());
    EXPECT_THAT(alg.status(), IsOk());
    c.algorithm = *alg;
  } else {
    c.family = SamplerFamily::kDream;
    c.shift_logits = true;
    c.gen_length = static_cast<int>(params["max_new_tokens"].get<int64_t>());
    auto alg = ParseAlgorithm(params["alg"].get<std::string>());
    EXPECT_THAT(alg.status(), IsOk());
    c.algorithm = *alg;
    c.eps = static_cast<float>(params["eps"].get<double>());
  }
  for (const Json& s : j["steps"]) {
    RunStep step;
    step.block = s.value("block", 0);  // LLaDA runs only
    step.n_masked_before = static_cast<int>(s["n_masked_before"].get<int64_t>());
    step.positions = Ints(s["positions"]);
    step.tokens = Ints(s["tokens"]);
    run.steps.push_back(std::move(step));
  }
  return run;
}

// Paths of the run files, sorted by name: tests/data/sampler always, every
// run in shared/reference/official too (a name in both: tests/data's copy).
std::vector<std::string> RunFiles() {
  std::map<std::string, std::string> files;  // name -> path
  std::vector<std::string> dirs = {::dllm::testing::TestDataDir() + "/sampler"};
  if (auto shared = ::dllm::testing::SharedDir()) dirs.push_back(*shared + "/reference/official");
  for (const std::string& dir : dirs) {
    std::error_code ec;
    for (const auto& entry : std::filesystem::directory_iterator(dir, ec)) {
      const std::string name = entry.path().filename().string();
      if (name.ends_with(".json") && (name.find(".llada.") != std::string::npos ||
                                      name.find(".dream.") != std::string::npos)) {
        files.emplace(name, entry.path().string());  // tests/data wins
      }
    }
  }
  std::vector<std::string> paths;
  for (const auto& [name, path] : files) paths.push_back(path);
  return paths;
}

std::vector<OfficialRun> AllRuns() {
  std::vector<OfficialRun> runs;
  for (const std::string& path : RunFiles()) runs.push_back(LoadRun(path));
  return runs;
}

TEST(OfficialReplayTest, ScheduleMatchesEveryRun) {
  const std::vector<OfficialRun> runs = AllRuns();
  ASSERT_GE(runs.size(), 4u);
  RecordProperty("runs", static_cast<int>(runs.size()));
  if (::dllm::testing::SharedDir()) {
    EXPECT_GE(runs.size(), 80u);  // every official run
  }
  for (const OfficialRun& run : runs) {
    const SamplerConfig& c = run.config;
    ASSERT_THAT(c.ValidateForCanvas(static_cast<int>(run.prompt.size()), 1 << 20), IsOk())
        << run.path;
    std::vector<int> expected;
    if (c.family == SamplerFamily::kLlada) {
      for (int b = 0; b < c.NumBlocks(); ++b) {
        for (int k : LladaBlockSchedule(c.EffectiveBlockLength(), c.StepsPerBlock()))
          expected.push_back(k);
      }
    } else {
      expected = DreamSchedule(c.gen_length, c.steps, c.eps);
    }
    std::vector<int> actual;
    for (const RunStep& s : run.steps) actual.push_back(static_cast<int>(s.positions.size()));
    EXPECT_EQ(actual, expected) << run.path;
  }
}

// Makes each recorded step happen: the rows serving the positions committed
// at the current step get a sharp peak on the recorded token, every other
// row a flat one. Tokens are renumbered into a small vocabulary.
TEST(OfficialReplayTest, ScriptedReplayReproducesEveryRun) {
  for (const OfficialRun& run : AllRuns()) {
    SCOPED_TRACE(run.path);
    const bool dream = run.config.family == SamplerFamily::kDream;
    // The prompt's ids and the committed ones, renumbered into a small
    // vocabulary; the mask stays outside it.
    std::vector<int32_t> vocab = run.prompt;
    for (const RunStep& s : run.steps) vocab.insert(vocab.end(), s.tokens.begin(), s.tokens.end());
    std::sort(vocab.begin(), vocab.end());
    vocab.erase(std::unique(vocab.begin(), vocab.end()), vocab.end());
    auto local = [&](int32_t t) {
      return static_cast<int32_t>(std::lower_bound(vocab.begin(), vocab.end(), t) - vocab.begin());
    };
    const int n_vocab = static_cast<int>(vocab.size());
    ASSERT_GE(run.mask_id, n_vocab);
    std::map<int, std::pair<int, int32_t>> commit;  // position -> (step, local token)
    std::map<int, int> step_of_masks;               // n_masked_before -> step
    for (size_t i = 0; i < run.steps.size(); ++i) {
      const RunStep& s = run.steps[i];
      for (size_t k = 0; k < s.positions.size(); ++k)
        commit[s.positions[k]] = {i, local(s.tokens[k])};
      if (!s.positions.empty()) step_of_masks[s.n_masked_before] = static_cast<int>(i);
    }
    const int block_length = run.config.EffectiveBlockLength();
    const int prompt_len = static_cast<int>(run.prompt.size());
    LogitsFn fn = [&](std::span<const int32_t> canvas, std::span<const int32_t> rows,
                      std::span<float> out) {
      const int masks = static_cast<int>(std::count(canvas.begin(), canvas.end(), run.mask_id));
      const auto it = step_of_masks.find(masks);
      if (it == step_of_masks.end()) return absl::InternalError("no recorded step for this canvas");
      const int step = it->second;
      for (size_t i = 0; i < rows.size(); ++i) {
        const int served = rows[i] + (dream ? 1 : 0);
        EXPECT_EQ(canvas[served], run.mask_id) << "row " << rows[i] << " serves no mask";
        if (!dream) {
          EXPECT_LT(served, prompt_len + (run.steps[step].block + 1) * block_length)
              << "row outside the current block";
        }
        const auto [commit_step, token] = commit.at(served);
        const float peak = commit_step == step ? 8.0f : 3.0f;
        for (int v = 0; v < n_vocab; ++v) out[i * n_vocab + v] = v == token ? peak : 0.0f;
      }
      return absl::OkStatus();
    };
    SpecialTokens special;
    special.mask = run.mask_id;
    std::vector<int32_t> local_prompt;
    for (int32_t t : run.prompt) local_prompt.push_back(local(t));
    auto trace =
        ::dllm::testing::RunSessionToEnd(run.config, special, local_prompt, n_vocab, 1 << 20, fn);
    ASSERT_THAT(trace.status(), IsOk());
    ASSERT_EQ(trace->steps.size(), run.steps.size());
    for (size_t i = 0; i < run.steps.size(); ++i) {
      EXPECT_EQ(trace->steps[i].positions, run.steps[i].positions) << "step " << i;
      std::vector<int32_t> tokens;
      for (int32_t t : trace->steps[i].tokens) tokens.push_back(vocab[t]);
      EXPECT_EQ(tokens, run.steps[i].tokens) << "step " << i;
    }
    std::vector<int32_t> canvas = trace->canvas;
    for (int32_t& t : canvas) t = t < n_vocab ? vocab[t] : t;
    EXPECT_EQ(canvas, run.final_canvas);
    // Steps that commit nothing cost no forward.
    int empty = 0;
    for (const RunStep& s : run.steps) empty += s.positions.empty() ? 1 : 0;
    EXPECT_EQ(trace->n_forward, static_cast<int>(run.steps.size()) - empty);
  }
}

// The real check: the model's forward drives the sampler and must reproduce
// every step of the run. One test per run file, so that each gets its own
// timeout and ctest spreads them over the cores (instrumented, a run takes
// about 30x longer). Sanitizer builds replay only the committed runs
// (tests/CMakeLists.txt).
std::vector<std::string> ReplayedRunFiles() {
  std::vector<std::string> paths = RunFiles();
#ifdef DLLM_REPLAY_COMMITTED_RUNS_ONLY
  std::erase_if(
      paths, [](const std::string& p) { return !p.starts_with(::dllm::testing::TestDataDir()); });
#endif
  return paths;
}

class ForwardReplayTest : public ::testing::TestWithParam<std::string> {};

TEST_P(ForwardReplayTest, ReproducesTheRun) {
  const OfficialRun run = LoadRun(GetParam());
  std::string model = ::dllm::testing::TestDataDir() + "/models/" + run.model_file;
  if (!std::filesystem::exists(model)) {
    const auto shared = ::dllm::testing::SharedDir();
    if (!shared) GTEST_SKIP() << "needs ../shared/models/" << run.model_file;
    model = *shared + "/models/" + run.model_file;
  }
  // Production code end to end: the model's own family, shift and special
  // tokens, the session and its forward pass.
  absl::StatusOr<std::shared_ptr<const Model>> loaded = Model::Load(model, {BestIsaLevel()});
  ASSERT_THAT(loaded.status(), IsOk());
  ASSERT_EQ((*loaded)->config().tokens.mask, run.mask_id);
  // Exact decoding, and both caches refreshed every step (which must be
  // exact decoding too: each step's logits come from a full pass that also
  // refills the cache).
  for (const CacheMode cache : {CacheMode::kNone, CacheMode::kPrefix, CacheMode::kDual}) {
    SCOPED_TRACE(absl::StrCat("cache ", CacheModeName(cache)));
    const CachingOptions caching{cache, cache == CacheMode::kNone ? 0 : 1};
    auto session = DenoiseSession::Create(*loaded, run.config, run.prompt, caching);
    ASSERT_THAT(session.status(), IsOk());
    auto trace = ::dllm::testing::RunToEnd(**session);
    ASSERT_THAT(trace.status(), IsOk());
    ASSERT_EQ(trace->steps.size(), run.steps.size());
    for (size_t i = 0; i < run.steps.size(); ++i) {
      ASSERT_EQ(trace->steps[i].positions, run.steps[i].positions)
          << "first divergence at step " << i;
      ASSERT_EQ(trace->steps[i].tokens, run.steps[i].tokens) << "first divergence at step " << i;
    }
    EXPECT_EQ(trace->canvas, run.final_canvas);
    if (cache != CacheMode::kNone) {
      EXPECT_EQ((*session)->cache_refreshes(), trace->n_forward);
    }
  }
}

INSTANTIATE_TEST_SUITE_P(OfficialRuns, ForwardReplayTest, ::testing::ValuesIn(ReplayedRunFiles()),
                         [](const ::testing::TestParamInfo<std::string>& info) {
                           return ::dllm::testing::TestNameFromPath(info.param);
                         });

}  // namespace
}  // namespace dllm
