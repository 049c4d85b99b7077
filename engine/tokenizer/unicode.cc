// UTF-8 decoding and the category lookup (binary search over the generated
// ranges, with an ASCII table in front since most text is ASCII).
#include "engine/tokenizer/unicode.h"

#include <algorithm>
#include <array>

namespace dllm {
namespace {

using unicode_internal::CategoryRange;

constexpr std::array<CodepointCategory, 128> MakeAsciiTable() {
  std::array<CodepointCategory, 128> t{};
  for (int c = 0; c < 128; ++c) {
    if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {
      t[c] = CodepointCategory::kLetter;
    } else if (c >= '0' && c <= '9') {
      t[c] = CodepointCategory::kNumber;
    } else if (c == ' ' || (c >= 0x09 && c <= 0x0D)) {
      t[c] = CodepointCategory::kWhitespace;
    } else {
      t[c] = CodepointCategory::kOther;
    }
  }
  return t;
}
constexpr std::array<CodepointCategory, 128> kAscii = MakeAsciiTable();

}  // namespace

Utf8Char DecodeUtf8At(absl::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const unsigned char b0 = s[pos];
  if (b0 < 0x80) return {b0, 1};
  int len;
  uint32_t cp;
  uint32_t min;
  if ((b0 & 0xE0) == 0xC0) {
    len = 2, cp = b0 & 0x1F, min = 0x80;
  } else if ((b0 & 0xF0) == 0xE0) {
    len = 3, cp = b0 & 0x0F, min = 0x800;
  } else if ((b0 & 0xF8) == 0xF0) {
    len = 4, cp = b0 & 0x07, min = 0x10000;
  } else {
    return {};
  }
  if (pos + len > n) return {};
  for (int i = 1; i < len; ++i) {
    const unsigned char b = s[pos + i];
    if ((b & 0xC0) != 0x80) return {};
    cp = (cp << 6) | (b & 0x3F);
  }
  if (cp < min || cp > 0x10FFFF || (cp >= 0xD800 && cp <= 0xDFFF)) return {};
  return {cp, len};
}

CodepointCategory CategoryOf(uint32_t cp) {
  if (cp < 128) return kAscii[cp];
  if (cp == kInvalidCodepoint) return CodepointCategory::kOther;
  const CategoryRange* begin = unicode_internal::kCategoryRanges;
  const CategoryRange* end = begin + unicode_internal::kNumCategoryRanges;
  const CategoryRange* it = std::upper_bound(
      begin, end, cp, [](uint32_t v, const CategoryRange& r) { return v < r.first; });
  if (it == begin) return CodepointCategory::kOther;
  --it;
  return cp <= it->last ? it->category : CodepointCategory::kOther;
}

const char* UnicodeTableVersion() { return unicode_internal::kUnicodeVersion; }

}  // namespace dllm
