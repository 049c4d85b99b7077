#include "service/engine/prompt_validation.h"

#include <algorithm>
#include <mutex>
#include <random>
#include <utility>

#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "engine/base/status_macros.h"
#include "engine/base/utf8.h"
#include "engine/tokenizer/special_tokens.h"

namespace dllm {
namespace {

std::mt19937_64& Random() {
  static std::mt19937_64 rng(std::random_device{}());
  return rng;
}
std::mutex random_mutex;

// The most bytes a text can have and still fit the model's context: no
// token covers more than max_token_bytes.
size_t MaxTextBytes(const Model& model) {
  return static_cast<size_t>(model.config().n_ctx_train) * model.tokenizer().max_token_bytes();
}

absl::StatusOr<std::vector<int32_t>> ValidateTextPrompt(const GenerationRequest::Prompt& prompt,
                                                        const Model& model) {
  const ModelConfig& c = model.config();
  if (prompt.text.empty()) return InvalidField("prompt.text", "empty");
  // Bounded by its length first: a text longer than the context times the
  // longest token cannot fit, and tokenizing megabytes would hold this
  // thread for most of a second.
  const size_t max_bytes = MaxTextBytes(model);
  for (const auto& [name, bytes] :
       {std::pair{"prompt.text", prompt.text.size()}, {"prompt.system", prompt.system.size()}}) {
    if (bytes > max_bytes) {
      return InvalidField(name, absl::StrCat(bytes, " bytes cannot fit the model's context of ",
                                             c.n_ctx_train, " tokens (no token covers more than ",
                                             model.tokenizer().max_token_bytes(), " bytes)"));
    }
  }
  TextPrompt text;
  text.text = prompt.text;
  text.chat_template = prompt.chat_template;
  text.how.chat = prompt.apply_chat_template;
  text.how.system = prompt.system;
  DLLM_ASSIGN_OR_RETURN(std::vector<int32_t> ids, EncodeTextPrompt(text, model, "prompt."));
  if (ids.empty()) return InvalidField("prompt.text", "tokenizes to no tokens");
  // Special-token texts are parsed (as llama-diffusion-cli does), so the
  // mask token's text would put a mask into the prompt: the sampler would
  // then treat that prompt position as one to generate. Refused, naming the
  // field that holds it.
  if (std::find(ids.begin(), ids.end(), c.tokens.mask) != ids.end()) {
    const std::string piece = model.tokenizer().TokenPiece(c.tokens.mask);
    const char* field = absl::StrContains(prompt.system, piece) ? "prompt.system" : "prompt.text";
    return InvalidField(field, absl::StrCat("contains the mask token '", piece, "' (id ",
                                            c.tokens.mask, "); a prompt cannot hold masks"));
  }
  return ids;
}

}  // namespace

absl::Status InvalidField(absl::string_view field, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat(field, ": ", why));
}

std::string NewRequestId() {
  std::lock_guard<std::mutex> lock(random_mutex);
  return absl::StrFormat("req-%016x", Random()());
}

uint64_t NewSeed() {
  std::lock_guard<std::mutex> lock(random_mutex);
  // Below 2^53 so that JSON clients (doubles) can echo it back exactly.
  return Random()() >> 11;
}

absl::Status ValidateRequestId(absl::string_view id, absl::string_view field) {
  if (id.size() > kMaxRequestIdBytes) {
    return InvalidField(field,
                        absl::StrCat(id.size(), " bytes exceed the limit of ", kMaxRequestIdBytes));
  }
  for (size_t i = 0; i < id.size(); ++i) {
    const unsigned char c = static_cast<unsigned char>(id[i]);
    if (c < 0x21 || c > 0x7e) {
      return InvalidField(field, absl::StrCat("byte ", i, " is not printable ASCII"));
    }
  }
  return absl::OkStatus();
}

absl::string_view ModelFileName(absl::string_view path) {
  if (const size_t slash = path.rfind('/'); slash != absl::string_view::npos) {
    path.remove_prefix(slash + 1);
  }
  return path;
}

absl::string_view ModelFileStem(absl::string_view path) {
  absl::string_view base = ModelFileName(path);
  absl::ConsumeSuffix(&base, ".gguf");
  return base;
}

bool NamesServedModel(absl::string_view model, const Model& served, absl::string_view path) {
  if (model.empty() || model == served.config().name) return true;
  return model == ModelFileName(path) || model == ModelFileStem(path);
}

absl::StatusOr<ChatTemplate> RequestChatTemplate(absl::string_view name, const Model& model,
                                                 absl::string_view field) {
  if (name.empty()) return model.chat_template();
  absl::StatusOr<ChatTemplate> t = ParseChatTemplate(name);
  if (!t.ok()) return InvalidField(field, t.status().message());
  return t;
}

absl::StatusOr<std::vector<int32_t>> EncodeTextPrompt(const TextPrompt& prompt, const Model& model,
                                                      absl::string_view field_prefix) {
  auto field = [&](absl::string_view name) { return absl::StrCat(field_prefix, name); };
  if (const int64_t bad = FirstInvalidUtf8(prompt.text); bad >= 0) {
    return InvalidField(field("text"), absl::StrCat("invalid UTF-8 at byte ", bad));
  }
  if (const int64_t bad = FirstInvalidUtf8(prompt.how.system); bad >= 0) {
    return InvalidField(field("system"), absl::StrCat("invalid UTF-8 at byte ", bad));
  }
  if (!prompt.how.chat && !prompt.how.system.empty()) {
    return InvalidField(field("system"), "needs apply_chat_template");
  }
  if (!prompt.how.chat && !prompt.chat_template.empty()) {
    return InvalidField(field("chat_template"), "needs apply_chat_template");
  }
  DLLM_ASSIGN_OR_RETURN(ChatTemplate templ,
                        RequestChatTemplate(prompt.chat_template, model, field("chat_template")));
  return EncodePrompt(model.tokenizer(), templ, prompt.text, prompt.how);
}

absl::StatusOr<std::vector<int32_t>> GivenTokenIds(std::span<const uint32_t> ids,
                                                   absl::string_view field, const ModelConfig& c) {
  std::vector<int32_t> out;
  out.reserve(ids.size());
  for (size_t i = 0; i < ids.size(); ++i) {
    if (std::string why = NotAGivenToken(ids[i], c.n_vocab, c.tokens.mask); !why.empty()) {
      return InvalidField(absl::StrCat(field, ".ids[", i, "]"), absl::StrCat(ids[i], " ", why));
    }
    out.push_back(static_cast<int32_t>(ids[i]));
  }
  return out;
}

absl::StatusOr<std::vector<int32_t>> ValidatePrompt(const GenerationRequest::Prompt& prompt,
                                                    const Model& model) {
  switch (prompt.input) {
    case PromptInput::kText:
      return ValidateTextPrompt(prompt, model);
    case PromptInput::kTokenIds:
      if (prompt.token_ids.empty()) return InvalidField("prompt.token_ids", "empty");
      if (prompt.apply_chat_template) {
        return InvalidField("prompt.apply_chat_template", "applies to prompt.text only");
      }
      if (!prompt.system.empty())
        return InvalidField("prompt.system", "applies to prompt.text only");
      if (!prompt.chat_template.empty()) {
        return InvalidField("prompt.chat_template", "applies to prompt.text only");
      }
      return GivenTokenIds(prompt.token_ids, "prompt.token_ids", model.config());
    case PromptInput::kNone:
      break;
  }
  return InvalidField("prompt", "empty (set prompt.text or prompt.token_ids)");
}

absl::StatusOr<std::vector<int32_t>> ValidateSuffix(const GenerationRequest::Prompt& prompt,
                                                    const Model& model) {
  if (prompt.suffix_input == PromptInput::kNone) return std::vector<int32_t>();
  if (prompt.apply_chat_template) {
    return InvalidField(
        "prompt.suffix",
        "infill takes a plain prompt; it cannot follow a chat template's assistant turn");
  }
  if (prompt.suffix_input == PromptInput::kTokenIds) {
    if (prompt.suffix_token_ids.empty()) return InvalidField("prompt.suffix.token_ids", "empty");
    return GivenTokenIds(prompt.suffix_token_ids, "prompt.suffix.token_ids", model.config());
  }
  const std::string& text = prompt.suffix_text;
  if (text.empty()) return InvalidField("prompt.suffix.text", "empty");
  if (text.size() > MaxTextBytes(model)) {
    return InvalidField("prompt.suffix.text",
                        absl::StrCat(text.size(), " bytes cannot fit the model's context of ",
                                     model.config().n_ctx_train, " tokens"));
  }
  if (const int64_t bad = FirstInvalidUtf8(text); bad >= 0) {
    return InvalidField("prompt.suffix.text", absl::StrCat("invalid UTF-8 at byte ", bad));
  }
  // Special-token texts stay text, so no mask (or end-of-text) can hide in it.
  std::vector<int32_t> out =
      model.tokenizer().Encode(text, /*add_special=*/false, /*parse_special=*/false);
  if (out.empty()) return InvalidField("prompt.suffix.text", "tokenizes to no tokens");
  return out;
}

}  // namespace dllm
