// Hand-written matchers for the GPT-2 and Qwen2/Llama-3 split regexes. Each
// alternative is tried in the regex's order at the current position, with
// the regex's greedy-with-backtracking meaning worked out per alternative
// (the comments give the alternative being matched).
#include "engine/tokenizer/pre_tokenizer.h"

#include <cstdint>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "engine/tokenizer/unicode.h"

namespace dllm {
namespace {

using Cat = CodepointCategory;

// The text decoded once: code point, class and byte offset per character.
struct Chars {
  std::vector<uint32_t> cp;
  std::vector<Cat> cat;
  std::vector<size_t> offset;  // size() + 1 entries; the last is text.size()

  explicit Chars(absl::string_view text) {
    for (size_t pos = 0; pos < text.size();) {
      const Utf8Char c = DecodeUtf8At(text, pos);
      cp.push_back(c.cp);
      cat.push_back(CategoryOf(c.cp));
      offset.push_back(pos);
      pos += c.len;
    }
    offset.push_back(text.size());
  }
  size_t size() const { return cp.size(); }
  bool Is(size_t i, Cat c) const { return i < size() && cat[i] == c; }
  bool IsNewline(size_t i) const { return i < size() && (cp[i] == '\r' || cp[i] == '\n'); }
};

uint32_t AsciiLower(uint32_t c) { return c >= 'A' && c <= 'Z' ? c + 32 : c; }

// 's|'t|'re|'ve|'m|'ll|'d, optionally case-insensitive. Returns the length
// in characters, or 0.
size_t MatchContraction(const Chars& s, size_t i, bool ignore_case) {
  if (s.cp[i] != '\'' || i + 1 >= s.size()) return 0;
  auto fold = [&](size_t k) { return ignore_case ? AsciiLower(s.cp[k]) : s.cp[k]; };
  const uint32_t c1 = fold(i + 1);
  if (c1 == 's' || c1 == 't' || c1 == 'm' || c1 == 'd') return 2;
  if (i + 2 >= s.size()) return 0;
  const uint32_t c2 = fold(i + 2);
  if ((c1 == 'r' && c2 == 'e') || (c1 == 'v' && c2 == 'e') || (c1 == 'l' && c2 == 'l')) return 3;
  return 0;
}

size_t RunEnd(const Chars& s, size_t i, Cat c) {
  while (i < s.size() && s.cat[i] == c) ++i;
  return i;
}

// \s+(?!\S)|\s+ at a whitespace character: the whole run when it ends the
// text or is a single character, else all but its last character (which
// then leads the next word, e.g. " world").
size_t MatchWhitespaceRun(const Chars& s, size_t i) {
  const size_t end = RunEnd(s, i, Cat::kWhitespace);
  if (end == s.size() || end - i == 1) return end - i;
  return end - i - 1;
}

size_t MatchGpt2(const Chars& s, size_t i) {
  if (size_t n = MatchContraction(s, i, /*ignore_case=*/false)) return n;
  // ` ?\p{L}+`, ` ?\p{N}+`, ` ?[^\s\p{L}\p{N}]+`
  const size_t j =
      (s.cp[i] == ' ' && i + 1 < s.size() && !s.Is(i + 1, Cat::kWhitespace)) ? i + 1 : i;
  if (!s.Is(j, Cat::kWhitespace)) return RunEnd(s, j, s.cat[j]) - i;
  return MatchWhitespaceRun(s, i);
}

size_t MatchQwen2(const Chars& s, size_t i, size_t max_digits) {
  if (size_t n = MatchContraction(s, i, /*ignore_case=*/true)) return n;
  // [^\r\n\p{L}\p{N}]?\p{L}+
  if (s.Is(i, Cat::kLetter)) return RunEnd(s, i, Cat::kLetter) - i;
  if (!s.IsNewline(i) && !s.Is(i, Cat::kNumber) && s.Is(i + 1, Cat::kLetter)) {
    return RunEnd(s, i + 1, Cat::kLetter) - i;
  }
  // \p{N}{1,max_digits}
  if (s.Is(i, Cat::kNumber)) {
    size_t j = i;
    while (j < s.size() && j - i < max_digits && s.cat[j] == Cat::kNumber) ++j;
    return j - i;
  }
  // ` ?[^\s\p{L}\p{N}]+[\r\n]*`
  const size_t j = (s.cp[i] == ' ' && s.Is(i + 1, Cat::kOther)) ? i + 1 : i;
  if (s.Is(j, Cat::kOther)) {
    size_t k = RunEnd(s, j, Cat::kOther);
    while (s.IsNewline(k)) ++k;
    return k - i;
  }
  // \s*[\r\n]+ : up to the last newline of the whitespace run.
  const size_t end = RunEnd(s, i, Cat::kWhitespace);
  for (size_t k = end; k > i; --k) {
    if (s.IsNewline(k - 1)) return k - i;
  }
  return MatchWhitespaceRun(s, i);
}

}  // namespace

absl::StatusOr<PreTokenizer> ParsePreTokenizer(absl::string_view pre) {
  if (pre == "gpt-2") return PreTokenizer::kGpt2;
  if (pre == "qwen2" || pre == "qwen2.5" || pre == "qwen-2.5" || pre == "deepseek-r1-qwen" ||
      pre == "megrez") {
    return PreTokenizer::kQwen2;
  }
  if (pre == "bailingmoe" || pre == "bailingmoe2" || pre == "llada-moe") {
    return PreTokenizer::kBailingMoe;
  }
  if (pre == "gemma4") return PreTokenizer::kGemma4;
  if (pre == "llama3" || pre == "llama-v3" || pre == "llama-bpe" || pre == "falcon3" ||
      pre == "pixtral") {
    return PreTokenizer::kLlama3;
  }
  return absl::UnimplementedError(absl::StrCat(
      "tokenizer: pre-tokenizer '", pre,
      "' (tokenizer.ggml.pre) is not supported; supported: gpt-2, qwen2, llama3 (llama-bpe), ",
      "bailingmoe (llada-moe), gemma4"));
}

absl::string_view PreTokenizerName(PreTokenizer pre) {
  switch (pre) {
    case PreTokenizer::kGpt2:
      return "gpt-2";
    case PreTokenizer::kQwen2:
      return "qwen2";
    case PreTokenizer::kLlama3:
      return "llama3";
    case PreTokenizer::kBailingMoe:
      return "bailingmoe";
    case PreTokenizer::kGemma4:
      return "gemma4";
  }
  return "?";
}

void SplitWords(PreTokenizer pre, absl::string_view text, std::vector<absl::string_view>* words) {
  const Chars s(text);
  for (size_t i = 0; i < s.size();) {
    size_t n = 0;
    switch (pre) {
      case PreTokenizer::kGpt2:
        n = MatchGpt2(s, i);
        break;
      case PreTokenizer::kQwen2:
      case PreTokenizer::kBailingMoe:
        n = MatchQwen2(s, i, 1);
        break;
      case PreTokenizer::kLlama3:
        n = MatchQwen2(s, i, 3);
        break;
      case PreTokenizer::kGemma4: {
        const bool newline = s.cp[i] == '\n';
        n = 1;
        while (i + n < s.size() && (s.cp[i + n] == '\n') == newline) ++n;
        break;
      }
    }
    if (n == 0) n = 1;  // unreachable: every class has an alternative
    words->push_back(text.substr(s.offset[i], s.offset[i + n] - s.offset[i]));
    i += n;
  }
}

}  // namespace dllm
