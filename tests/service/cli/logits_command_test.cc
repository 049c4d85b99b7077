// `dllm logits` writes exactly what Forward() computes, in the documented
// layout, and rejects bad arguments with a one-line error.
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
