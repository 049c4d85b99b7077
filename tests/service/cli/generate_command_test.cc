// `dllm generate`: its --json trace reproduces official sampler runs (same
// field names, same commits per step), bad settings fail before any work,
// and --show-canvas falls back to progress lines off a terminal.
#include <filesystem>

#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

std::string Join(const Json& ids) {
  std::string out;
  for (const Json& id : ids) {
    if (!out.empty()) out += ',';
    out += std::to_string(id.get<int64_t>());
  }
  return out;
}

TEST(GenerateCommandTest, JsonTraceReproducesOfficialRuns) {
  const auto shared = testing::SharedDir();
  if (!shared) GTEST_SKIP() << "needs ../shared (official runs and f16 models)";
  for (const char* name : {"tiny-llada-k-f16.p0.llada.g32.b8.s16.json",
                           "tiny-dream-k-f16.p1.dream.entropy.n32.s16.json",
                           "tiny-dream-k-f16.p0.dream.topk_margin.n64.s32.json"}) {
    SCOPED_TRACE(name);
    auto run = ReadJsonFile(*shared + "/reference/official/" + name);
    ASSERT_TRUE(run.ok()) << run.status();
    const Json& params = (*run)["sampler"]["params"];
    const bool llada = (*run)["arch"].get<std::string>() == "llada";
    std::string args = "generate --json --no-early-exit --model " + *shared + "/models/" +
                       (*run)["model_file"].get<std::string>() + " --tokens " +
                       Join((*run)["prompt_ids"]);
    const int gen =
        static_cast<int>((*run)["canvas_len"].get<int64_t>() - (*run)["prompt_len"].get<int64_t>());
    args += " --gen-length " + std::to_string(gen) + " --steps " +
            std::to_string((*run)["n_forward"].get<int64_t>());
    if (llada) {
      args += " --block-length " + std::to_string(params["block_length"].get<int64_t>());
    } else {
      args += " --alg " + params["alg"].get<std::string>();
    }
    const testing::RunResult r = testing::RunDllm(args);
    ASSERT_EQ(r.exit_code, 0) << r.err;
    auto out = ParseJson(r.out);
    ASSERT_TRUE(out.ok()) << out.status();
    EXPECT_EQ(DumpJson((*out)["final_canvas"]), DumpJson((*run)["final_canvas"]));
    EXPECT_EQ(DumpJson((*out)["prompt_ids"]), DumpJson((*run)["prompt_ids"]));
    ASSERT_EQ((*out)["steps"].size(), (*run)["steps"].size());
    for (size_t i = 0; i < (*run)["steps"].size(); ++i) {
      EXPECT_EQ(DumpJson((*out)["steps"][i]["positions"]),
                DumpJson((*run)["steps"][i]["positions"]))
          << i;
      EXPECT_EQ(DumpJson((*out)["steps"][i]["tokens"]), DumpJson((*run)["steps"][i]["tokens"]))
          << i;
    }
  }
}

TEST(GenerateCommandTest, BadSettingsFailBeforeAnyWork) {
  const std::string model = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  const std::vector<std::pair<std::string, std::string>> cases = {
      {"--steps 64 --gen-length 32", "steps"},
      {"--gen-length 32 --block-length 12", "--block-length: 12 does not divide gen_length 32"},
      {"--alg fastest", "fastest"},
      {"--alg entropy", "--alg: ALGORITHM_ENTROPY does not fit the served llada model"},
      {"--temperature -0.5", "temperature"},
      {"--gen-length 4000", "context"},
      {"--top-k many", "--top-k"},
      {"--cache fast", "--cache: unknown mode 'fast' (none, prefix, dual, exact)"},
      {"--cache exact", "--cache: CACHE_EXACT is the cache of the entropy-bound sampler"},
      {"--sampler entropy-bound", "--sampler: SAMPLER_ENTROPY_BOUND needs a canvas model"},
      {"--cache-refresh 4", "--cache-refresh: 4 needs a cache (prefix or dual)"},
      // The server's rules hold here too (one validation, service/engine/).
      {"--cache dual --cache-refresh 64 --gen-length 32",
       "--cache-refresh: 64 exceeds gen_length 32"},
      {"--cache dual --cache-refresh -1", "--cache-refresh"},
  };
  for (const auto& [flags, message] : cases) {
    SCOPED_TRACE(flags);
    const testing::RunResult r =
        testing::RunDllm("generate --model " + model + " --prompt hi " + flags);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_FALSE(r.signaled);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
  EXPECT_EQ(testing::RunDllm("generate --model " + model).exit_code, 2);  // no prompt
}

// A canvas model (DiffusionGemma) runs its entropy-bound sampler by
// default, with the file's settings under the flags, canvas after canvas,
// and the exact cache (default) gives the uncached run's tokens.
TEST(GenerateCommandTest, CanvasModelRunsTheEntropyBoundSampler) {
  const std::string model = testing::TestDataDir() + "/logits-dg/tiny-diffusion-gemma-q8_0.gguf";
  const std::string base = "generate --model " + model +
                           " --prompt 'the cat sat on' --json --seed 5 --eb-max-steps 6 "
                           "--eb-t-max 0.9 --gen-length 40";
  const testing::RunResult cached = testing::RunDllm(base);
  ASSERT_EQ(cached.exit_code, 0) << cached.err;
  auto run = ParseJson(cached.out);
  ASSERT_TRUE(run.ok()) << run.status();
  EXPECT_EQ((*run)["sampler"].get<std::string>(), "entropy-bound");
  const Json& settings = (*run)["settings"];
  EXPECT_EQ(settings["canvas_length"].get<int>(), 16);
  EXPECT_EQ(settings["max_canvases"].get<int>(), 3);  // ceil(40 / 16)
  EXPECT_EQ(settings["eb_max_steps"].get<int>(), 6);
  EXPECT_FLOAT_EQ(settings["eb_t_max"].get<double>(), 0.9f);
  EXPECT_FLOAT_EQ(settings["eb_t_min"].get<double>(), 0.4f);  // the default
  EXPECT_EQ(settings["seed"].get<int64_t>(), 5);
  EXPECT_EQ(settings["cache"].get<std::string>(), "exact");
  EXPECT_LE((*run)["steps_run"].get<int>(), 18);
  const testing::RunResult uncached = testing::RunDllm(base + " --cache none");
  ASSERT_EQ(uncached.exit_code, 0) << uncached.err;
  auto plain = ParseJson(uncached.out);
  ASSERT_TRUE(plain.ok());
  EXPECT_EQ((*plain)["output_ids"], (*run)["output_ids"]);
  EXPECT_EQ((*plain)["final_canvas"], (*run)["final_canvas"]);
  for (const auto& [flags, message] : std::vector<std::pair<std::string, std::string>>{
           {"--cache dual", "--cache: CACHE_DUAL approximates a masked sampler's canvas"},
           {"--eb-t-min 0.9 --eb-t-max 0.5", "t_min"},
           {"--sampler fancy", "--sampler: unknown sampler 'fancy'"},
           {"--canvases 2 --gen-length 32", "not both"},
           {"--suffix x", "--suffix: the entropy-bound sampler writes after the prompt only"}}) {
    SCOPED_TRACE(flags);
    const testing::RunResult r =
        testing::RunDllm("generate --model " + model + " --prompt hi " + flags);
    EXPECT_EQ(r.exit_code, 2);
    EXPECT_NE(r.err.find(message), std::string::npos) << r.err;
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

TEST(GenerateCommandTest, ShowCanvasOffATerminalPrintsProgress) {
  const std::string model = testing::TestDataDir() + "/models/tiny-dream-k-q4_k_m.gguf";
  const testing::RunResult r =
      testing::RunDllm("generate --model " + model +
                       " --prompt 'def f(x):' --gen-length 16 --steps 8 --show-canvas");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("step 8: committed"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "no escape codes off a terminal";
  EXPECT_NE(r.err.find("8 steps"), std::string::npos) << r.err;
}

TEST(GenerateCommandTest, ChatTemplateFlagNamesAFamily) {
  const std::string model = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  const testing::RunResult bad =
      testing::RunDllm("generate --model " + model + " --prompt hi --chat --chat-template nope");
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("chat template 'nope' is not one of plain, llada"), std::string::npos)
      << bad.err;
  const testing::RunResult no_chat =
      testing::RunDllm("generate --model " + model + " --prompt hi --chat-template llada");
  EXPECT_EQ(no_chat.exit_code, 2);
  EXPECT_NE(no_chat.err.find("--chat-template needs --chat"), std::string::npos) << no_chat.err;
  // A LLaDA prompt in LLaDA's own format: BOS once, from the template text.
  const testing::RunResult ok = testing::RunDllm(
      "generate --json --model " + model +
      " --prompt hi --chat --chat-template llada --gen-length 8 --steps 8 --block-length 8");
  ASSERT_EQ(ok.exit_code, 0) << ok.err;
  auto out = ParseJson(ok.out);
  ASSERT_TRUE(out.ok()) << out.status();
  const Json& ids = (*out)["prompt_ids"];
  ASSERT_GT(ids.size(), 2u);
  EXPECT_EQ(ids[0].get<int64_t>(), 8193);  // BOS
  EXPECT_NE(ids[1].get<int64_t>(), 8193);
}

}  // namespace
}  // namespace dllm
