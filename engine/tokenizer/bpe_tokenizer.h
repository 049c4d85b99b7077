// Byte-level BPE tokenizer built from a GGUF's tokenizer section
// (`tokenizer.ggml.model` = "gpt2"), matching llama.cpp's `common_tokenize`
// and detokenizer on the LLaDA and Dream vocabularies. Text is split by the
// pre-tokenizer `tokenizer.ggml.pre` names, each word's bytes are mapped to
// GPT-2's byte characters and merged by rank; special tokens are matched as
// whole strings first. `StreamingDecoder` turns ids into UTF-8 text
// incrementally. Chat templates live in chat_template.h.
#ifndef DLLM_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
#define DLLM_ENGINE_TOKENIZER_BPE_TOKENIZER_H_

#include <array>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "engine/gguf/gguf_reader.h"
#include "engine/tokenizer/pre_tokenizer.h"
#include "engine/tokenizer/special_tokens.h"

namespace dllm {

// `tokenizer.ggml.token_type` values (llama.cpp's llama_token_type).
enum class TokenType : uint8_t {
  kUndefined = 0,
  kNormal = 1,
  kUnknown = 2,
  kControl = 3,
  kUserDefined = 4,
  kUnused = 5,
  kByte = 6,
};

struct DecodeOptions {
  // Control and unknown tokens render as their text ("<|im_end|>"), as
  // llama.cpp's detokenizer with `special` = true; otherwise as nothing.
  bool render_special = true;
  // llama.cpp's `clean_up_tokenization_spaces` passes (" ," -> ",", " 's" ->
  // "'s", ...), applied only where the vocabulary asks for them (the gpt-2
  // pre-tokenizer; not qwen2/llama3). Off by default so that decoding
  // reproduces the encoded bytes exactly.
  bool clean_spaces = false;
};

// Immutable after construction; safe to share between threads.
class BpeTokenizer {
 public:
  // Builds the vocabulary, merge table and special-token list. A malformed
  // or inconsistent tokenizer section is INVALID_ARGUMENT naming the key and
  // index; an unsupported model or pre-tokenizer is UNIMPLEMENTED.
  static absl::StatusOr<BpeTokenizer> FromGguf(const GgufFile& file);

  BpeTokenizer(BpeTokenizer&&) = default;
  BpeTokenizer& operator=(BpeTokenizer&&) = default;
  BpeTokenizer(const BpeTokenizer&) = delete;  // `text_to_id_` views `tokens_`
  BpeTokenizer& operator=(const BpeTokenizer&) = delete;

  // `common_tokenize(text, add_special, parse_special)`: BOS first when
  // `add_special` and `add_bos_token` (EOS last with `add_eos_token`).
  // `parse_special` matches control (and unknown) token texts in `text`;
  // user-defined tokens are matched even without it, as in llama.cpp and HF.
  std::vector<int32_t> Encode(absl::string_view text, bool add_special, bool parse_special) const;

  // Concatenated token pieces. OUT_OF_RANGE for an id outside [0, n_vocab).
  // The result is bytes: it is valid UTF-8 only if the ids come from
  // complete characters.
  absl::StatusOr<std::string> Decode(const std::vector<int32_t>& ids,
                                     const DecodeOptions& options = {}) const;

  int32_t n_vocab() const { return static_cast<int32_t>(tokens_.size()); }
  bool IsValid(int32_t id) const { return id >= 0 && id < n_vocab(); }
  // The caller guarantees IsValid(id) for these.
  // The bytes a token stands for (control tokens: their text).
  const std::string& TokenPiece(int32_t id) const { return pieces_[id]; }
  // The token's text as stored in the GGUF (byte characters, e.g. "Ġworld").
  const std::string& TokenText(int32_t id) const { return tokens_[id]; }
  TokenType Type(int32_t id) const { return types_[id]; }
  bool IsControl(int32_t id) const { return types_[id] == TokenType::kControl; }
  // The id of a token text, or -1.
  int32_t FindToken(absl::string_view text) const;

  // Special ids from `tokenizer.ggml.*_token_id`; -1 when absent.
  int32_t bos() const { return special_ids_.bos; }
  int32_t eos() const { return special_ids_.eos; }
  int32_t eot() const { return special_ids_.eot; }
  bool add_bos() const { return special_ids_.add_bos; }
  bool add_eos() const { return special_ids_.add_eos; }
  const SpecialTokens& special() const { return special_ids_; }
  PreTokenizer pre_tokenizer() const { return pre_; }
  // The most bytes of text one token covers: a text of more than
  // n * max_token_bytes() bytes encodes to more than n tokens, which bounds
  // a prompt by its length before encoding it.
  size_t max_token_bytes() const { return max_token_bytes_; }
  size_t n_merges() const { return merges_.size(); }

 private:
  // The steps of FromGguf, in order.
  absl::Status ReadVocabulary(const GgufFile& file);
  void BuildPieces();
  absl::Status ReadMerges(const GgufFile& file);
  void IndexSpecialTexts();

  struct Merge {
    int32_t rank;
    int32_t result;
  };
  BpeTokenizer() = default;
  void EncodeWord(absl::string_view word, std::vector<int32_t>* out) const;
  // Gemma 4's word: one symbol per UTF-8 character (its token, or none),
  // merged by rank; a symbol that is no token becomes its <0xXX> byte
  // tokens (dropped where the vocabulary has none).
  void EncodeSpmWord(absl::string_view word, std::vector<int32_t>* out) const;
  // A symbol of a word during BPE: its token (-1: none; such a symbol never
  // merges), its neighbours in the linked list, and the word's bytes it covers.
  struct Symbol {
    int32_t id;
    int32_t prev;
    int32_t next;
    uint32_t begin, len;  // bytes of the word
  };
  // Applies the merges to `syms` by rank (leftmost first among equals).
  void MergeSymbols(std::vector<Symbol>& syms) const;
  void EncodeText(absl::string_view text, std::vector<int32_t>* out) const;

  std::vector<std::string> tokens_;                             // (n_vocab) GGUF texts
  std::vector<std::string> pieces_;                             // (n_vocab) rendered bytes
  std::vector<TokenType> types_;                                // (n_vocab)
  absl::flat_hash_map<absl::string_view, int32_t> text_to_id_;  // views into tokens_
  // Keyed by (left id << 32 | right id).
  absl::flat_hash_map<uint64_t, Merge> merges_;
  // Each byte's token, or -1: its GPT-2 character, or (spm_style_) <0xXX>.
  std::array<int32_t, 256> byte_token_{};
  std::vector<int32_t> special_;  // matched before BPE, longest text first

  size_t max_token_bytes_ = 1;
  PreTokenizer pre_ = PreTokenizer::kGpt2;
  bool ignore_merges_ = false;  // llama3: a word that is a token is emitted whole
  bool clean_spaces_ = false;   // the vocabulary asks for clean_spaces
  // tokenizer.ggml.model "gemma4": SentencePiece-style BPE on raw UTF-8
  // (spaces written U+2581, <0xXX> byte tokens) instead of GPT-2's byte map.
  bool spm_style_ = false;
  SpecialTokens special_ids_;  // bos, eos, ... from the file
};

// GPT-2's bytes_to_unicode: the code point that stands for each byte in a
// byte-level BPE vocabulary (printable Latin-1 bytes stand for themselves,
// the other 68 take code points 256, 257, ... in byte order).
std::array<uint32_t, 256> ByteToCodepoint();

// Decodes ids one at a time into UTF-8 text, never splitting a character:
// bytes of an incomplete character are held until it completes. A sequence
// that is proven invalid becomes U+FFFD (one per maximal invalid subpart, as
// Unicode recommends), and `Finish` flushes a trailing incomplete one as
// U+FFFD. For ids whose `Decode` is valid UTF-8 the concatenated output
// equals `Decode` (without clean_spaces, which is not incremental).
// One thread at a time; the tokenizer must outlive it.
class StreamingDecoder {
 public:
  explicit StreamingDecoder(const BpeTokenizer* tokenizer, bool render_special = true)
      : tokenizer_(tokenizer), render_special_(render_special) {}

  // The text completed by `id` (possibly empty). OUT_OF_RANGE for an
  // invalid id, which leaves the decoder unchanged.
  absl::StatusOr<std::string> Push(int32_t id);
  // Flushes held bytes (as U+FFFD) and resets.
  std::string Finish();
  size_t pending_bytes() const { return pending_.size(); }

 private:
  const BpeTokenizer* tokenizer_;  // non-owning
  bool render_special_;
  std::string pending_;
};

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_BPE_TOKENIZER_H_
