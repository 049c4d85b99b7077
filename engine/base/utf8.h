// UTF-8: encoding a code point, lenient decoding over byte offsets, and
// text made safe to print. The one place every module encodes or decodes.
#ifndef DLLM_ENGINE_BASE_UTF8_H_
#define DLLM_ENGINE_BASE_UTF8_H_

#include <cstdint>
#include <string>

#include "absl/strings/string_view.h"

namespace dllm {

// Appends the UTF-8 encoding of a valid code point (< 0x110000).
void AppendUtf8(uint32_t cp, std::string* out);

// A code point that is not valid UTF-8 here: a stray continuation byte, a
// truncated or overlong sequence, a surrogate or a value past U+10FFFF. It
// stands for exactly one byte.
inline constexpr uint32_t kInvalidCodepoint = 0xFFFFFFFFu;

struct Utf8Char {
  uint32_t cp = kInvalidCodepoint;
  int len = 1;  // bytes consumed, 1..4
};

// Decodes the character starting at `text[pos]` (`pos < text.size()`).
// Invalid input yields `kInvalidCodepoint` with `len` 1, so every byte of
// any input belongs to exactly one character.
Utf8Char DecodeUtf8At(absl::string_view text, size_t pos);

// `text` with invalid UTF-8 bytes and control characters (tab, newline and
// DEL included) written as \xNN, so that text taken from a file or a
// request (a key name, a token) cannot garble a terminal or a log line.
std::string PrintableText(absl::string_view text);

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_UTF8_H_
