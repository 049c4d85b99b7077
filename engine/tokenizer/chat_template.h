// Chat prompts, rendered as the model families' own Jinja templates render
// them (no Jinja engine: each family's output is written out, and
// tests/engine/tokenizer/chat_template_jinja_test.cc holds every one to
// Python's jinja2 running the real template text):
//
// - LLaDA-8B-Instruct / LLaDA-1.5: Llama-3 headers, bos_token first, content
//   trimmed, the assistant header always appended;
// - Dream-v0-Instruct, DiffuCoder, and any Qwen2.5-style template: ChatML
//   with the template's own default system turn when none leads;
// - LLaDA-MoE (Ling 2.0 roles): as llama.cpp's built-in "bailing2" (the
//   authors' Jinja text was not available to check against);
// - plain ChatML: Qwen3-style templates (RND1) for plain turns, and
//   llama.cpp's fallback for files without a template or with one dllm does
//   not recognise;
// - Gemma 4 (DiffusionGemma): <|turn>ROLE ... <turn|> turns, assistant turns
//   as "model" with their thinking channels stripped, and the generation
//   prompt's empty thought channel (the template without enable_thinking,
//   as transformers renders it); also the default of a diffusion-gemma file
//   without a template.
// The family is recognised from `tokenizer.chat_template` by its content.
#ifndef DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
#define DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/bpe_tokenizer.h"

namespace dllm {

enum class ChatFormat {
  kPlain,   // the messages' contents joined by newlines, no markup
  kLlada,   // <|start_header_id|>user<|end_header_id|>\n\n...<|eot_id|>
  kQwen,    // ChatML after a default system turn (`default_system`)
  kChatMl,  // <|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n
  kLing,    // <role>HUMAN</role>...<|role_end|><role>ASSISTANT</role>
  // Ling 2.0's own template (LLaDA2's family): always a system turn, the
  // first system message's text before "detailed thinking off", answers'
  // <think> blocks dropped before the last question.
  kLing2,
  kGemma4,  // <bos><|turn>user\n...<turn|>\n<|turn>model\n<|channel>thought\n<channel|>
};

struct ChatTemplate {
  ChatFormat format = ChatFormat::kChatMl;
  // kQwen: the system turn the template adds when the first message is not
  // a system message, e.g. "You are a helpful assistant." (Dream).
  std::string default_system;
  // The name --chat-template takes and ModelInfo reports: "plain", "llada",
  // "dream", "qwen2.5", "chatml", "llada-moe", "gemma4" ("qwen" for a Qwen-style
  // template with another default system turn).
  std::string name = "chatml";
  // False when the file's template was not one of the families above (and
  // ChatML is used instead); front ends warn once.
  bool recognised = true;
};

// What front ends print, once, when a file's template is not recognised.
inline constexpr char kUnrecognisedChatTemplateWarning[] =
    "the file's chat template (tokenizer.chat_template) is not one of the families dllm "
    "renders; chat prompts use ChatML, as llama.cpp's fallback does (--chat-template NAME "
    "picks another)";

// "plain, llada, dream, qwen2.5, chatml, llada-moe, gemma4".
const char* ChatTemplateNames();
// A template by name (--chat-template, a request's chat_template).
absl::StatusOr<ChatTemplate> ParseChatTemplate(absl::string_view name);

// The family of a Jinja template's text; unrecognised text gives ChatML with
// `recognised` false.
ChatTemplate DetectChatTemplate(absl::string_view jinja);
// From `tokenizer.chat_template`; a file without one gets ChatML (recognised:
// that is llama-diffusion-cli's choice, not a guess).
ChatTemplate DetectChatTemplate(const GgufFile& file);

struct ChatMessage {
  std::string role;  // "system", "user", "assistant"
  std::string content;
};

// Rendered text plus how to tokenize it: with `add_special` the tokenizer
// adds BOS per `add_bos_token`; templates whose text already starts with
// the BOS token (LLaDA's) turn it off, so there is exactly one BOS.
struct ChatPrompt {
  std::string text;
  bool add_special = true;
};

// Renders `messages` followed by the assistant's generation prompt.
// `bos_text` is the BOS token's text ("<|startoftext|>" for LLaDA); when
// empty, the LLaDA form leaves BOS to the tokenizer instead.
ChatPrompt ApplyChatTemplate(const ChatTemplate& t, const std::vector<ChatMessage>& messages,
                             absl::string_view bos_text);
// One user message.
ChatPrompt ApplyChatTemplate(const ChatTemplate& t, absl::string_view user_prompt,
                             absl::string_view bos_text);

// Tokenizes a rendered prompt as llama-diffusion-cli does (special tokens
// parsed); the BOS text comes from `tokenizer`.
std::vector<int32_t> EncodeChat(const BpeTokenizer& tokenizer, const ChatTemplate& t,
                                const std::vector<ChatMessage>& messages);

// How a prompt's text becomes ids, for every front end (CLI, gRPC, HTTP).
struct PromptEncoding {
  // One user turn (after `system`, when not empty) through the chat template.
  bool chat = false;
  absl::string_view system;
  // Plain text only: BOS per add_bos_token and special-token texts parsed, as
  // llama-diffusion-cli does; false: neither, as `llama-tokenize --no-bos`
  // without --parse-special.
  bool special = true;
};
std::vector<int32_t> EncodePrompt(const BpeTokenizer& tokenizer, const ChatTemplate& t,
                                  absl::string_view text, const PromptEncoding& how);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
