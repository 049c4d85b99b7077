// `dllm logits` writes exactly what Forward() computes, in the documented
// layout, and rejects bad arguments with a one-line error.
#include <cmath>
#include <cstring>

#include "engine/model/forward.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

TEST(LogitsCommandTest, WritesForwardLogitsAndMetadata) {
  const std::string model = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  const std::string out = testing::TempDir() + "/logits.f32";
  const testing::RunResult r = testing::RunDllm("logits --model " + model +
                                                " --tokens 8193,464,3139,8194,8194 --rows 1,3 "
                                                "--threads 1 --isa scalar --out " +
                                                out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto meta = ReadJsonFile(out + ".json");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ((*meta)["n_vocab"].get<int64_t>(), 8256);
  EXPECT_EQ((*meta)["isa"].get<std::string>(), "scalar");
  EXPECT_EQ((*meta)["model_sha256"].get<std::string>(),
            "666b4f7eb50a1ce64d76a2d7cee5f13f51f1cda86cb75a6a415a4e756ed2e0f9");
  EXPECT_EQ((*meta)["rows"].size(), 2u);

  const std::string bytes = testing::ReadFileOrDie(out);
  ASSERT_EQ(bytes.size(), 2u * 8256 * 4);
  auto loaded = Model::Load(model, {IsaLevel::kScalar});
  ASSERT_TRUE(loaded.ok());
  auto pass = ForwardPass::Create(*loaded, 5);
  ASSERT_TRUE(pass.ok());
  std::vector<float> expected(2 * 8256);
  ASSERT_TRUE((*pass)
                  ->Run(std::vector<int32_t>{8193, 464, 3139, 8194, 8194},
                        std::vector<int32_t>{1, 3}, expected.data())
                  .ok());
  EXPECT_EQ(std::memcmp(bytes.data(), expected.data(), bytes.size()), 0);
}

// A canvas model's forward as the reference's llama-diffusion-gemma-eval
// runs it: the first P tokens the causal prompt, the canvas rows' logits,
// self-conditioning on the previous step's logits (tests/data/logits-dg;
// the forward test holds the tolerance, 1% relative rms).
TEST(LogitsCommandTest, CanvasModelTakesThePromptLengthAndThePreviousLogits) {
  const std::string dir = testing::TestDataDir() + "/logits-dg";
  auto cases = ReadJsonFile(dir + "/cases.json");
  ASSERT_TRUE(cases.ok());
  std::string ids;
  for (const char* part : {"prompt_ids", "canvas_ids"}) {
    for (const Json& t : (*cases)["long"][part]) {
      ids += (ids.empty() ? "" : ",") + std::to_string(t.get<int>());
    }
  }
  const std::string out = testing::TempDir() + "/dg-logits.f32";
  const testing::RunResult r = testing::RunDllm(
      "logits --model " + dir + "/tiny-diffusion-gemma-f16.gguf --tokens " + ids +
      " --prompt-len 22 --previous " + dir + "/f16.short.f32 --threads 1 --out " + out);
  ASSERT_EQ(r.exit_code, 0) << r.err;
  auto meta = ReadJsonFile(out + ".json");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ((*meta)["prompt_len"].get<int>(), 22);
  EXPECT_TRUE((*meta)["self_conditioning"].get<bool>());
  EXPECT_EQ((*meta)["rows"].size(), 16u);  // the canvas rows by default
  const std::string got = testing::ReadFileOrDie(out);
  const std::string want = testing::ReadFileOrDie(dir + "/f16.long-sc.f32");
  ASSERT_EQ(got.size(), want.size());
  double diff = 0, norm = 0;
  for (size_t i = 0; i < want.size() / 4; ++i) {
    float a, b;
    std::memcpy(&a, got.data() + 4 * i, 4);
    std::memcpy(&b, want.data() + 4 * i, 4);
    diff += (double(a) - b) * (double(a) - b);
    norm += double(b) * b;
  }
  EXPECT_LE(std::sqrt(diff / norm), 0.01);
  // Without --prompt-len the split is the reference's: all but the canvas.
  const testing::RunResult unified =
      testing::RunDllm("logits --model " + dir + "/tiny-diffusion-gemma-f16.gguf --tokens " + ids +
                       " --previous " + dir + "/f16.short.f32 --threads 1 --out " + out);
  ASSERT_EQ(unified.exit_code, 0) << unified.err;
  EXPECT_EQ(testing::ReadFileOrDie(out), got);
  // A previous file of the wrong size, and --prompt-len on a model without a
  // causal prompt, are refused on one line.
  const std::string llada = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  for (const std::string& args :
       {"--model " + dir + "/tiny-diffusion-gemma-f16.gguf --tokens " + ids +
            " --prompt-len 20 --previous " + dir + "/f16.short.f32 --out " + out,
        "--model " + llada + " --tokens 1,2,3 --prompt-len 1 --out " + out}) {
    const testing::RunResult bad = testing::RunDllm("logits " + args);
    EXPECT_EQ(bad.exit_code, 2) << args;
    EXPECT_EQ(bad.err.find('\n'), bad.err.size() - 1) << bad.err;
  }
}

TEST(LogitsCommandTest, BadArgumentsGiveOneLine) {
  const std::string model = testing::TestDataDir() + "/models/tiny-llada-k-q4_k_m.gguf";
  for (const std::string& args :
       std::vector<std::string>{"--model " + model + " --tokens 1,x --out /tmp/x",
                                "--model " + model + " --tokens 999999 --out /tmp/x",
                                "--model /nonexistent --tokens 1 --out /tmp/x",
                                "--model " + model + " --tokens 1 --out /tmp/x --bogus 1",
                                "--model " + model + " --tokens 1,2 --rows 2 --out /tmp/x"}) {
    const testing::RunResult r = testing::RunDllm("logits " + args);
    EXPECT_EQ(r.exit_code, 2) << args;
    EXPECT_FALSE(r.signaled);
    EXPECT_EQ(r.err.find('\n'), r.err.size() - 1) << r.err;
  }
}

}  // namespace
}  // namespace dllm
