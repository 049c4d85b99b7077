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
