// The prompt of a GenerationRequest (text or token ids, the chat template,
// the infill suffix) checked and encoded, and the request's identity: its
// id, its seed, the model it names. Errors are INVALID_ARGUMENT naming the
// field ("prompt.token_ids.ids[3]: 8194 is the mask token").
#ifndef DLLM_SERVICE_ENGINE_PROMPT_VALIDATION_H_
#define DLLM_SERVICE_ENGINE_PROMPT_VALIDATION_H_

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/model/model.h"
#include "engine/tokenizer/chat_template.h"
#include "service/engine/generation_request.h"

namespace dllm {

inline constexpr size_t kMaxRequestIdBytes = 128;

// INVALID_ARGUMENT "FIELD: WHY", the shape of every request error.
absl::Status InvalidField(absl::string_view field, absl::string_view why);

// Fresh request id ("req-" + 16 hex digits) and seed, from a process-wide
// random source.
std::string NewRequestId();
uint64_t NewSeed();

// A client's request id: at most kMaxRequestIdBytes of printable ASCII.
absl::Status ValidateRequestId(absl::string_view id, absl::string_view field);

// The served file's name without its directory, and without ".gguf" too.
absl::string_view ModelFileName(absl::string_view path);
absl::string_view ModelFileStem(absl::string_view path);

// Whether `model` (a request's model field) names the served model: empty,
// general.name, or the GGUF file name with or without ".gguf".
bool NamesServedModel(absl::string_view model, const Model& served, absl::string_view path);

// The template a request names (`field` for errors, e.g.
// "prompt.chat_template"), or the served model's when `name` is empty.
absl::StatusOr<ChatTemplate> RequestChatTemplate(absl::string_view name, const Model& model,
                                                 absl::string_view field);

// A text to encode as Generate, Open and Tokenize take it: the encoding
// options (how.chat is the request's apply_chat_template) and the name of a
// chat template to use instead of the model's.
struct TextPrompt {
  absl::string_view text;
  absl::string_view chat_template;
  PromptEncoding how;
};
// The checks and the encoding every text prompt gets, whatever the RPC:
// UTF-8, system and chat_template only with apply_chat_template, a known
// template; errors name `field_prefix` + the field ("prompt.text", "text").
// Length bounds are the caller's (they differ per RPC).
absl::StatusOr<std::vector<int32_t>> EncodeTextPrompt(const TextPrompt& prompt, const Model& model,
                                                      absl::string_view field_prefix);

// Token ids a client puts on the canvas as they are (NotAGivenToken);
// errors name `field`.ids[i].
absl::StatusOr<std::vector<int32_t>> GivenTokenIds(std::span<const uint32_t> ids,
                                                   absl::string_view field, const ModelConfig& c);

// The prompt's ids, and the suffix's (infill; empty when none is set).
absl::StatusOr<std::vector<int32_t>> ValidatePrompt(const GenerationRequest::Prompt& prompt,
                                                    const Model& model);
absl::StatusOr<std::vector<int32_t>> ValidateSuffix(const GenerationRequest::Prompt& prompt,
                                                    const Model& model);

}  // namespace dllm

#endif  // DLLM_SERVICE_ENGINE_PROMPT_VALIDATION_H_
