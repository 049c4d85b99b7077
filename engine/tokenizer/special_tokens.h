// The special token ids and flags of a GGUF file, read once by one function
// for both the model config and the tokenizer.
#ifndef DLLM_ENGINE_TOKENIZER_SPECIAL_TOKENS_H_
#define DLLM_ENGINE_TOKENIZER_SPECIAL_TOKENS_H_

#include <cstdint>
#include <span>
#include <string>
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

// The one statement of which token ids a caller may write on a canvas. Each
// returns why `id` may not, as a phrase to follow the id in a message ("is
// outside the vocabulary of 8192"), or an empty string when it may.
//
// Any canvas token, a mask included, is a row of the embedding table.
std::string OutsideVocabulary(int64_t id, int64_t n_vocab);
// A token a caller gives (a prompt's, a suffix's, a committed one) must
// also not be the mask: every sampler takes each mask on the canvas for a
// position to generate ("is the mask token").
std::string NotAGivenToken(int64_t id, int64_t n_vocab, int32_t mask);

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
