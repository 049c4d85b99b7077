// Chat templates: the real templates of each family in tests/data/
// chat_templates rendered by Python's jinja2 (as transformers does) are the
// reference, byte for byte, on multi-turn conversations with and without a
// system turn; LLaDA-MoE's format is checked against llama.cpp's built-in
// "bailing2" renderer, since its authors' Jinja text was not available.
#include "engine/tokenizer/chat_template.h"

#include <cstdio>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "gtest/gtest.h"
#include "service/json/json.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::IsOk;

std::string TemplateDir() { return testing::TestDataDir() + "/chat_templates"; }

std::vector<std::vector<ChatMessage>> Conversations(
    const std::string& file = "conversations.json") {
  auto j = ReadJsonFile(TemplateDir() + "/" + file);
  EXPECT_TRUE(j.ok()) << j.status();
  std::vector<std::vector<ChatMessage>> out;
  for (const Json& conv : *j) {
    out.emplace_back();
    for (const Json& m : conv) {
      out.back().push_back({m["role"].get<std::string>(), m["content"].get<std::string>()});
    }
  }
  return out;
}

// jinja2's renderings of every conversation through `template_file`
// (tests/tools/render_chat_template.py, Debian's python3-jinja2).
std::vector<std::string> RenderWithJinja2(const std::string& template_file, const std::string& bos,
                                          const std::string& eos,
                                          const std::string& file = "conversations.json") {
  Json request = Json::object();
  request["template"] = TemplateDir() + "/" + template_file;
  request["bos_token"] = bos;
  request["eos_token"] = eos;
  auto conversations = ReadJsonFile(TemplateDir() + "/" + file);
  EXPECT_TRUE(conversations.ok());
  request["conversations"] = *conversations;
  const std::string dir = testing::TempDir();
  testing::WriteFileOrDie(dir + "/request.json", DumpJson(request));
  const std::string cmd = "/usr/bin/python3 " + std::string(DLLM_SOURCE_DIR) +
                          "/tests/tools/render_chat_template.py < " + dir + "/request.json > " +
                          dir + "/out.json";
  EXPECT_EQ(std::system(cmd.c_str()), 0) << cmd;
  auto out = ReadJsonFile(dir + "/out.json");
  EXPECT_TRUE(out.ok()) << out.status();
  std::vector<std::string> renders;
  if (out.ok()) {
    for (const Json& r : *out) renders.push_back(r.get<std::string>());
  }
  return renders;
}

struct Family {
  const char* file;  // under tests/data/chat_templates
  const char* name;  // what DetectChatTemplate recognises
  const char* bos;   // the model's BOS text, "" when it has none
  const char* eos;
};

// LLaDA-8B-Instruct's template (LLaDA-1.5 ships the same), Dream-v0-Instruct's
// (DiffuCoder's), Qwen2.5-Instruct's (the template Dream-Coder descends from:
// another default system turn) and Qwen3's (the tokenizer RND1 was converted
// with; ChatML for plain turns).
constexpr Family kFamilies[] = {
    {"llada-8b-instruct.jinja", "llada", "<|startoftext|>", "<|endoftext|>"},
    {"dream-v0-instruct-7b.jinja", "dream", "<|beginoftext|>", "<|endoftext|>"},
    {"qwen2.5-7b-instruct.jinja", "qwen2.5", "", "<|endoftext|>"},
    {"qwen3-0.6b.jinja", "chatml", "", "<|im_end|>"},
    {"google-gemma-4-31B-it.jinja", "gemma4", "<bos>", "<eos>"},
};

TEST(ChatTemplateJinjaTest, EachFamilyRendersExactlyAsJinja2) {
  if (std::system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs Debian's python3-jinja2 (scripts/setup-deps installs it)";
  }
  const std::vector<std::vector<ChatMessage>> conversations = Conversations();
  for (const Family& f : kFamilies) {
    SCOPED_TRACE(f.file);
    const std::string text = testing::ReadFileOrDie(TemplateDir() + "/" + f.file);
    const ChatTemplate t = DetectChatTemplate(text);
    EXPECT_EQ(t.name, f.name);
    EXPECT_TRUE(t.recognised);
    const std::vector<std::string> want = RenderWithJinja2(f.file, f.bos, f.eos);
    ASSERT_EQ(want.size(), conversations.size());
    for (size_t i = 0; i < conversations.size(); ++i) {
      SCOPED_TRACE(i);
      const ChatPrompt got = ApplyChatTemplate(t, conversations[i], f.bos);
      EXPECT_EQ(absl::CHexEscape(got.text), absl::CHexEscape(want[i]));
      // One BOS: in the text, or added by the tokenizer, never both.
      EXPECT_EQ(got.add_special, want[i].rfind(f.bos, 0) != 0 || *f.bos == '\0');
    }
  }
}

// Gemma 4's own rules for model turns: the thinking channel is stripped from
// earlier answers, and an answer right after another continues its turn.
TEST(ChatTemplateJinjaTest, Gemma4ModelTurnsRenderExactlyAsJinja2) {
  if (std::system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs Debian's python3-jinja2 (scripts/setup-deps installs it)";
  }
  const std::vector<std::vector<ChatMessage>> conversations =
      Conversations("gemma4-conversations.json");
  const std::vector<std::string> want = RenderWithJinja2("google-gemma-4-31B-it.jinja", "<bos>",
                                                         "<eos>", "gemma4-conversations.json");
  ASSERT_EQ(want.size(), conversations.size());
  const ChatTemplate t = *ParseChatTemplate("gemma4");
  for (size_t i = 0; i < conversations.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(absl::CHexEscape(ApplyChatTemplate(t, conversations[i], "<bos>").text),
              absl::CHexEscape(want[i]));
  }
}

TEST(ChatTemplateTest, LladaMoeRendersAsLlamaCppsBailing2) {
  auto golden = ReadJsonFile(TemplateDir() + "/llamacpp-bailing2.json");
  ASSERT_TRUE(golden.ok()) << golden.status();
  const std::vector<std::vector<ChatMessage>> conversations = Conversations();
  const Json& renders = (*golden)["renders"];
  ASSERT_EQ(renders.size(), conversations.size());
  // A Ling-2.0-style template is recognised by the markers llama.cpp uses.
  const ChatTemplate t = DetectChatTemplate(
      "{{- '<role>SYSTEM</role>' }}...{{ '<role>HUMAN</role>' }}...<|role_end|>..."
      "{{ '<role>ASSISTANT</role>' }}");
  EXPECT_EQ(t.name, "llada-moe");
  for (size_t i = 0; i < conversations.size(); ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(ApplyChatTemplate(t, conversations[i], "").text, renders[i].get<std::string>());
  }
}

// Ling 2.0's own template (the family of LLaDA2; inclusionai-ling-2.0.jinja,
// README there) is told from llama.cpp's bailing2 form by its thinking
// option, and renders every conversation exactly as jinja2 does, answers
// with <think> blocks included.
TEST(ChatTemplateJinjaTest, Ling2RendersExactlyAsJinja2) {
  if (std::system("/usr/bin/python3 -c 'import jinja2' 2>/dev/null") != 0) {
    GTEST_SKIP() << "needs Debian's python3-jinja2 (scripts/setup-deps installs it)";
  }
  const ChatTemplate t =
      DetectChatTemplate(testing::ReadFileOrDie(TemplateDir() + "/inclusionai-ling-2.0.jinja"));
  EXPECT_EQ(t.name, "ling2");
  EXPECT_EQ(t.format, ChatFormat::kLing2);
  for (const char* file : {"conversations.json", "ling2-conversations.json"}) {
    const std::vector<std::vector<ChatMessage>> conversations = Conversations(file);
    const std::vector<std::string> want =
        RenderWithJinja2("inclusionai-ling-2.0.jinja", "", "", file);
    ASSERT_EQ(want.size(), conversations.size());
    for (size_t i = 0; i < conversations.size(); ++i) {
      SCOPED_TRACE(absl::StrCat(file, " ", i));
      EXPECT_EQ(absl::CHexEscape(ApplyChatTemplate(t, conversations[i], "").text),
                absl::CHexEscape(want[i]));
    }
  }
}

TEST(ChatTemplateTest, UnknownTemplatesFallBackToChatMlAndSaySo) {
  const std::string llama31 =
      testing::ReadFileOrDie(TemplateDir() + "/llama-3.1-8b-instruct.jinja");
  for (const std::string& text : {llama31, std::string("[INST] {{ messages }} [/INST]")}) {
    const ChatTemplate t = DetectChatTemplate(text);
    EXPECT_FALSE(t.recognised);
    EXPECT_EQ(t.format, ChatFormat::kChatMl);
  }
  auto file = GgufFile::Open(testing::TestDataDir() + "/tokenizer/vocab-qwen2.gguf");
  ASSERT_THAT(file.status(), IsOk());
  const ChatTemplate none = DetectChatTemplate(*file);  // the tiny models carry none
  EXPECT_EQ(none.format, ChatFormat::kChatMl);
  EXPECT_TRUE(none.recognised);  // llama-diffusion-cli's choice for such files
}

TEST(ChatTemplateTest, LladaTrimsAndLeavesBosToTheTokenizerWithoutBosText) {
  const ChatTemplate llada = *ParseChatTemplate("llada");
  const ChatPrompt p = ApplyChatTemplate(llada, "  What is 2+2?\n", "<|startoftext|>");
  EXPECT_EQ(p.text,
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_FALSE(p.add_special);  // BOS is in the text
  EXPECT_TRUE(ApplyChatTemplate(llada, "x", "").add_special);
}

TEST(ChatTemplateTest, EncodesDreamPromptWithSpecialTokens) {
  auto file = GgufFile::Open(testing::TestDataDir() + "/tokenizer/vocab-qwen2.gguf");
  ASSERT_THAT(file.status(), IsOk());
  auto tok = BpeTokenizer::FromGguf(*file);
  ASSERT_THAT(tok.status(), IsOk());
  const ChatTemplate dream = *ParseChatTemplate("dream");
  const std::vector<int32_t> ids = EncodeChat(*tok, dream, {{"user", "hi"}});
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|>, no BOS for Dream
  EXPECT_EQ(*tok->Decode(ids), ApplyChatTemplate(dream, "hi", "").text);
}

TEST(ChatTemplateTest, ParsesNames) {
  for (const char* name : {"plain", "llada", "dream", "qwen2.5", "chatml", "llada-moe", "gemma4"}) {
    auto t = ParseChatTemplate(name);
    ASSERT_THAT(t.status(), IsOk());
    EXPECT_EQ(t->name, name);
  }
  EXPECT_EQ(ParseChatTemplate("dream")->default_system, "You are a helpful assistant.");
  EXPECT_FALSE(ParseChatTemplate("jinja").ok());
}

}  // namespace
}  // namespace dllm
