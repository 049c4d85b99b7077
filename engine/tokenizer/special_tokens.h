// The special token ids and flags of a GGUF file, read once by one function
// for both the model config and the tokenizer.
#ifndef DLLM_ENGINE_TOKENIZER_SPECIAL_TOKENS_H_
#define DLLM_ENGINE_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <span>
#include <vector>

#include "absl/status/statusor.h"
#include "engine/gguf/gguf_reader.h"

namespace dllm {

struct SpecialTokens {
  int32_t bos = -1;      // tokenizer.ggml.bos_token_id
  int32_t eos = -1;      // tokenizer.ggml.eos_token_id
  int32_t eot = -1;      // tokenizer.ggml.eot_token_id
  int32_t pad = -1;      // tokenizer.ggml.padding_token_id
  int32_t mask = -1;     // tokenizer.ggml.mask_token_id; required for diffusion
  bool add_bos = false;  // tokenizer.ggml.add_bos_token
  bool add_eos = false;  // tokenizer.ggml.add_eos_token
  // Further end-of-generation tokens the reference finds by their text
  // (Gemma 4's "<turn|>", "<end_of_turn>", "<|tool_response>"; MarkStopTexts).
  std::vector<int32_t> stop_texts;

  // The ids that end a generation: EOS, EoT and stop_texts, those present,
  // no repeats.
  std::vector<int32_t> StopIds() const;
};

// Adds to `tokens->stop_texts` the id of each of `texts` that is a token of
// `file`'s tokenizer.ggml.tokens (llama.cpp's vocabulary marks these
// end-of-generation by text).
absl::Status MarkStopTexts(const GgufFile& file, std::span<const char* const> texts,
                           SpecialTokens* tokens);

// Reads the ids (absent: -1) and flags. An id outside [0, n_vocab), or an
// add_* flag without its id, is INVALID_ARGUMENT naming the key.
// add_bos_token defaults as in llama.cpp: true for the llama3 pre-tokenizer,
// false for the others.
absl::StatusOr<SpecialTokens> ReadSpecialTokens(const GgufFile& file, int64_t n_vocab);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_SPECIAL_TOKENS_H_
