// The Unicode facts the byte-level BPE pre-tokenizers need: lenient UTF-8
// decoding over byte offsets, and the letter / number / White_Space classes
// of the regexes (\p{L}, \p{N}, \s). The class table is generated
// (scripts/gen-unicode-tables.py, unicode_tables.cc); llama.cpp carries its
// own, slightly newer tables, so code points assigned after our Unicode
// version may be classed differently (none of the golden strings hit this).
#ifndef DLLM_ENGINE_TOKENIZER_UNICODE_H_
#define DLLM_ENGINE_TOKENIZER_UNICODE_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"
#include "engine/base/utf8.h"

namespace dllm {

enum class CodepointCategory : uint8_t { kOther, kLetter, kNumber, kWhitespace };

// kInvalidCodepoint (engine/base/utf8.h) is classed kOther.
CodepointCategory CategoryOf(uint32_t cp);

// The Unicode version the category table was generated from, e.g. "14.0.0".
const char* UnicodeTableVersion();

namespace unicode_internal {
struct CategoryRange {
  uint32_t first;
  uint32_t last;
  CodepointCategory category;
};
extern const char kUnicodeVersion[];
extern const int kNumCategoryRanges;
extern const CategoryRange kCategoryRanges[];
}  // namespace unicode_internal

}  // namespace dllm

#endif  // DLLM_ENGINE_TOKENIZER_UNICODE_H_
