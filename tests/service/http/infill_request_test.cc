// ParseInfillRequest: llama-server's /infill body turned into the canvas
// (prompt ids, suffix ids, span), trimmed to the context at the far ends,
// with every refusal naming its field; and response_fields' selection.
#include "service/http/infill_request.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "service/http/api_error.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using ::testing::ElementsAre;

class InfillRequestTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    auto model = Model::Load(testing::TestDataDir() + "/models/tinycode-dream-q4_k_m.gguf",
                             {IsaLevel::kScalar});
    ASSERT_TRUE(model.ok()) << model.status();
    model_ = new std::shared_ptr<const Model>(*model);
  }
  static const Model& model() { return **model_; }
  static absl::StatusOr<InfillRequest> Parse(const Json& body) {
    return ParseInfillRequest(body, model());
  }
  static std::vector<int32_t> Encode(const std::string& text) {
    return model().tokenizer().Encode(text, false, false);
  }
  static std::vector<int32_t> Ids(const std::vector<uint32_t>& ids) {
    return {ids.begin(), ids.end()};
  }
  // The refusal's message (it starts with the body field).
  static std::string ErrorOf(const Json& body) {
    absl::StatusOr<InfillRequest> r = Parse(body);
    EXPECT_FALSE(r.ok()) << body.dump();
    return r.ok() ? "" : ApiErrorFromStatus(r.status(), OpenAiEndpoint::kInfill).message;
  }
  static std::shared_ptr<const Model>* model_;
};
std::shared_ptr<const Model>* InfillRequestTest::model_ = nullptr;

TEST_F(InfillRequestTest, TheCanvasIsPrefixPromptSpanSuffix) {
  auto r = Parse({{"input_prefix", "def f(x):\n"},
                  {"input_suffix", "\nprint(f(2))\n"},
                  {"prompt", "    return "},
                  {"n_predict", 12},
                  {"temperature", 0.5},
                  {"seed", 3},
                  {"steps", 6},
                  {"stop", {"\n\n"}},
                  {"n_indent", 4},
                  {"cache_prompt", true},
                  {"some_new_field", 1}});
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int32_t> prompt = Encode("def f(x):\n");
  const std::vector<int32_t> line = model().tokenizer().Encode("    return ", false, true);
  prompt.insert(prompt.end(), line.begin(), line.end());
  EXPECT_EQ(Ids(r->generate.prompt.token_ids), prompt);
  EXPECT_EQ(Ids(r->generate.prompt.suffix_token_ids), Encode("\nprint(f(2))\n"));
  EXPECT_EQ(r->generate.diffusion.gen_length, 12u);
  EXPECT_EQ(r->generate.diffusion.steps, 6u);
  EXPECT_EQ(r->generate.sampling.seed, 3u);
  EXPECT_FLOAT_EQ(r->generate.sampling.temperature, 0.5f);
  EXPECT_EQ(r->stop, std::vector<std::string>{"\n\n"});
  EXPECT_EQ(r->n_indent, 4);
  EXPECT_FALSE(r->trimmed.any());
  // Unknown to llama-server too: named for the log. cache_prompt has an
  // effect now (issue #40): the dual cache, and the span in blocks of 12.
  EXPECT_THAT(r->ignored, ::testing::UnorderedElementsAre("some_new_field"));
  EXPECT_EQ(r->generate.diffusion.cache, CacheMode::kDual);
  EXPECT_EQ(r->generate.diffusion.block_length, 12u);  // 12 / 12 blocks divides 6 steps
}

TEST_F(InfillRequestTest, NPredictIsTheSpanAndZeroIsAWarmUp) {
  auto warm = Parse({{"input_prefix", ""}, {"input_suffix", ""}, {"n_predict", 0}});
  ASSERT_TRUE(warm.ok()) << warm.status();
  EXPECT_TRUE(warm->warm_up);
  // -1 (llama-server's "until done") is dllm's default span.
  auto unlimited = Parse({{"input_prefix", "x"}, {"input_suffix", ""}, {"n_predict", -1}});
  ASSERT_TRUE(unlimited.ok()) << unlimited.status();
  EXPECT_EQ(unlimited->n_predict, 128);
  EXPECT_EQ(unlimited->generate.prompt.suffix_input, PromptInput::kNone);
  // max_tokens is n_predict's alias.
  auto alias = Parse({{"input_prefix", "x"}, {"input_suffix", "y"}, {"max_tokens", 5}});
  ASSERT_TRUE(alias.ok());
  EXPECT_EQ(alias->n_predict, 5);
  const int64_t n_ctx = model().config().n_ctx_train;
  EXPECT_THAT(ErrorOf({{"input_prefix", "x"}, {"input_suffix", ""}, {"n_predict", n_ctx}}),
              ::testing::StartsWith("n_predict: 1024 exceeds the limit of 1023"));
  EXPECT_THAT(ErrorOf({{"input_prefix", ""}, {"input_suffix", "y"}, {"n_predict", 4}}),
              ::testing::StartsWith("input_prefix:"));
}

TEST_F(InfillRequestTest, WhatDoesNotFitIsTrimmedAtTheFarEnds) {
  std::string prefix, suffix;
  for (int i = 0; i < 600; ++i) prefix += "a" + std::to_string(i) + " = 1\n";
  for (int i = 0; i < 600; ++i) suffix += "b" + std::to_string(i) + " = 2\n";
  auto r = Parse({{"input_prefix", prefix},
                  {"input_suffix", suffix},
                  {"n_predict", 24},
                  {"input_extra", {{{"text", "import os\n"}, {"filename", "u.py"}}}}});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<int32_t> p = Encode(prefix), s = Encode(suffix);
  const std::vector<int32_t> kept_prompt = Ids(r->generate.prompt.token_ids);
  const std::vector<int32_t> kept_suffix = Ids(r->generate.prompt.suffix_token_ids);
  // The canvas fills the context exactly: room 1000, the prefix's share 3/4.
  EXPECT_EQ(kept_prompt.size() + kept_suffix.size() + 24, 1024u);
  EXPECT_EQ(kept_prompt.size(), 750u);
  // The prefix keeps its end (next to the span), the suffix its start.
  EXPECT_TRUE(std::equal(kept_prompt.begin(), kept_prompt.end(), p.end() - 750));
  EXPECT_TRUE(std::equal(kept_suffix.begin(), kept_suffix.end(), s.begin()));
  EXPECT_EQ(r->trimmed.prefix, static_cast<int>(p.size()) - 750);
  EXPECT_EQ(r->trimmed.suffix, static_cast<int>(s.size() - kept_suffix.size()));
  EXPECT_GT(r->trimmed.extra, 0);  // no room was left for the context chunk
  // A short suffix lets the prefix take the rest.
  auto short_suffix = Parse({{"input_prefix", prefix}, {"input_suffix", "x\n"}, {"n_predict", 24}});
  ASSERT_TRUE(short_suffix.ok());
  EXPECT_EQ(short_suffix->generate.prompt.token_ids.size() +
                short_suffix->generate.prompt.suffix_token_ids.size(),
            1000u);
  EXPECT_EQ(short_suffix->trimmed.suffix, 0);
}

// Issue #34 R5: text beyond what the trim could keep is cut before it is
// tokenized, and what is kept is what tokenizing it whole and trimming
// keeps; the reply counts the bytes cut. Characters are never split.
TEST_F(InfillRequestTest, TextTheTrimCannotKeepIsCutBeforeTokenizing) {
  std::string prefix, suffix, old_chunk;
  for (int i = 0; i < 40000; ++i) prefix += "caf\u00e9_" + std::to_string(i) + " = 1\n";
  for (int i = 0; i < 40000; ++i) suffix += "b\u00e9" + std::to_string(i) + " = 2\n";
  for (int i = 0; i < 40000; ++i) old_chunk += "old_" + std::to_string(i) + "\n";
  ASSERT_GT(prefix.size(), 2 * 1024 * model().tokenizer().max_token_bytes());
  auto r = Parse({{"input_prefix", prefix},
                  {"input_suffix", suffix},
                  {"n_predict", 24},
                  {"input_extra",
                   {{{"text", old_chunk}, {"filename", "old.py"}},
                    {{"text", old_chunk}, {"filename", "newer.py"}}}}});
  ASSERT_TRUE(r.ok()) << r.status();
  const std::vector<int32_t> p = Encode(prefix), s = Encode(suffix);
  const std::vector<int32_t> kept_prompt = Ids(r->generate.prompt.token_ids);
  const std::vector<int32_t> kept_suffix = Ids(r->generate.prompt.suffix_token_ids);
  ASSERT_EQ(kept_prompt.size(), 750u);
  EXPECT_TRUE(std::equal(kept_prompt.begin(), kept_prompt.end(), p.end() - 750));
  EXPECT_TRUE(std::equal(kept_suffix.begin(), kept_suffix.end(), s.begin()));
  EXPECT_GT(r->trimmed.prefix_bytes, 0);
  EXPECT_GT(r->trimmed.suffix_bytes, 0);
  // The older chunk is cut whole: the newer one alone fills the budget.
  EXPECT_GE(r->trimmed.extra_bytes, static_cast<int64_t>(old_chunk.size()));
  EXPECT_TRUE(r->trimmed.any());
  // The same as a mixed array of parts.
  auto parts = Parse({{"input_prefix",
                       {prefix.substr(0, prefix.size() / 2), 42, prefix.substr(prefix.size() / 2)}},
                      {"input_suffix", suffix},
                      {"n_predict", 24}});
  ASSERT_TRUE(parts.ok()) << parts.status();
  EXPECT_EQ(Ids(parts->generate.prompt.token_ids), kept_prompt);
}

// Issue #34 R9: a span that leaves one position of the context gave it to
// the suffix, then refused the request calling its (non-empty) prefix
// empty. The prefix keeps the token the span needs before it; only a
// prefix that is empty is called so.
TEST_F(InfillRequestTest, ThePrefixKeepsTheTokenBeforeTheSpan) {
  ASSERT_FALSE(model().config().tokens.add_bos) << "the canvas would start with BOS";
  const int64_t n_ctx = model().config().n_ctx_train;
  auto r = Parse({{"input_prefix", "def f(x):"},
                  {"input_suffix", "\nprint(f(2))\n"},
                  {"n_predict", n_ctx - 1}});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(Ids(r->generate.prompt.token_ids), ElementsAre(Encode("def f(x):").back()));
  EXPECT_EQ(r->generate.prompt.suffix_token_ids.size(), 0u);
  EXPECT_THAT(ErrorOf({{"input_prefix", ""}, {"input_suffix", "x"}, {"n_predict", 8}}),
              ::testing::HasSubstr("input_prefix: empty"));
}

TEST_F(InfillRequestTest, ExtraContextComesFirstInTheRepoLayout) {
  // tinycode's (Qwen2) vocabulary has the repo-level tokens: llama-server's
  // layout, [<|repo_name|>]myproject\n, <|file_sep|>name\ntext per chunk,
  // <|file_sep|>filename\n for the file being edited.
  const int32_t sep = model().tokenizer().FindToken("<|file_sep|>");
  const int32_t repo = model().tokenizer().FindToken("<|repo_name|>");
  ASSERT_GE(sep, 0);
  auto r = Parse({{"input_prefix", "x = "},
                  {"input_suffix", ""},
                  {"n_predict", 4},
                  {"input_extra", {{{"text", "y = 1\n"}, {"time", 5}}}}});
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<int32_t> want;
  const auto add = [&](const std::vector<int32_t>& ids) {
    want.insert(want.end(), ids.begin(), ids.end());
  };
  if (repo >= 0) {
    want.push_back(repo);
    add(Encode("myproject\n"));
  }
  want.push_back(sep);
  add(Encode("tmp\n"));  // no filename: llama-server's "tmp"
  add(Encode("y = 1\n"));
  want.push_back(sep);
  add(Encode("filename\n"));
  add(Encode("x = "));
  EXPECT_EQ(Ids(r->generate.prompt.token_ids), want);
}

TEST_F(InfillRequestTest, BadFieldsAreNamed) {
  const Json base = {{"input_prefix", "x"}, {"input_suffix", "y"}, {"n_predict", 4}};
  const std::pair<Json, std::string> cases[] = {
      {{{"input_extra", "x"}}, "input_extra:"},
      {{{"input_extra", {1}}}, "input_extra[0]:"},
      {{{"input_extra", {{{"filename", "a"}}}}}, "input_extra[0].text:"},
      {{{"input_extra", {{{"text", "a"}, {"filename", 2}}}}}, "input_extra[0].filename:"},
      {{{"input_suffix", {1, -2}}}, "input_suffix[1]:"},
      {{{"input_prefix", 2}}, "input_prefix:"},
      {{{"prompt", 2}}, "prompt:"},
      {{{"n_indent", -1}}, "n_indent:"},
      {{{"n_cmpl", 5}}, "n_cmpl:"},
      {{{"n_cmpl", 2}, {"stream", true}}, "n_cmpl:"},
      {{{"stop", {1}}}, "stop:"},
      {{{"min_p", 0.05}}, "min_p:"},
      {{{"grammar", "root ::= x"}}, "grammar:"},
      {{{"temperature", -1}}, "temperature:"},
  };
  for (const auto& [extra, field] : cases) {
    Json body = base;
    for (const auto& [k, v] : extra.items()) body[k] = v;
    EXPECT_THAT(ErrorOf(body), ::testing::StartsWith(field)) << body.dump();
  }
  // Missing parts: llama-server needs both.
  EXPECT_THAT(ErrorOf({{"input_suffix", "y"}}), ::testing::StartsWith("input_prefix: is required"));
  // Neutral values of unsupported samplers pass.
  Json neutral = base;
  neutral["min_p"] = 0;
  neutral["lora"] = Json::array();
  EXPECT_TRUE(Parse(neutral).ok());
}

TEST(SelectResponseFieldsTest, PathsBecomeFlatKeysInTheOrderAsked) {
  const Json whole = {{"content", "x"}, {"timings", {{"prompt_n", 3}, {"predicted_n", 2}}}};
  const Json picked = SelectResponseFields(whole, {"timings/predicted_n", "content", "nope", ""});
  EXPECT_EQ(picked.dump(), R"({"timings/predicted_n":2,"content":"x"})");
}

}  // namespace
}  // namespace dllm
