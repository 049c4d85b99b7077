#include "engine/tokenizer/chat_template.h"

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::IsOk;

// Excerpts of the official templates (LLaDA-8B-Instruct, Dream-v0-Instruct).
constexpr char kLladaJinja[] =
    "{% set loop_messages = messages %}{% for message in loop_messages %}{% set content = "
    "'<|start_header_id|>' + message['role'] + '<|end_header_id|>\\n\\n'+ message['content'] | "
    "trim + '<|eot_id|>' %}{% if loop.index0 == 0 %}{% set content = bos_token + content %}"
    "{% endif %}{{ content }}{% endfor %}{{ '<|start_header_id|>assistant<|end_header_id|>\\n\\n' }}";
constexpr char kDreamJinja[] =
    "{%- else %}{{- '<|im_start|>system\\nYou are a helpful assistant.<|im_end|>\\n' }}"
    "{%- endif %}{%- for message in messages %}{{- '<|im_start|>' + message.role }}";

TEST(ChatTemplateTest, DetectsByMarkers) {
  EXPECT_EQ(DetectChatTemplate(kLladaJinja), ChatTemplate::kLladaInstruct);
  EXPECT_EQ(DetectChatTemplate(kDreamJinja), ChatTemplate::kDreamInstruct);
  EXPECT_EQ(DetectChatTemplate("{{'<|im_start|>' + role}}"), ChatTemplate::kChatMl);
  EXPECT_EQ(DetectChatTemplate("[INST] something else"), ChatTemplate::kChatMl);
}

TEST(ChatTemplateTest, DetectsFromGgufAndFallsBackToChatMl) {
  auto file = GgufFile::Open(testing::TestDataDir() + "/tokenizer/vocab-qwen2.gguf");
  ASSERT_THAT(file.status(), IsOk());
  EXPECT_EQ(DetectChatTemplate(*file), ChatTemplate::kChatMl);  // the tiny models have none
}

TEST(ChatTemplateTest, RendersLladaInstruct) {
  const ChatPrompt p =
      ApplyChatTemplate(ChatTemplate::kLladaInstruct, "  What is 2+2?\n", "<|startoftext|>");
  EXPECT_EQ(p.text,
            "<|startoftext|><|start_header_id|>user<|end_header_id|>\n\nWhat is 2+2?<|eot_id|>"
            "<|start_header_id|>assistant<|end_header_id|>\n\n");
  EXPECT_FALSE(p.add_special);  // BOS is in the text
  EXPECT_TRUE(ApplyChatTemplate(ChatTemplate::kLladaInstruct, "x", "").add_special);
}

TEST(ChatTemplateTest, RendersDreamInstructAndChatMl) {
  EXPECT_EQ(ApplyChatTemplate(ChatTemplate::kDreamInstruct, "Hi", "").text,
            "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const std::vector<ChatMessage> with_system = {{"system", "Be brief."}, {"user", "Hi"}};
  EXPECT_EQ(ApplyChatTemplate(ChatTemplate::kDreamInstruct, with_system, "").text,
            "<|im_start|>system\nBe brief.<|im_end|>\n"
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  EXPECT_EQ(ApplyChatTemplate(ChatTemplate::kChatMl, "Hi", "").text,
            "<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n");
  const ChatPrompt plain = ApplyChatTemplate(ChatTemplate::kPlain, " as is ", "<s>");
  EXPECT_EQ(plain.text, " as is ");
  EXPECT_TRUE(plain.add_special);
}

TEST(ChatTemplateTest, EncodesDreamPromptWithSpecialTokens) {
  auto file = GgufFile::Open(testing::TestDataDir() + "/tokenizer/vocab-qwen2.gguf");
  ASSERT_THAT(file.status(), IsOk());
  auto tok = BpeTokenizer::FromGguf(*file);
  ASSERT_THAT(tok.status(), IsOk());
  const std::vector<int32_t> ids = EncodeChat(*tok, ChatTemplate::kDreamInstruct, {{"user", "hi"}});
  ASSERT_GE(ids.size(), 4u);
  EXPECT_EQ(ids.front(), 151644);  // <|im_start|>, no BOS for Dream
  EXPECT_EQ(*tok->Decode(ids), ApplyChatTemplate(ChatTemplate::kDreamInstruct, "hi", "").text);
}

TEST(ChatTemplateTest, ParsesNames) {
  for (ChatTemplate t : {ChatTemplate::kPlain, ChatTemplate::kLladaInstruct,
                         ChatTemplate::kDreamInstruct, ChatTemplate::kChatMl}) {
    EXPECT_EQ(*ParseChatTemplate(ChatTemplateName(t)), t);
  }
  EXPECT_FALSE(ParseChatTemplate("jinja").ok());
}

}  // namespace
}  // namespace dllm
