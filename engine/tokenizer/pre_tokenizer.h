// Pre-tokenizers of byte-level BPE vocabularies: split text into the "words"
// that BPE merges within, exactly as the regexes llama.cpp selects from
// `tokenizer.ggml.pre` would, but matched by hand over code points (no
// std::regex: it is slow and lacks \p classes). No normalization is applied,
// as in llama.cpp (the HF Qwen tokenizer's NFC step is not).
#ifndef DLLM_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
#define DLLM_ENGINE_TOKENIZER_PRE_TOKENIZER_H_

#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"

namespace dllm {

enum class PreTokenizer {
  // 's|'t|'re|'ve|'m|'ll|'d| ?\p{L}+| ?\p{N}+| ?[^\s\p{L}\p{N}]+|\s+(?!\S)|\s+
  kGpt2,
  // (?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]+|\s+(?!\S)|\s+
  kQwen2,
  // As kQwen2 with \p{N}{1,3} (digits in groups of up to three).
  kLlama3,
  // '(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\r\n\p{L}\p{N}]?\p{L}+|\p{N}|
  //  ?[^\s\p{L}\p{N}]+[\r\n]*|\s*[\r\n]|\s+(?!\S)|\s+
  // LLaDA-8B / LLaDA-1.5 / LLaDA-MoE (llama.cpp's BAILINGMOE). It differs
  // from kQwen2 only in `\s*[\r\n]` for `\s*[\r\n]+`, and the two split
  // alike: `\s*` backtracks to the run's last newline either way.
  kBailingMoe,
  // [^\n]+|[\n]+ : Gemma 4's (and DiffusionGemma's) SentencePiece-style BPE,
  // which splits only at newline runs (spaces are already U+2581).
  kGemma4,
};

// Maps a `tokenizer.ggml.pre` value as llama.cpp does: "gpt-2"; "qwen2",
// "qwen2.5", "qwen-2.5", "deepseek-r1-qwen", "megrez"; "llama3", "llama-v3",
// "llama-bpe", "falcon3", "pixtral"; "bailingmoe", "bailingmoe2",
// "llada-moe"; "gemma4". Anything else (llama.cpp knows many more, and an empty value
// selects its multi-regex "default") is UNIMPLEMENTED, naming it.
absl::StatusOr<PreTokenizer> ParsePreTokenizer(absl::string_view pre);
absl::string_view PreTokenizerName(PreTokenizer pre);  // "gpt-2", "qwen2", "llama3", "bailingmoe"

// Appends the words of `text` to `words`, as views into `text`. Together
// they cover `text` exactly, in order. Bytes that are not valid UTF-8 are
// kept, each classed like punctuation.
void SplitWords(PreTokenizer pre, absl::string_view text, std::vector<absl::string_view>* words);

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_PRE_TOKENIZER_H_
