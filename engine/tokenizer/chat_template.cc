// The chat formats as string building. LLaDA's official template trims each
// message (Jinja `| trim`) and starts with `bos_token`; Dream's (Qwen2.5's)
// adds a default system turn; ChatML is llama.cpp's built-in form.
#include "engine/tokenizer/chat_template.h"

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"

namespace dllm {
namespace {

constexpr absl::string_view kDreamDefaultSystem = "You are a helpful assistant.";

void AppendChatMl(absl::string_view role, absl::string_view content, std::string* out) {
  absl::StrAppend(out, "<|im_start|>", role, "\n", content, "<|im_end|>\n");
}

}  // namespace

absl::string_view ChatTemplateName(ChatTemplate t) {
  switch (t) {
    case ChatTemplate::kPlain:
      return "plain";
    case ChatTemplate::kLladaInstruct:
      return "llada";
    case ChatTemplate::kDreamInstruct:
      return "dream";
    case ChatTemplate::kChatMl:
      return "chatml";
  }
  return "?";
}

absl::StatusOr<ChatTemplate> ParseChatTemplate(absl::string_view name) {
  for (ChatTemplate t : {ChatTemplate::kPlain, ChatTemplate::kLladaInstruct,
                         ChatTemplate::kDreamInstruct, ChatTemplate::kChatMl}) {
    if (name == ChatTemplateName(t)) return t;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      "chat template '", name, "' is not one of plain, llada, dream, chatml"));
}

ChatTemplate DetectChatTemplate(absl::string_view jinja) {
  if (absl::StrContains(jinja, "<|start_header_id|>") &&
      absl::StrContains(jinja, "<|end_header_id|>")) {
    return ChatTemplate::kLladaInstruct;
  }
  if (absl::StrContains(jinja, "<|im_start|>") && absl::StrContains(jinja, kDreamDefaultSystem)) {
    return ChatTemplate::kDreamInstruct;
  }
  return ChatTemplate::kChatMl;
}

ChatTemplate DetectChatTemplate(const GgufFile& file) {
  auto text = file.GetString("tokenizer.chat_template");
  return text.ok() ? DetectChatTemplate(*text) : ChatTemplate::kChatMl;
}

ChatPrompt ApplyChatTemplate(ChatTemplate t, const std::vector<ChatMessage>& messages,
                             absl::string_view bos_text) {
  ChatPrompt p;
  switch (t) {
    case ChatTemplate::kPlain:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i > 0) p.text += "\n";
        p.text += messages[i].content;
      }
      break;
    case ChatTemplate::kLladaInstruct:
      p.text = std::string(bos_text);
      p.add_special = bos_text.empty();
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&p.text, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                        absl::StripAsciiWhitespace(m.content), "<|eot_id|>");
      }
      p.text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatTemplate::kDreamInstruct:
    case ChatTemplate::kChatMl:
      if (t == ChatTemplate::kDreamInstruct &&
          (messages.empty() || messages[0].role != "system")) {
        AppendChatMl("system", kDreamDefaultSystem, &p.text);
      }
      for (const ChatMessage& m : messages) AppendChatMl(m.role, m.content, &p.text);
      p.text += "<|im_start|>assistant\n";
      break;
  }
  return p;
}

ChatPrompt ApplyChatTemplate(ChatTemplate t, absl::string_view user_prompt,
                             absl::string_view bos_text) {
  return ApplyChatTemplate(t, {ChatMessage{"user", std::string(user_prompt)}}, bos_text);
}

std::vector<int32_t> EncodeChat(const BpeTokenizer& tokenizer, ChatTemplate t,
                                const std::vector<ChatMessage>& messages) {
  const absl::string_view bos =
      tokenizer.bos() >= 0 ? absl::string_view(tokenizer.TokenText(tokenizer.bos())) : "";
  const ChatPrompt p = ApplyChatTemplate(t, messages, bos);
  return tokenizer.Encode(p.text, p.add_special, /*parse_special=*/true);
}

std::vector<int32_t> EncodePrompt(const BpeTokenizer& tokenizer, ChatTemplate t,
                                  absl::string_view text, const PromptEncoding& how) {
  if (!how.chat) return tokenizer.Encode(text, how.special, how.special);
  std::vector<ChatMessage> messages;
  if (!how.system.empty()) messages.push_back({"system", std::string(how.system)});
  messages.push_back({"user", std::string(text)});
  return EncodeChat(tokenizer, t, messages);
}

}  // namespace dllm
