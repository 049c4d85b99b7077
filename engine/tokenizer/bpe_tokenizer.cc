// Loading (validation, byte map, merge table, llama.cpp's token-type
// overrides) and the encode / decode paths of `BpeTokenizer`.
#include "engine/tokenizer/bpe_tokenizer.h"

#include <algorithm>
#include <queue>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_replace.h"
#include "engine/base/status_macros.h"
#include "engine/base/utf8.h"
#include "engine/tokenizer/unicode.h"

namespace dllm {

std::array<uint32_t, 256> ByteToCodepoint() {
  std::array<uint32_t, 256> map{};
  uint32_t next = 256;
  for (uint32_t b = 0; b < 256; ++b) {
    const bool printable = (b >= '!' && b <= '~') || (b >= 0xA1 && b <= 0xAC) || b >= 0xAE;
    map[b] = printable ? b : next++;
  }
  return map;
}

namespace {

// Texts llama.cpp treats as control tokens whatever their type (its
// "control-looking" overrides), so that e.g. Qwen's FIM tokens are only
// matched with parse_special. (llama.cpp also ends generation at the first
// group; dllm stops at the file's EOS and EoT ids only, SpecialTokens::StopIds.)
constexpr absl::string_view kEogTexts[] = {
    "<|eot_id|>",   "<|im_end|>",    "<|end|>",     "<end_of_turn>", "<|endoftext|>",
    "<|eom_id|>",   "<EOT>",         "<|fim_pad|>", "<fim-pad>",     "<PAD>",
    "<|fim_repo|>", "<|repo_name|>", "<fim-repo>",  "<REPO>",        "<|file_sep|>"};
constexpr absl::string_view kControlOnlyTexts[] = {"<|fim_prefix|>", "<fim-prefix>", "<PRE>",
                                                   "<|fim_suffix|>", "<fim-suffix>", "<SUF>",
                                                   "<|fim_middle|>", "<fim-middle>", "<MID>"};

int HexDigit(char c) {
  if (c >= '0' && c <= '9') return c - '0';
  if (c >= 'A' && c <= 'F') return c - 'A' + 10;
  if (c >= 'a' && c <= 'f') return c - 'a' + 10;
  return -1;
}

// llama.cpp's clean_up_tokenization_spaces passes, in place.
void CleanSpaces(std::string* text) {
  std::string& t = *text;
  // " ?", " !", " .", " ," lose the space.
  size_t total = t.empty() ? 0 : 1;
  for (size_t i = 1; i < t.size(); ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && (x == '?' || x == '!' || x == '.' || x == ',')) --total;
    t[total++] = x;
  }
  t.resize(total);
  // " ' " loses both spaces.
  total = t.empty() ? 0 : 1;
  for (size_t i = 1; i < t.size(); ++i) {
    const char x = t[i];
    if (x == '\'' && i + 1 < t.size() && t[i - 1] == ' ' && t[i + 1] == ' ') {
      --total;
      t[++i] = '\0';
    }
    t[total++] = x;
  }
  t.resize(total);
  // " 's", " 'm", " 're", " 've" lose the space.
  total = t.empty() ? 0 : 1;
  for (size_t i = 1; i < t.size(); ++i) {
    const char x = t[i];
    if (t[i - 1] == ' ' && x == '\'' && i + 1 < t.size()) {
      const char x1 = t[i + 1];
      if (x1 == 's' || x1 == 'm') {
        --total;
      } else if (i + 2 < t.size()) {
        const char x2 = t[i + 2];
        if ((x1 == 'r' && x2 == 'e') || (x1 == 'v' && x2 == 'e')) --total;
      }
    }
    t[total++] = x;
  }
  t.resize(total);
}

// The length a UTF-8 lead byte declares, as llama.cpp's unicode_len_utf8
// counts it (a stray continuation byte is 1).
size_t Utf8SequenceLength(char lead) {
  static constexpr size_t kByHighNibble[16] = {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 2, 2, 3, 4};
  return kByHighNibble[static_cast<unsigned char>(lead) >> 4];
}

absl::Status InvalidKey(absl::string_view key, absl::string_view why) {
  return absl::InvalidArgumentError(absl::StrCat("tokenizer: ", key, ": ", why));
}

}  // namespace

absl::StatusOr<BpeTokenizer> BpeTokenizer::FromGguf(const GgufFile& file) {
  BpeTokenizer t;
  DLLM_ASSIGN_OR_RETURN(absl::string_view model, file.GetString("tokenizer.ggml.model"));
  if (model != "gpt2" && model != "gemma4") {
    return absl::UnimplementedError(
        absl::StrCat("tokenizer: tokenizer.ggml.model '", model,
                     "' is not supported (gpt2: byte-level BPE; gemma4: SentencePiece-style BPE)"));
  }
  t.spm_style_ = model == "gemma4";
  // llama.cpp gives Gemma 4's vocabulary its own pre-tokenizer, whatever
  // tokenizer.ggml.pre says.
  DLLM_ASSIGN_OR_RETURN(absl::string_view pre, t.spm_style_
                                                   ? absl::StatusOr<absl::string_view>("gemma4")
                                                   : file.GetStringOr("tokenizer.ggml.pre", ""));
  if (pre.empty()) {
    return absl::UnimplementedError(
        "tokenizer: tokenizer.ggml.pre is missing (llama.cpp would use its multi-regex "
        "'default' pre-tokenizer, which is not supported)");
  }
  DLLM_ASSIGN_OR_RETURN(t.pre_, ParsePreTokenizer(pre));
  t.ignore_merges_ = t.pre_ == PreTokenizer::kLlama3;
  t.clean_spaces_ = t.pre_ == PreTokenizer::kGpt2;
  DLLM_RETURN_IF_ERROR(t.ReadVocabulary(file));
  DLLM_ASSIGN_OR_RETURN(t.special_ids_,
                        ReadSpecialTokens(file, static_cast<int64_t>(t.tokens_.size())));
  t.BuildPieces();
  DLLM_RETURN_IF_ERROR(t.ReadMerges(file));
  t.IndexSpecialTexts();
  return t;
}

// Tokens and their types, with llama.cpp's renames and control overrides.
absl::Status BpeTokenizer::ReadVocabulary(const GgufFile& file) {
  DLLM_ASSIGN_OR_RETURN(std::vector<absl::string_view> tokens,
                        file.GetStringArray("tokenizer.ggml.tokens"));
  if (tokens.empty()) return InvalidKey("tokenizer.ggml.tokens", "no tokens");
  if (tokens.size() > (1u << 30)) {
    return InvalidKey("tokenizer.ggml.tokens", absl::StrCat(tokens.size(), " tokens is too many"));
  }
  const size_t n = tokens.size();
  types_.assign(n, TokenType::kNormal);
  if (file.HasKey("tokenizer.ggml.token_type")) {
    DLLM_ASSIGN_OR_RETURN(std::vector<int64_t> types,
                          file.GetIntArray("tokenizer.ggml.token_type"));
    if (types.size() != n) {
      return InvalidKey("tokenizer.ggml.token_type",
                        absl::StrCat(types.size(), " entries for ", n, " tokens"));
    }
    for (size_t i = 0; i < n; ++i) {
      types_[i] =
          types[i] >= 1 && types[i] <= 6 ? static_cast<TokenType>(types[i]) : TokenType::kUndefined;
    }
  }
  tokens_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    // llama.cpp renames empty tokens so that every text is matchable.
    tokens_.emplace_back(tokens[i].empty() ? absl::StrCat("[EMPTY_", i, "]")
                                           : std::string(tokens[i]));
  }
  text_to_id_.reserve(n);
  for (size_t i = 0; i < n; ++i) {
    auto [it, inserted] = text_to_id_.try_emplace(tokens_[i], static_cast<int32_t>(i));
    if (!inserted) {
      return InvalidKey("tokenizer.ggml.tokens", absl::StrCat("token ", i, " '", tokens_[i],
                                                              "' repeats token ", it->second));
    }
  }
  for (absl::string_view text : kEogTexts) {
    if (int32_t id = FindToken(text); id >= 0) types_[id] = TokenType::kControl;
  }
  for (absl::string_view text : kControlOnlyTexts) {
    if (int32_t id = FindToken(text); id >= 0) types_[id] = TokenType::kControl;
  }
  return absl::OkStatus();
}

// The byte map (each byte's character token) and every token's bytes.
void BpeTokenizer::BuildPieces() {
  const size_t n = tokens_.size();
  const std::array<uint32_t, 256> byte_cp = ByteToCodepoint();
  absl::flat_hash_map<uint32_t, uint8_t> cp_to_byte;
  for (int b = 0; b < 256; ++b) {
    std::string ch;
    AppendUtf8(byte_cp[b], &ch);
    // SentencePiece-style vocabularies spell bytes <0xXX>, GPT-2's as a character.
    byte_token_[b] = FindToken(spm_style_ ? absl::StrFormat("<0x%02X>", b) : ch);
    cp_to_byte[byte_cp[b]] = static_cast<uint8_t>(b);
  }
  pieces_.resize(n);
  for (size_t i = 0; i < n; ++i) {
    const std::string& text = tokens_[i];
    std::string& piece = pieces_[i];
    switch (types_[i]) {
      case TokenType::kNormal:
        if (spm_style_) {  // U+2581 stands for a space
          piece = absl::StrReplaceAll(text, {{"\xe2\x96\x81", " "}});
          break;
        }
        for (size_t pos = 0; pos < text.size();) {
          const Utf8Char c = DecodeUtf8At(text, pos);
          auto it = cp_to_byte.find(c.cp);
          if (it != cp_to_byte.end()) {
            piece.push_back(static_cast<char>(it->second));
          } else {  // not a byte character: keep it as written
            piece.append(text, pos, c.len);
          }
          pos += c.len;
        }
        break;
      case TokenType::kControl:
      case TokenType::kUnknown:
      case TokenType::kUserDefined:
        piece = text;
        break;
      case TokenType::kByte:
        if (text.size() == 6 && text.compare(0, 3, "<0x") == 0 && text[5] == '>' &&
            HexDigit(text[3]) >= 0 && HexDigit(text[4]) >= 0) {
          piece.push_back(static_cast<char>(HexDigit(text[3]) * 16 + HexDigit(text[4])));
        }
        break;
      case TokenType::kUnused:
      case TokenType::kUndefined:
        break;
    }
  }
  // Special tokens match their text, so they count by it too.
  for (size_t i = 0; i < n; ++i) {
    max_token_bytes_ = std::max({max_token_bytes_, pieces_[i].size(), tokens_[i].size()});
  }
}

// Merges: rank = index; the first of repeated pairs wins, as in llama.cpp.
absl::Status BpeTokenizer::ReadMerges(const GgufFile& file) {
  DLLM_ASSIGN_OR_RETURN(std::vector<absl::string_view> merges,
                        file.GetStringArray("tokenizer.ggml.merges"));
  if (merges.size() > (1u << 30)) {
    return InvalidKey("tokenizer.ggml.merges", absl::StrCat(merges.size(), " merges is too many"));
  }
  merges_.reserve(merges.size());
  std::string joined;
  for (size_t i = 0; i < merges.size(); ++i) {
    const absl::string_view m = merges[i];
    auto bad = [&](absl::string_view why) {
      return InvalidKey("tokenizer.ggml.merges",
                        absl::StrCat("merge ", i, " '", m.substr(0, 200), "': ", why));
    };
    const size_t space = m.size() > 1 ? m.find(' ', 1) : absl::string_view::npos;
    if (space == absl::string_view::npos) return bad("no space between the two parts");
    const absl::string_view left = m.substr(0, space);
    const absl::string_view right = m.substr(space + 1);
    const int32_t lid = FindToken(left);
    const int32_t rid = FindToken(right);
    if (lid < 0) return bad(absl::StrCat("'", left, "' is not a token"));
    if (rid < 0) return bad(absl::StrCat("'", right, "' is not a token"));
    joined.assign(left.data(), left.size());
    joined.append(right.data(), right.size());
    const int32_t result = FindToken(joined);
    if (result < 0) return bad(absl::StrCat("the result '", joined, "' is not a token"));
    const uint64_t key = (static_cast<uint64_t>(lid) << 32) | static_cast<uint32_t>(rid);
    merges_.try_emplace(key, Merge{static_cast<int32_t>(i), result});
  }
  return absl::OkStatus();
}

// Tokens matched as whole strings before BPE, longest first (ties by id,
// where llama.cpp's unstable sort leaves the order unspecified).
void BpeTokenizer::IndexSpecialTexts() {
  for (size_t i = 0; i < tokens_.size(); ++i) {
    const TokenType type = types_[i];
    if (type == TokenType::kControl || type == TokenType::kUserDefined ||
        type == TokenType::kUnknown) {
      special_.push_back(static_cast<int32_t>(i));
    }
  }
  std::stable_sort(special_.begin(), special_.end(),
                   [this](int32_t a, int32_t b) { return tokens_[a].size() > tokens_[b].size(); });
}

int32_t BpeTokenizer::FindToken(absl::string_view text) const {
  auto it = text_to_id_.find(text);
  return it == text_to_id_.end() ? -1 : it->second;
}

void BpeTokenizer::EncodeWord(absl::string_view word, std::vector<int32_t>* out) const {
  if (ignore_merges_) {
    static const std::array<uint32_t, 256> kByteCp = ByteToCodepoint();
    std::string chars;
    for (unsigned char b : word) AppendUtf8(kByteCp[b], &chars);
    if (int32_t id = FindToken(chars); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  // One symbol per byte, in a linked list.
  const int32_t n = static_cast<int32_t>(word.size());
  std::vector<Symbol> syms(n);
  for (int32_t i = 0; i < n; ++i) {
    syms[i] = {byte_token_[static_cast<unsigned char>(word[i])], i - 1, i + 1 < n ? i + 1 : -1,
               static_cast<uint32_t>(i), 1};
  }
  MergeSymbols(syms);
  // Bytes whose character is missing from the vocabulary are dropped, as
  // llama.cpp drops them.
  for (int32_t i = n > 0 ? 0 : -1; i >= 0; i = syms[i].next) {
    if (syms[i].id >= 0) out->push_back(syms[i].id);
  }
}

void BpeTokenizer::EncodeSpmWord(absl::string_view word, std::vector<int32_t>* out) const {
  // A run of newlines that is a token is taken whole (llama.cpp's Gemma 4 rule).
  if (word.find_first_not_of('\n') == absl::string_view::npos) {
    if (int32_t id = FindToken(word); id >= 0) {
      out->push_back(id);
      return;
    }
  }
  std::vector<Symbol> syms;
  for (size_t pos = 0; pos < word.size();) {
    const size_t len = std::min(word.size() - pos, Utf8SequenceLength(word[pos]));
    const int32_t index = static_cast<int32_t>(syms.size());
    syms.push_back({FindToken(word.substr(pos, len)), index - 1, -1, static_cast<uint32_t>(pos),
                    static_cast<uint32_t>(len)});
    if (index > 0) syms[index - 1].next = index;
    pos += len;
  }
  MergeSymbols(syms);
  for (int32_t i = syms.empty() ? -1 : 0; i >= 0; i = syms[i].next) {
    if (syms[i].id >= 0) {
      out->push_back(syms[i].id);
      continue;
    }
    for (size_t k = syms[i].begin; k < syms[i].begin + syms[i].len; ++k) {
      const int32_t id = byte_token_[static_cast<unsigned char>(word[k])];
      if (id >= 0) out->push_back(id);
    }
  }
}

void BpeTokenizer::MergeSymbols(std::vector<Symbol>& syms) const {
  constexpr int32_t kDead = -2;  // merged away
  const int32_t n = static_cast<int32_t>(syms.size());
  struct Candidate {
    int32_t rank;
    int32_t left;
    int32_t right;
    int32_t left_id;
    int32_t right_id;
    int32_t result;
  };
  // Lowest rank first; among equal ranks the leftmost.
  auto later = [](const Candidate& a, const Candidate& b) {
    return a.rank > b.rank || (a.rank == b.rank && a.left > b.left);
  };
  std::priority_queue<Candidate, std::vector<Candidate>, decltype(later)> queue(later);
  auto consider = [&](int32_t left, int32_t right) {
    if (left < 0 || right < 0) return;
    const int32_t lid = syms[left].id;
    const int32_t rid = syms[right].id;
    if (lid < 0 || rid < 0) return;
    auto it = merges_.find((static_cast<uint64_t>(lid) << 32) | static_cast<uint32_t>(rid));
    if (it == merges_.end()) return;
    queue.push({it->second.rank, left, right, lid, rid, it->second.result});
  };
  for (int32_t i = 0; i + 1 < n; ++i) consider(i, i + 1);
  while (!queue.empty()) {
    const Candidate c = queue.top();
    queue.pop();
    Symbol& l = syms[c.left];
    Symbol& r = syms[c.right];
    if (l.id != c.left_id || r.id != c.right_id || l.next != c.right) continue;  // stale
    l.id = c.result;
    l.len += r.len;
    l.next = r.next;
    if (r.next >= 0) syms[r.next].prev = c.left;
    r.id = kDead;
    consider(l.prev, c.left);
    consider(c.left, l.next);
  }
}

void BpeTokenizer::EncodeText(absl::string_view text, std::vector<int32_t>* out) const {
  std::vector<absl::string_view> words;
  if (spm_style_) {
    // Spaces become U+2581 before the split, as SentencePiece's normaliser does.
    const std::string escaped = absl::StrReplaceAll(text, {{" ", "\xe2\x96\x81"}});
    SplitWords(pre_, escaped, &words);
    for (absl::string_view w : words) EncodeSpmWord(w, out);
    return;
  }
  SplitWords(pre_, text, &words);
  for (absl::string_view w : words) EncodeWord(w, out);
}

std::vector<int32_t> BpeTokenizer::Encode(absl::string_view text, bool add_special,
                                          bool parse_special) const {
  // Fragments: a special token (id >= 0) or raw text (id -1).
  struct Fragment {
    int32_t id;
    absl::string_view text;
  };
  std::vector<Fragment> frags;
  if (!text.empty()) frags.push_back({-1, text});
  std::vector<Fragment> next;
  for (int32_t sid : special_) {
    const TokenType type = types_[sid];
    if (!parse_special && type != TokenType::kUserDefined) continue;
    const absl::string_view st = tokens_[sid];
    next.clear();
    bool found = false;
    for (const Fragment& f : frags) {
      if (f.id >= 0) {
        next.push_back(f);
        continue;
      }
      absl::string_view rest = f.text;
      for (size_t at; (at = rest.find(st)) != absl::string_view::npos;) {
        found = true;
        if (at > 0) next.push_back({-1, rest.substr(0, at)});
        next.push_back({sid, {}});
        rest.remove_prefix(at + st.size());
      }
      if (!rest.empty()) next.push_back({-1, rest});
    }
    if (found) frags.swap(next);
  }

  std::vector<int32_t> out;
  if (add_special && special_ids_.add_bos) out.push_back(special_ids_.bos);
  for (const Fragment& f : frags) {
    if (f.id >= 0) {
      out.push_back(f.id);
    } else {
      EncodeText(f.text, &out);
    }
  }
  if (add_special && special_ids_.add_eos) out.push_back(special_ids_.eos);
  return out;
}

absl::StatusOr<std::string> BpeTokenizer::Decode(const std::vector<int32_t>& ids,
                                                 const DecodeOptions& options) const {
  std::string out;
  for (int32_t id : ids) {
    if (!IsValid(id)) {
      return absl::OutOfRangeError(
          absl::StrCat("tokenizer: token id ", id, " is outside the vocabulary of ", n_vocab()));
    }
    const TokenType type = types_[id];
    if (!options.render_special && (type == TokenType::kControl || type == TokenType::kUnknown)) {
      continue;
    }
    out += pieces_[id];
  }
  if (options.clean_spaces && clean_spaces_) CleanSpaces(&out);
  return out;
}

absl::StatusOr<std::string> StreamingDecoder::Push(int32_t id) {
  if (!tokenizer_->IsValid(id)) {
    return absl::OutOfRangeError(absl::StrCat(
        "tokenizer: token id ", id, " is outside the vocabulary of ", tokenizer_->n_vocab()));
  }
  const TokenType type = tokenizer_->Type(id);
  if (!render_special_ && (type == TokenType::kControl || type == TokenType::kUnknown)) {
    return std::string();
  }
  pending_ += tokenizer_->TokenPiece(id);
  std::string out;
  const size_t used = AppendReplacingInvalidUtf8(pending_, /*final=*/false, &out);
  pending_.erase(0, used);
  return out;
}

std::string StreamingDecoder::Finish() {
  std::string out;
  AppendReplacingInvalidUtf8(pending_, /*final=*/true, &out);
  pending_.clear();
  return out;
}

}  // namespace dllm
