// `dllm tokenize` against llama.cpp's ids (tests/data/tokenizer): the
// default is llama-diffusion-cli's tokenization (ids_cli), --no-special the
// plain one (ids_plain), on the bailingmoe (LLaDA-8B) and GPT-2 vocabularies,
// texts given as arguments or as a JSON file.
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::RunDllm;
using testing::RunResult;

struct Golden {
  const char* vocab;   // under tests/data
  const char* golden;  // under tests/data/tokenizer
};

TEST(TokenizeCommandTest, MatchesLlamaCppIdForIdFromAJsonFile) {
  for (const Golden& g :
       {Golden{"tokenizer/vocab-bailingmoe.gguf", "llamacpp.bailingmoe.json"},
        Golden{"models/tiny-llada-k-q4_k_m.gguf", "llamacpp.gpt2-trunc8192.json"}}) {
    SCOPED_TRACE(g.golden);
    auto golden = ReadJsonFile(testing::TestDataDir() + "/tokenizer/" + g.golden);
    ASSERT_TRUE(golden.ok()) << golden.status();
    Json texts = Json::array();
    for (const Json& item : (*golden)["items"]) texts.push_back(item["text"].get<std::string>());
    const std::string file = testing::TempDir() + "/texts.json";
    testing::WriteFileOrDie(file, DumpJson(texts));
    const std::string model = testing::TestDataPath(g.vocab);
    for (const bool plain : {false, true}) {
      const RunResult r = RunDllm("tokenize --json --model " + model + " --file " + file +
                                  (plain ? " --no-special" : ""));
      ASSERT_EQ(r.exit_code, 0) << r.err;
      auto out = ParseJson(r.out);
      ASSERT_TRUE(out.ok()) << out.status();
      const Json& items = (*golden)["items"];
      ASSERT_EQ(out->size(), items.size());
      for (size_t i = 0; i < items.size(); ++i) {
        EXPECT_EQ(DumpJson((*out)[i]["ids"]), DumpJson(items[i][plain ? "ids_plain" : "ids_cli"]))
            << DumpJson(items[i]["text"]);
        if (plain) {
          EXPECT_EQ(DumpJson((*out)[i]["pieces_hex"]), DumpJson(items[i]["pieces_plain_hex"]));
        }
      }
    }
  }
}

TEST(TokenizeCommandTest, PrintsIdsAndPiecesAndRefusesBadInput) {
  const std::string model = testing::TestDataPath("tokenizer/vocab-bailingmoe.gguf");
  const RunResult r = RunDllm("tokenize --model " + model + " 'Hello world'");
  ASSERT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("50257 -> '<|startoftext|>'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("15496 -> 'Hello'"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("995 -> ' world'"), std::string::npos) << r.out;
  EXPECT_EQ(RunDllm("tokenize --model " + model).exit_code, 2);  // no text
  const std::string bad = testing::TempDir() + "/bad.json";
  testing::WriteFileOrDie(bad, "{\"not\": \"an array\"}");
  const RunResult not_array = RunDllm("tokenize --model " + model + " --file " + bad);
  EXPECT_EQ(not_array.exit_code, 2);
  EXPECT_NE(not_array.err.find("expected a JSON array of strings"), std::string::npos);
  EXPECT_EQ(RunDllm("tokenize --model /nonexistent.gguf x").exit_code, 2);
}

}  // namespace
}  // namespace dllm
