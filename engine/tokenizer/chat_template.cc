// The chat formats as string building. The facts each one reproduces, from
// the real templates (tests/data/chat_templates/README.md):
// - LLaDA: `bos_token` before the first turn, `message['content'] | trim`
//   (Python's str.strip(), so Unicode whitespace too), and the assistant
//   header appended whatever add_generation_prompt says;
// - Qwen2.5 / Dream: a leading system message is the system turn, otherwise
//   the template's default one; every later message is a ChatML turn;
// - Ling 2.0 (LLaDA-MoE): llama.cpp's "bailing2": a default system turn
//   "detailed thinking off", roles upper-cased with user as HUMAN;
// - Ling 2.0's own template (inclusionAI's Ling-1T; the family of LLaDA2):
//   the system turn always opens, the first system message's text (and a
//   newline) before "detailed thinking off"; a later system message is a
//   turn of its own; an answer's <think> block is dropped unless it comes
//   after the last question, where it is re-spaced.
#include "engine/tokenizer/chat_template.h"

#include <optional>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "absl/strings/str_split.h"
#include "engine/base/utf8.h"

namespace dllm {
namespace {

constexpr absl::string_view kDreamSystem = "You are a helpful assistant.";
constexpr absl::string_view kQwenSystem =
    "You are Qwen, created by Alibaba Cloud. You are a helpful assistant.";
constexpr absl::string_view kLingSystem = "detailed thinking off";

ChatTemplate Make(ChatFormat format, std::string name, std::string default_system = "") {
  ChatTemplate t;
  t.format = format;
  t.name = std::move(name);
  t.default_system = std::move(default_system);
  return t;
}

ChatTemplate QwenStyle(std::string default_system) {
  std::string name = default_system == kDreamSystem  ? "dream"
                     : default_system == kQwenSystem ? "qwen2.5"
                                                     : "qwen";
  return Make(ChatFormat::kQwen, std::move(name), std::move(default_system));
}

// Python's str.isspace() for the code points jinja2's `trim` strips.
bool IsPythonSpace(uint32_t cp) {
  return (cp >= 0x09 && cp <= 0x0D) || (cp >= 0x1C && cp <= 0x20) || cp == 0x85 || cp == 0xA0 ||
         cp == 0x1680 || (cp >= 0x2000 && cp <= 0x200A) || cp == 0x2028 || cp == 0x2029 ||
         cp == 0x202F || cp == 0x205F || cp == 0x3000;
}

// jinja2's `| trim`: str.strip() of leading and trailing whitespace.
absl::string_view PythonStrip(absl::string_view s) {
  size_t begin = 0;
  while (begin < s.size()) {
    const Utf8Char c = DecodeUtf8At(s, begin);
    if (!IsPythonSpace(c.cp)) break;
    begin += c.len;
  }
  size_t end = begin;  // just past the last character that is not whitespace
  for (size_t pos = begin; pos < s.size();) {
    const Utf8Char c = DecodeUtf8At(s, pos);
    pos += c.len;
    if (!IsPythonSpace(c.cp)) end = pos;
  }
  return s.substr(begin, end - begin);
}

// The default system turn of a Qwen2.5-style template: the text of its
// `'<|im_start|>system\n...<|im_end|>\n'` literal (the one that is not
// followed by the first message's content), unescaped.
std::optional<std::string> QwenDefaultSystem(absl::string_view jinja) {
  if (!absl::StrContains(jinja, "messages[0]['role'] == 'system'") &&
      !absl::StrContains(jinja, "messages[0].role == 'system'")) {
    return std::nullopt;
  }
  constexpr absl::string_view kOpen = "'<|im_start|>system\\n";
  constexpr absl::string_view kClose = "<|im_end|>\\n'";
  for (size_t at = jinja.find(kOpen); at != absl::string_view::npos;
       at = jinja.find(kOpen, at + 1)) {
    const size_t text = at + kOpen.size();
    if (text >= jinja.size() || jinja[text] == '\'') continue;  // '<|im_start|>system\n' + ...
    const size_t close = jinja.find(kClose, text);
    if (close == absl::string_view::npos) continue;
    const absl::string_view literal = jinja.substr(text, close - text);
    if (absl::StrContains(literal, "'")) continue;  // not one plain literal
    return absl::StrReplaceAll(literal, {{"\\n", "\n"}, {"\\\\", "\\"}});
  }
  return std::nullopt;
}

// Gemma 4's strip_thinking: each part between "<channel|>" markers loses
// what follows a "<|channel>" in it; the whole is then trimmed.
std::string StripThinking(absl::string_view text) {
  std::string out;
  for (absl::string_view part : absl::StrSplit(text, "<channel|>")) {
    const size_t open = part.find("<|channel>");
    absl::StrAppend(&out, open == absl::string_view::npos ? part : part.substr(0, open));
  }
  return std::string(PythonStrip(out));
}

// Python's str.strip(chars) / lstrip / rstrip for a set of characters.
absl::string_view StripChars(absl::string_view s, absl::string_view chars, bool left, bool right) {
  while (left && !s.empty() && chars.find(s.front()) != absl::string_view::npos) s.remove_prefix(1);
  while (right && !s.empty() && chars.find(s.back()) != absl::string_view::npos) s.remove_suffix(1);
  return s;
}

// An answer turn of Ling 2.0's template: <think> text split off at the last
// </think>; kept (re-spaced) only for answers after the last question.
std::string Ling2Answer(absl::string_view content, bool after_last_question) {
  const size_t close = content.find("</think>");
  if (close == absl::string_view::npos) return std::string(content);
  const absl::string_view before = content.substr(0, close);
  const size_t open = before.rfind("<think>");
  absl::string_view reasoning = open == absl::string_view::npos ? before : before.substr(open + 7);
  reasoning = StripChars(StripChars(reasoning, "\n", false, true), "\n", true, false);
  const absl::string_view answer =
      StripChars(content.substr(content.rfind("</think>") + 8), "\n", true, false);
  if (!after_last_question || reasoning.empty()) return std::string(answer);
  return absl::StrCat("\n<think>\n", StripChars(reasoning, "\n", true, true), "\n</think>\n\n",
                      answer);
}

void AppendChatMl(absl::string_view role, absl::string_view content, std::string* out) {
  absl::StrAppend(out, "<|im_start|>", role, "\n", content, "<|im_end|>\n");
}

}  // namespace

const char* ChatTemplateNames() {
  return "plain, llada, dream, qwen2.5, chatml, llada-moe, ling2, gemma4";
}

absl::StatusOr<ChatTemplate> ParseChatTemplate(absl::string_view name) {
  if (name == "plain") return Make(ChatFormat::kPlain, "plain");
  if (name == "llada") return Make(ChatFormat::kLlada, "llada");
  if (name == "dream") return QwenStyle(std::string(kDreamSystem));
  if (name == "qwen2.5") return QwenStyle(std::string(kQwenSystem));
  if (name == "chatml") return Make(ChatFormat::kChatMl, "chatml");
  if (name == "llada-moe") return Make(ChatFormat::kLing, "llada-moe");
  if (name == "ling2") return Make(ChatFormat::kLing2, "ling2");
  if (name == "gemma4") return Make(ChatFormat::kGemma4, "gemma4");
  return absl::InvalidArgumentError(absl::StrCat("chat template '", PrintableText(name),
                                                 "' is not one of ", ChatTemplateNames()));
}

ChatTemplate DetectChatTemplate(absl::string_view jinja) {
  if (absl::StrContains(jinja, "<|start_header_id|>") &&
      absl::StrContains(jinja, "<|end_header_id|>")) {
    // LLaDA's template (the first Llama-3 one); later Llama-3.x templates
    // (system dates, tools) render differently and are not recognised.
    if (absl::StrContains(jinja, "bos_token") && absl::StrContains(jinja, "| trim") &&
        !absl::StrContains(jinja, "Cutting Knowledge")) {
      return Make(ChatFormat::kLlada, "llada");
    }
  } else if (absl::StrContains(jinja, "<role>HUMAN</role>") &&
             absl::StrContains(jinja, "<role>ASSISTANT</role>") &&
             absl::StrContains(jinja, "<|role_end|>")) {
    // Ling 2.0's own text builds its system turn from a thinking option.
    if (absl::StrContains(jinja, "'detailed thinking ' + thinking_option")) {
      return Make(ChatFormat::kLing2, "ling2");
    }
    return Make(ChatFormat::kLing, "llada-moe");
  } else if (absl::StrContains(jinja, "<|turn>") && absl::StrContains(jinja, "<turn|>")) {
    return Make(ChatFormat::kGemma4, "gemma4");
  } else if (absl::StrContains(jinja, "<|im_start|>")) {
    if (std::optional<std::string> system = QwenDefaultSystem(jinja)) {
      return QwenStyle(std::move(*system));
    }
    return Make(ChatFormat::kChatMl, "chatml");
  }
  ChatTemplate fallback = Make(ChatFormat::kChatMl, "chatml");
  fallback.recognised = false;
  return fallback;
}

ChatTemplate DetectChatTemplate(const GgufFile& file) {
  auto text = file.GetString("tokenizer.chat_template");
  return text.ok() ? DetectChatTemplate(*text) : Make(ChatFormat::kChatMl, "chatml");
}

ChatPrompt ApplyChatTemplate(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                             absl::string_view bos_text) {
  ChatPrompt p;
  const bool leading_system = !messages.empty() && messages[0].role == "system";
  switch (t.format) {
    case ChatFormat::kPlain:
      for (size_t i = 0; i < messages.size(); ++i) {
        if (i > 0) p.text += "\n";
        p.text += messages[i].content;
      }
      break;
    case ChatFormat::kLlada:
      p.text = std::string(bos_text);
      p.add_special = bos_text.empty();
      for (const ChatMessage& m : messages) {
        absl::StrAppend(&p.text, "<|start_header_id|>", m.role, "<|end_header_id|>\n\n",
                        PythonStrip(m.content), "<|eot_id|>");
      }
      p.text += "<|start_header_id|>assistant<|end_header_id|>\n\n";
      break;
    case ChatFormat::kQwen:
    case ChatFormat::kChatMl:
      if (t.format == ChatFormat::kQwen && !leading_system) {
        AppendChatMl("system", t.default_system, &p.text);
      }
      for (const ChatMessage& m : messages) AppendChatMl(m.role, m.content, &p.text);
      p.text += "<|im_start|>assistant\n";
      break;
    case ChatFormat::kLing:
      if (!leading_system)
        absl::StrAppend(&p.text, "<role>SYSTEM</role>", kLingSystem, "<|role_end|>");
      for (const ChatMessage& m : messages) {
        const std::string role = m.role == "user" ? "HUMAN" : absl::AsciiStrToUpper(m.role);
        absl::StrAppend(&p.text, "<role>", role, "</role>", m.content, "<|role_end|>");
      }
      p.text += "<role>ASSISTANT</role>";
      break;
    case ChatFormat::kLing2: {
      p.text = "<role>SYSTEM</role>";
      if (leading_system) absl::StrAppend(&p.text, messages[0].content, "\n");
      absl::StrAppend(&p.text, kLingSystem, "<|role_end|>");
      size_t last_question = messages.size() - 1;
      for (size_t i = messages.size(); i-- > 0;) {
        const std::string& c = messages[i].content;
        if (messages[i].role == "user" &&
            !(absl::StartsWith(c, "<tool_response>") && absl::EndsWith(c, "</tool_response>"))) {
          last_question = i;
          break;
        }
      }
      for (size_t i = 0; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        if (m.role == "user") {
          absl::StrAppend(&p.text, "<role>HUMAN</role>", m.content, "<|role_end|>");
        } else if (m.role == "system" && i > 0) {
          absl::StrAppend(&p.text, "<role>SYSTEM</role>", m.content, "<|role_end|>");
        } else if (m.role == "assistant") {
          absl::StrAppend(&p.text, "<role>ASSISTANT</role>",
                          Ling2Answer(m.content, i > last_question), "<|role_end|>");
        }
      }
      p.text += "<role>ASSISTANT</role>";
      break;
    }
    case ChatFormat::kGemma4: {
      p.text = std::string(bos_text);
      p.add_special = bos_text.empty();
      size_t first = 0;
      if (leading_system) {
        absl::StrAppend(&p.text, "<|turn>system\n", PythonStrip(messages[0].content), "<turn|>\n");
        first = 1;
      }
      for (size_t i = first; i < messages.size(); ++i) {
        const ChatMessage& m = messages[i];
        const bool model = m.role == "assistant";
        // An assistant turn right after another continues it: no header.
        if (!(model && i > first && messages[i - 1].role == "assistant")) {
          absl::StrAppend(&p.text, "<|turn>", model ? "model" : m.role, "\n");
        }
        absl::StrAppend(&p.text, model ? StripThinking(m.content) : PythonStrip(m.content),
                        "<turn|>\n");
      }
      p.text += "<|turn>model\n<|channel>thought\n<channel|>";
      break;
    }
  }
  return p;
}

ChatPrompt ApplyChatTemplate(const ChatTemplate& t, absl::string_view user_prompt,
                             absl::string_view bos_text) {
  return ApplyChatTemplate(t, {ChatMessage{"user", std::string(user_prompt)}}, bos_text);
}

std::vector<int32_t> EncodeChat(const BpeTokenizer& tokenizer, const ChatTemplate& t,
                                const std::vector<ChatMessage>& messages) {
  const absl::string_view bos =
      tokenizer.bos() >= 0 ? absl::string_view(tokenizer.TokenText(tokenizer.bos())) : "";
  const ChatPrompt p = ApplyChatTemplate(t, messages, bos);
  return tokenizer.Encode(p.text, p.add_special, /*parse_special=*/true);
}

std::vector<int32_t> EncodePrompt(const BpeTokenizer& tokenizer, const ChatTemplate& t,
                                  absl::string_view text, const PromptEncoding& how) {
  if (!how.chat) return tokenizer.Encode(text, how.special, how.special);
  std::vector<ChatMessage> messages;
  if (!how.system.empty()) messages.push_back({"system", std::string(how.system)});
  messages.push_back({"user", std::string(text)});
  return EncodeChat(tokenizer, t, messages);
}

}  // namespace dllm
