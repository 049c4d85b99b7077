// UTF-8: encoding a code point, decoding over byte offsets, replacing what
// is not UTF-8, and text made safe to print. The one place every module
// encodes, decodes or validates; ScanUtf8 is the one decoder under it all.
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

// The sequence starting at `text[pos]` (`pos < text.size()`): `valid` with
// its length, or else the length of its maximal subpart (Unicode 3.9: the
// longest prefix of some valid sequence, at least 1 byte), with `truncated`
// when that prefix runs to the end of `text` (a character cut off there).
struct Utf8Sequence {
  int len = 1;
  bool valid = false;
  bool truncated = false;
};
Utf8Sequence ScanUtf8(absl::string_view text, size_t pos);

// Decodes the character starting at `text[pos]` (`pos < text.size()`).
// Invalid input yields `kInvalidCodepoint` with `len` 1, so every byte of
// any input belongs to exactly one character.
Utf8Char DecodeUtf8At(absl::string_view text, size_t pos);

// The byte offset of the first byte that is not part of valid UTF-8, or -1.
int64_t FirstInvalidUtf8(absl::string_view text);

// Appends `in` to `out` with each maximal invalid subpart replaced by
// U+FFFD; returns the bytes consumed. Without `final`, stops before a
// character cut off at the end (the rest of it may come in the next piece).
size_t AppendReplacingInvalidUtf8(absl::string_view in, bool final, std::string* out);

// `bytes` as valid UTF-8 (invalid subparts replaced by U+FFFD).
std::string SanitizeUtf8(absl::string_view bytes);

// `text` with invalid UTF-8 bytes and control characters (tab, newline and
// DEL included) written as \xNN, so that text taken from a file or a
// request (a key name, a token) cannot garble a terminal or a log line.
std::string PrintableText(absl::string_view text);

}  // namespace dllm

#endif  // DLLM_ENGINE_BASE_UTF8_H_
