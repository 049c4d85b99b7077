#include "engine/tokenizer/bpe_tokenizer.h"

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/chat_template.h"
#include "engine/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/gguf_builder.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::GgufBuilder;
using testing::IsOk;
using testing::StatusIs;

// A vocabulary file and the llama.cpp golden produced from its model.
struct VocabCase {
  const char* name;
  const char* gguf;    // under tests/data
  const char* golden;  // under tests/data/tokenizer
};
constexpr VocabCase kVocabs[] = {
    {"gpt2", "tokenizer/vocab-gpt2.gguf", "llamacpp.gpt2.json"},
    {"qwen2", "tokenizer/vocab-qwen2.gguf", "llamacpp.qwen2.json"},
    {"gpt2-trunc8192", "models/tiny-llada-k-q4_k_m.gguf", "llamacpp.gpt2-trunc8192.json"},
    {"qwen2-trunc8192", "models/tiny-dream-k-q4_k_m.gguf", "llamacpp.qwen2-trunc8192.json"},
    // LLaDA's pre-tokenizer on the GPT-2 vocabulary (strings-bailingmoe.json).
    {"bailingmoe", "tokenizer/vocab-bailingmoe.gguf", "llamacpp.bailingmoe.json"},
};

struct Loaded {
  std::unique_ptr<GgufFile> file;
  std::unique_ptr<BpeTokenizer> tok;
};

// Loads each vocabulary once for the whole binary (the qwen2 one has 152k
// tokens and 151k merges).
const Loaded& Load(const std::string& rel) {
  static auto* cache = new std::map<std::string, Loaded>();
  auto it = cache->find(rel);
  if (it != cache->end()) return it->second;
  Loaded l;
  auto file = GgufFile::Open(testing::TestDataPath(rel));
  EXPECT_THAT(file.status(), IsOk());
  if (file.ok()) {
    l.file = std::make_unique<GgufFile>(std::move(*file));
    auto tok = BpeTokenizer::FromGguf(*l.file);
    EXPECT_THAT(tok.status(), IsOk()) << rel;
    if (tok.ok()) l.tok = std::make_unique<BpeTokenizer>(std::move(*tok));
  }
  return (*cache)[rel] = std::move(l);
}

Json LoadJson(const std::string& name) {
  auto j = ParseJson(testing::ReadFileOrDie(testing::TestDataDir() + "/tokenizer/" + name));
  EXPECT_THAT(j.status(), IsOk());
  return j.ok() ? *j : Json();
}

std::vector<int32_t> Ids(const Json& arr) {
  std::vector<int32_t> v;
  for (size_t i = 0; i < arr.size(); ++i) v.push_back(static_cast<int32_t>(arr[i].get<int64_t>()));
  return v;
}

std::string Escaped(const std::string& s) { return absl::CHexEscape(s); }

TEST(BpeTokenizerTest, LoadsVocabularies) {
  const BpeTokenizer* gpt2 = Load("tokenizer/vocab-gpt2.gguf").tok.get();
  ASSERT_NE(gpt2, nullptr);
  EXPECT_EQ(gpt2->n_vocab(), 50304);
  EXPECT_EQ(gpt2->n_merges(), 50000u);
  EXPECT_EQ(gpt2->pre_tokenizer(), PreTokenizer::kGpt2);
  EXPECT_EQ(gpt2->bos(), 50257);
  EXPECT_EQ(gpt2->eos(), 50256);
  EXPECT_EQ(gpt2->special().mask, 50258);
  EXPECT_TRUE(gpt2->add_bos());
  EXPECT_TRUE(gpt2->IsControl(50258));
  EXPECT_EQ(gpt2->special().StopIds(), std::vector<int32_t>{50256});
  EXPECT_EQ(gpt2->TokenPiece(50259), "");  // [PAD50259] is UNUSED

  const BpeTokenizer* qwen = Load("tokenizer/vocab-qwen2.gguf").tok.get();
  ASSERT_NE(qwen, nullptr);
  EXPECT_EQ(qwen->n_vocab(), 152064);
  EXPECT_EQ(qwen->pre_tokenizer(), PreTokenizer::kQwen2);
  EXPECT_FALSE(qwen->add_bos());
  EXPECT_EQ(qwen->special().mask, 151666);
  EXPECT_EQ(qwen->special().pad, 151643);
  EXPECT_TRUE(qwen->IsControl(151645));  // <|im_end|>, llama.cpp's end-like text
  // llama.cpp's override: FIM tokens are control even though typed user-defined.
  EXPECT_TRUE(qwen->IsControl(qwen->FindToken("<|fim_prefix|>")));
  EXPECT_EQ(qwen->Type(qwen->FindToken("<tool_call>")), TokenType::kUserDefined);
}

TEST(BpeTokenizerTest, MatchesLlamaCppGoldens) {
  for (const VocabCase& vc : kVocabs) {
    SCOPED_TRACE(vc.name);
    const BpeTokenizer* tok = Load(vc.gguf).tok.get();
    ASSERT_NE(tok, nullptr);
    const Json golden = LoadJson(vc.golden);
    const Json& items = golden["items"];
    ASSERT_GE(items.size(), 30u);
    for (size_t i = 0; i < items.size(); ++i) {
      const Json& it = items[i];
      const std::string& text = it["text"].get<std::string>();
      SCOPED_TRACE(Escaped(text));
      const std::vector<int32_t> plain = Ids(it["ids_plain"]);
      EXPECT_EQ(tok->Encode(text, false, false), plain);
      EXPECT_EQ(tok->Encode(text, true, true), Ids(it["ids_cli"]));
      const Json& hex = it["pieces_plain_hex"];
      ASSERT_EQ(hex.size(), plain.size());
      for (size_t k = 0; k < plain.size(); ++k) {
        EXPECT_EQ(absl::BytesToHexString(tok->TokenPiece(plain[k])), hex[k].get<std::string>());
      }
      DecodeOptions llama;
      llama.clean_spaces = true;
      auto detok = tok->Decode(plain, llama);
      ASSERT_THAT(detok.status(), IsOk());
      EXPECT_EQ(*detok, it["detok_plain"].get<std::string>());
      auto exact = tok->Decode(plain);
      ASSERT_THAT(exact.status(), IsOk());
      EXPECT_EQ(*exact, text);  // round trip
    }
  }
}

// With the shared reference folder: the models the goldens were made from
// (not only their extracted vocabularies) give the same ids.
TEST(BpeTokenizerTest, SharedModelsMatchLlamaCppGoldens) {
  const std::optional<std::string> shared = testing::SharedDir();
  if (!shared) GTEST_SKIP() << "no ../shared";
  for (const VocabCase& vc : kVocabs) {
    const Json golden = LoadJson(vc.golden);
    const std::string path = *shared + "/models/" + golden["model_file"].get<std::string>();
    SCOPED_TRACE(path);
    auto file = GgufFile::Open(path);
    ASSERT_THAT(file.status(), IsOk());
    auto tok = BpeTokenizer::FromGguf(*file);
    ASSERT_THAT(tok.status(), IsOk());
    EXPECT_EQ(tok->n_vocab(), golden["n_vocab"].get<int64_t>());
    EXPECT_EQ(tok->special().mask, golden["mask_token"].get<int64_t>());
    const Json& items = golden["items"];
    for (size_t i = 0; i < items.size(); ++i) {
      const std::string& text = items[i]["text"].get<std::string>();
      EXPECT_EQ(tok->Encode(text, false, false), Ids(items[i]["ids_plain"])) << Escaped(text);
      EXPECT_EQ(tok->Encode(text, true, true), Ids(items[i]["ids_cli"])) << Escaped(text);
    }
  }
}

TEST(BpeTokenizerTest, AgreesWithHuggingFaceQwenExceptNormalization) {
  const BpeTokenizer* tok = Load("tokenizer/vocab-qwen2.gguf").tok.get();
  ASSERT_NE(tok, nullptr);
  const Json npm = LoadJson("npm.qwen3.json");
  const Json& items = npm["items"];
  ASSERT_EQ(items.size(), 43u);
  int agree = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    const std::string& text = items[i]["text"].get<std::string>();
    // As the reference comparison: llama.cpp with special tokens parsed.
    const std::vector<int32_t> ours = tok->Encode(text, true, true);
    if (ours == Ids(items[i]["ids"])) {
      ++agree;
    } else {
      // The one known difference: HF applies NFC ("e" + U+0301 -> "é"),
      // llama.cpp and we do not.
      EXPECT_EQ(text, "cafe\xcc\x81 (decomposed e + combining acute)");
      EXPECT_EQ(ours, (std::vector<int32_t>{924, 1859, 53839, 320, 450, 92734, 384, 488, 34171,
                                            29783, 8}));
    }
  }
  EXPECT_EQ(agree, 42);
}

TEST(BpeTokenizerTest, StreamingDecoderMatchesDecodeOneIdAtATime) {
  for (const VocabCase& vc : kVocabs) {
    SCOPED_TRACE(vc.name);
    const BpeTokenizer* tok = Load(vc.gguf).tok.get();
    ASSERT_NE(tok, nullptr);
    const Json golden = LoadJson(vc.golden);
    const Json& items = golden["items"];
    for (size_t i = 0; i < items.size(); ++i) {
      const std::vector<int32_t> ids = Ids(items[i]["ids_cli"]);
      SCOPED_TRACE(Escaped(items[i]["text"].get<std::string>()));
      StreamingDecoder dec(tok);
      std::string streamed;
      for (int32_t id : ids) {
        auto chunk = dec.Push(id);
        ASSERT_THAT(chunk.status(), IsOk());
        EXPECT_EQ(SanitizeUtf8(*chunk), *chunk) << "split or invalid UTF-8 emitted";
        streamed += *chunk;
      }
      EXPECT_EQ(dec.pending_bytes(), 0u);
      streamed += dec.Finish();
      auto whole = tok->Decode(ids);
      ASSERT_THAT(whole.status(), IsOk());
      EXPECT_EQ(streamed, *whole);
    }
  }
}

TEST(BpeTokenizerTest, StreamingDecoderHoldsPartialCharacters) {
  const BpeTokenizer* tok = Load("tokenizer/vocab-gpt2.gguf").tok.get();
  ASSERT_NE(tok, nullptr);
  // Byte tokens for the two bytes of "é" (C3 A9): "Ã" and "©" in GPT-2's map.
  const int32_t c3 = tok->FindToken("\xc3\x83");
  const int32_t a9 = tok->FindToken("\xc2\xa9");
  const int32_t a = tok->FindToken("a");
  ASSERT_GE(c3, 0);
  ASSERT_GE(a9, 0);
  ASSERT_EQ(tok->TokenPiece(c3), "\xc3");
  StreamingDecoder dec(tok);
  EXPECT_EQ(*dec.Push(c3), "");
  EXPECT_EQ(dec.pending_bytes(), 1u);
  EXPECT_EQ(*dec.Push(a9), "\xc3\xa9");
  // A lead byte followed by ASCII is proven invalid at once.
  EXPECT_EQ(*dec.Push(c3), "");
  EXPECT_EQ(*dec.Push(a),
            "\xef\xbf\xbd"
            "a");
  // A trailing incomplete character is flushed by Finish.
  EXPECT_EQ(*dec.Push(c3), "");
  EXPECT_EQ(dec.Finish(), "\xef\xbf\xbd");
  EXPECT_THAT(dec.Push(-1).status(), StatusIs(absl::StatusCode::kOutOfRange, "-1"));
  EXPECT_THAT(dec.Push(tok->n_vocab()).status(), StatusIs(absl::StatusCode::kOutOfRange, ""));
}

TEST(BpeTokenizerTest, SanitizeUtf8ReplacesMaximalSubparts) {
  EXPECT_EQ(SanitizeUtf8("ok"), "ok");
  EXPECT_EQ(SanitizeUtf8("\x80"), "\xef\xbf\xbd");
  EXPECT_EQ(SanitizeUtf8("\xe2\x82"), "\xef\xbf\xbd");              // truncated
  EXPECT_EQ(SanitizeUtf8("\xe0\x80"), "\xef\xbf\xbd\xef\xbf\xbd");  // overlong: 2 subparts
  EXPECT_EQ(SanitizeUtf8("\xed\xa0\x80"), "\xef\xbf\xbd\xef\xbf\xbd\xef\xbf\xbd");  // surrogate
  EXPECT_EQ(SanitizeUtf8("\xf0\x9f\x98\x80"), "\xf0\x9f\x98\x80");
}

TEST(BpeTokenizerTest, DecodeRendersSpecialTokensAndRejectsBadIds) {
  const BpeTokenizer* tok = Load("tokenizer/vocab-qwen2.gguf").tok.get();
  ASSERT_NE(tok, nullptr);
  const std::vector<int32_t> ids = tok->Encode("<|im_start|>user\nhi<|im_end|>", false, true);
  EXPECT_EQ(*tok->Decode(ids), "<|im_start|>user\nhi<|im_end|>");
  DecodeOptions quiet;
  quiet.render_special = false;
  EXPECT_EQ(*tok->Decode(ids, quiet), "user\nhi");
  EXPECT_THAT(tok->Decode({1, 152064}).status(), StatusIs(absl::StatusCode::kOutOfRange, "152064"));
}

TEST(BpeTokenizerTest, UserDefinedTokensMatchWithoutParseSpecial) {
  const BpeTokenizer* tok = Load("tokenizer/vocab-qwen2.gguf").tok.get();
  ASSERT_NE(tok, nullptr);
  const int32_t tool = tok->FindToken("<tool_call>");
  EXPECT_EQ(tok->Encode("<tool_call>", false, false), std::vector<int32_t>{tool});
  // A control token is plain text unless parse_special.
  EXPECT_GT(tok->Encode("<|im_end|>", false, false).size(), 1u);
  EXPECT_EQ(tok->Encode("<|im_end|>", false, true), std::vector<int32_t>{151645});
}

// Random bytes and random code points (fixed seed) round-trip through every
// vocabulary, with and without special-token parsing.
TEST(BpeTokenizerTest, RandomTextRoundTrips) {
  std::mt19937 rng(1234);
  static constexpr char kPunct[] = " \t\n\r'aZ09.<|>";
  std::vector<std::string> texts;
  for (int n = 0; n < 200; ++n) {
    std::string s;
    const int len = static_cast<int>(rng() % 64);
    for (int k = 0; k < len; ++k) {
      switch (rng() % 4) {
        case 0:
          s.push_back(static_cast<char>(rng() % 256));
          break;
        case 1:
          s.push_back(kPunct[rng() % (sizeof(kPunct) - 1)]);  // not the final NUL
          break;
        default: {
          uint32_t cp = rng() % 0x30000;
          if (cp >= 0xD800 && cp <= 0xDFFF) cp = 'x';
          AppendUtf8(cp, &s);
        }
      }
    }
    texts.push_back(s);
  }
  texts.push_back(std::string(5000, 'a'));
  texts.push_back(std::string(3000, ' ') + "x");
  texts.push_back("<|im_start|><|im_start|><|endoftext|>x<|endoftext|");
  for (const VocabCase& vc : kVocabs) {
    SCOPED_TRACE(vc.name);
    const BpeTokenizer* tok = Load(vc.gguf).tok.get();
    ASSERT_NE(tok, nullptr);
    for (const std::string& s : texts) {
      EXPECT_EQ(*tok->Decode(tok->Encode(s, false, false)), s) << Escaped(s);
      EXPECT_EQ(*tok->Decode(tok->Encode(s, false, true)), s) << Escaped(s);
    }
  }
}

TEST(BpeTokenizerTest, InvalidUtf8RoundTrips) {
  const BpeTokenizer* tok = Load("tokenizer/vocab-qwen2.gguf").tok.get();
  ASSERT_NE(tok, nullptr);
  const std::string bytes = "a\xff\xc3 b\x80\xe2\x82";
  EXPECT_EQ(*tok->Decode(tok->Encode(bytes, false, false)), bytes);
}

// The llama-diffusion-cli runs: ChatML-wrapped prompt ids and the decoded output.
TEST(BpeTokenizerTest, ReproducesDiffusionCliPrompts) {
  const Json runs = LoadJson("cli_prompts.json");
  const std::map<std::string, std::string> vocab_of = {
      {"tiny-llada-f32", "tokenizer/vocab-gpt2.gguf"},
      {"tiny-dream-f32", "tokenizer/vocab-qwen2.gguf"},
      {"tiny-llada-k-q4_k_m", "models/tiny-llada-k-q4_k_m.gguf"},
      {"tiny-dream-k-q4_k_m", "models/tiny-dream-k-q4_k_m.gguf"}};
  ASSERT_EQ(runs.size(), 8u);
  for (const auto& [name, run] : runs.items()) {
    SCOPED_TRACE(name);
    const BpeTokenizer* tok = Load(vocab_of.at(name.substr(0, name.find('.')))).tok.get();
    ASSERT_NE(tok, nullptr);
    const std::vector<int32_t> ids =
        EncodeChat(*tok, ChatTemplate{}, {{"user", run["prompt"].get<std::string>()}});
    EXPECT_EQ(ids, Ids(run["prompt_tokens"]));
    DecodeOptions llama;
    llama.clean_spaces = true;
    llama.render_special = false;
    // The recorded text went through a UTF-8 decoder that replaced the
    // incomplete characters some runs end words with.
    EXPECT_EQ(SanitizeUtf8(*tok->Decode(Ids(run["generated_tokens"]), llama)),
              run["cli_output_text"].get<std::string>());
  }
}

// --- Hostile and malformed tokenizer sections ---

// A four-token vocabulary; `skip` leaves one key out so a test can set it.
GgufBuilder SmallVocab(const std::string& skip = "") {
  GgufBuilder b;
  b.Str("general.architecture", "llada");
  if (skip != "tokenizer.ggml.model") b.Str("tokenizer.ggml.model", "gpt2");
  if (skip != "tokenizer.ggml.pre") b.Str("tokenizer.ggml.pre", "gpt-2");
  if (skip != "tokenizer.ggml.tokens") {
    b.StrArray("tokenizer.ggml.tokens", {"a", "b", "ab", "<|eos|>"});
  }
  if (skip != "tokenizer.ggml.token_type") b.I32Array("tokenizer.ggml.token_type", {1, 1, 1, 3});
  if (skip != "tokenizer.ggml.merges") b.StrArray("tokenizer.ggml.merges", {"a b"});
  b.U32("tokenizer.ggml.eos_token_id", 3);
  return b;
}

absl::Status LoadStatus(const GgufBuilder& b) {
  const std::string bytes = b.Build();
  auto file =
      GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "vocab.gguf");
  if (!file.ok()) return file.status();
  return BpeTokenizer::FromGguf(*file).status();
}

TEST(BpeTokenizerTest, SmallVocabularyDropsBytesWithoutTokens) {
  const std::string bytes = SmallVocab().Build();
  auto file = GgufFile::Parse(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "v");
  ASSERT_THAT(file.status(), IsOk());
  auto tok = BpeTokenizer::FromGguf(*file);
  ASSERT_THAT(tok.status(), IsOk());
  EXPECT_EQ(tok->Encode("ab", false, false), std::vector<int32_t>{2});
  EXPECT_EQ(tok->Encode("abc ab", true, true), (std::vector<int32_t>{2, 2}));  // no "c", " " tokens
  EXPECT_EQ(tok->Encode("a<|eos|>", false, true), (std::vector<int32_t>{0, 3}));
}

TEST(BpeTokenizerTest, RejectsMalformedTokenizerSections) {
  using absl::StatusCode;
  EXPECT_THAT(
      LoadStatus(
          SmallVocab("tokenizer.ggml.token_type").I32Array("tokenizer.ggml.token_type", {1, 1, 1})),
      StatusIs(StatusCode::kInvalidArgument, "3 entries for 4 tokens"));
  EXPECT_THAT(
      LoadStatus(
          SmallVocab("tokenizer.ggml.merges").StrArray("tokenizer.ggml.merges", {"a b", "a c"})),
      StatusIs(StatusCode::kInvalidArgument, "merge 1 'a c': 'c' is not a token"));
  EXPECT_THAT(
      LoadStatus(SmallVocab("tokenizer.ggml.merges").StrArray("tokenizer.ggml.merges", {"b a"})),
      StatusIs(StatusCode::kInvalidArgument, "merge 0 'b a': the result 'ba'"));
  EXPECT_THAT(
      LoadStatus(SmallVocab("tokenizer.ggml.merges").StrArray("tokenizer.ggml.merges", {"ab"})),
      StatusIs(StatusCode::kInvalidArgument, "merge 0 'ab': no space"));
  EXPECT_THAT(
      LoadStatus(SmallVocab("tokenizer.ggml.merges").StrArray("tokenizer.ggml.merges", {" "})),
      StatusIs(StatusCode::kInvalidArgument, "no space"));
  EXPECT_THAT(LoadStatus(SmallVocab("tokenizer.ggml.tokens")
                             .StrArray("tokenizer.ggml.tokens", {"a", "b", "ab", "a"})),
              StatusIs(StatusCode::kInvalidArgument, "token 3 'a' repeats token 0"));
  EXPECT_THAT(LoadStatus(SmallVocab("tokenizer.ggml.tokens").StrArray("tokenizer.ggml.tokens", {})),
              StatusIs(StatusCode::kInvalidArgument, "no tokens"));
  EXPECT_THAT(LoadStatus(SmallVocab().U32("tokenizer.ggml.bos_token_id", 4)),
              StatusIs(StatusCode::kInvalidArgument, "bos_token_id: token id 4 is outside"));
  EXPECT_THAT(LoadStatus(SmallVocab().Bool("tokenizer.ggml.add_bos_token", true)),
              StatusIs(StatusCode::kInvalidArgument, "no bos_token_id"));
  EXPECT_THAT(LoadStatus(SmallVocab("tokenizer.ggml.pre").Str("tokenizer.ggml.pre", "falcon")),
              StatusIs(StatusCode::kUnimplemented, "'falcon'"));
  EXPECT_THAT(LoadStatus(SmallVocab("tokenizer.ggml.model").Str("tokenizer.ggml.model", "llama")),
              StatusIs(StatusCode::kUnimplemented, "'llama'"));
  EXPECT_THAT(LoadStatus(SmallVocab("tokenizer.ggml.tokens").U32("tokenizer.ggml.tokens", 7)),
              StatusIs(StatusCode::kInvalidArgument, "tokenizer.ggml.tokens"));
  EXPECT_THAT(
      LoadStatus(
          SmallVocab("tokenizer.ggml.token_type").StrArray("tokenizer.ggml.token_type", {"x"})),
      StatusIs(StatusCode::kInvalidArgument, "tokenizer.ggml.token_type"));
  GgufBuilder no_tokens;
  no_tokens.Str("tokenizer.ggml.model", "gpt2").Str("tokenizer.ggml.pre", "qwen2");
  EXPECT_THAT(LoadStatus(no_tokens), StatusIs(StatusCode::kNotFound, "tokenizer.ggml.tokens"));
  GgufBuilder no_pre;
  no_pre.Str("tokenizer.ggml.model", "gpt2");
  EXPECT_THAT(LoadStatus(no_pre), StatusIs(StatusCode::kUnimplemented, "tokenizer.ggml.pre"));
}

// Gemma 4's SentencePiece-style BPE (DiffusionGemma's vocabulary, issue
// #27) on the reference's tiny diffusion-gemma file: every encoding the
// pinned llama.cpp made of these texts (tests/data/logits-dg/tokenizer.json:
// spaces as U+2581, splits at newline runs only, BOS always, characters
// without a token dropped when there are no byte tokens).
TEST(BpeTokenizerTest, Gemma4EncodesAsTheReference) {
  const std::string dir = testing::TestDataDir() + "/logits-dg";
  absl::StatusOr<GgufFile> file = GgufFile::Open(dir + "/tiny-diffusion-gemma-f16.gguf");
  ASSERT_TRUE(file.ok()) << file.status();
  absl::StatusOr<BpeTokenizer> tok = BpeTokenizer::FromGguf(*file);
  ASSERT_TRUE(tok.ok()) << tok.status();
  EXPECT_EQ(tok->pre_tokenizer(), PreTokenizer::kGemma4);
  absl::StatusOr<Json> cases = ReadJsonFile(dir + "/tokenizer.json");
  ASSERT_TRUE(cases.ok()) << cases.status();
  ASSERT_GE(cases->size(), 20u);
  for (const Json& c : *cases) {
    const std::string text = c["text"].get<std::string>();
    const bool special = c["add_special"].get<bool>();
    SCOPED_TRACE(absl::CEscape(text) + (special ? " (special)" : ""));
    const std::vector<int32_t> ids = tok->Encode(text, special, c["parse_special"].get<bool>());
    EXPECT_EQ(ids, c["ids"].get<std::vector<int32_t>>());
  }
  // Pieces render U+2581 as a space: text made of known characters comes back.
  for (const char* text :
       {"the cat sat on", "a\n\nb", "sat\n\n\n  on", "The Cat Sat On The Mat."}) {
    EXPECT_EQ(*tok->Decode(tok->Encode(text, false, false)), text);
  }
}

}  // namespace
}  // namespace dllm
