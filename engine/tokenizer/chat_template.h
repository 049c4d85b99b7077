// Chat prompt formats for the diffusion models, written out by hand (no
// Jinja): LLaDA-Instruct (Llama-3 headers), Dream-Instruct (ChatML with a
// default system prompt), plain ChatML (llama.cpp's fallback, which
// llama-diffusion-cli uses for GGUFs without a template) and no template.
// The format is detected from `tokenizer.chat_template` by its markers, or
// chosen explicitly.
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

enum class ChatTemplate {
  kPlain,          // the prompt as is
  kLladaInstruct,  // <|start_header_id|>user<|end_header_id|>\n\n...<|eot_id|>
  kDreamInstruct,  // ChatML, "You are a helpful assistant." unless a system message leads
  kChatMl,         // <|im_start|>user\n...<|im_end|>\n<|im_start|>assistant\n
};

absl::string_view ChatTemplateName(ChatTemplate t);  // "plain", "llada", "dream", "chatml"
absl::StatusOr<ChatTemplate> ParseChatTemplate(absl::string_view name);

// From a Jinja template's text: Llama-3 header markers -> kLladaInstruct;
// "<|im_start|>" with the default system prompt -> kDreamInstruct; other
// "<|im_start|>" templates and anything unrecognised -> kChatMl.
ChatTemplate DetectChatTemplate(absl::string_view jinja);
// From `tokenizer.chat_template`; a file without one gets kChatMl, as in
// llama-diffusion-cli.
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
ChatPrompt ApplyChatTemplate(ChatTemplate t, const std::vector<ChatMessage>& messages,
                             absl::string_view bos_text);
// One user message.
ChatPrompt ApplyChatTemplate(ChatTemplate t, absl::string_view user_prompt,
                             absl::string_view bos_text);

// Tokenizes a rendered prompt as llama-diffusion-cli does (special tokens
// parsed); the BOS text comes from `tokenizer`.
std::vector<int32_t> EncodeChat(const BpeTokenizer& tokenizer, ChatTemplate t,
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
std::vector<int32_t> EncodePrompt(const BpeTokenizer& tokenizer, ChatTemplate t,
                                  absl::string_view text, const PromptEncoding& how);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_CHAT_TEMPLATE_H_
