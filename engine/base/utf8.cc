#include "engine/base/utf8.h"

#include "absl/strings/str_format.h"

namespace dllm {

void AppendUtf8(uint32_t cp, std::string* out) {
  if (cp < 0x80) {
    out->push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out->push_back(static_cast<char>(0xC0 | (cp >> 6)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else if (cp < 0x10000) {
    out->push_back(static_cast<char>(0xE0 | (cp >> 12)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  } else {
    out->push_back(static_cast<char>(0xF0 | (cp >> 18)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
    out->push_back(static_cast<char>(0x80 | (cp & 0x3F)));
  }
}

Utf8Sequence ScanUtf8(absl::string_view text, size_t pos) {
  const auto* s = reinterpret_cast<const unsigned char*>(text.data());
  const size_t n = text.size();
  const unsigned char b0 = s[pos];
  if (b0 < 0x80) return {1, true, false};
  // Table 3-7 of the Unicode standard: the lead byte fixes the length and
  // the range of the second byte (which excludes overlong forms, surrogates
  // and values past U+10FFFF); later bytes are 80..BF.
  int len = 0;
  unsigned char lo = 0x80, hi = 0xBF;
  if (b0 >= 0xC2 && b0 <= 0xDF) {
    len = 2;
  } else if (b0 >= 0xE0 && b0 <= 0xEF) {
    len = 3;
    if (b0 == 0xE0) lo = 0xA0;
    if (b0 == 0xED) hi = 0x9F;
  } else if (b0 >= 0xF0 && b0 <= 0xF4) {
    len = 4;
    if (b0 == 0xF0) lo = 0x90;
    if (b0 == 0xF4) hi = 0x8F;
  }
  if (len == 0) return {1, false, false};
  int k = 1;
  for (; k < len && pos + k < n; ++k) {
    const unsigned char b = s[pos + k];
    if (k == 1 ? (b < lo || b > hi) : (b < 0x80 || b > 0xBF)) break;
  }
  if (k == len) return {len, true, false};
  return {k, false, pos + k == n};
}

Utf8Char DecodeUtf8At(absl::string_view text, size_t pos) {
  const Utf8Sequence seq = ScanUtf8(text, pos);
  if (!seq.valid) return {};
  const auto* s = reinterpret_cast<const unsigned char*>(text.data()) + pos;
  static constexpr unsigned char kLeadMask[] = {0, 0x7F, 0x1F, 0x0F, 0x07};
  uint32_t cp = s[0] & kLeadMask[seq.len];
  for (int i = 1; i < seq.len; ++i) cp = (cp << 6) | (s[i] & 0x3F);
  return {cp, seq.len};
}

int64_t FirstInvalidUtf8(absl::string_view text) {
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Sequence seq = ScanUtf8(text, pos);
    if (!seq.valid) return static_cast<int64_t>(pos);
    pos += static_cast<size_t>(seq.len);
  }
  return -1;
}

size_t AppendReplacingInvalidUtf8(absl::string_view in, bool final, std::string* out) {
  size_t pos = 0;
  while (pos < in.size()) {
    const Utf8Sequence seq = ScanUtf8(in, pos);
    if (seq.valid) {
      out->append(in.data() + pos, static_cast<size_t>(seq.len));
    } else if (seq.truncated && !final) {
      break;
    } else {
      out->append("\xEF\xBF\xBD");  // U+FFFD
    }
    pos += static_cast<size_t>(seq.len);
  }
  return pos;
}

std::string SanitizeUtf8(absl::string_view bytes) {
  std::string out;
  out.reserve(bytes.size());
  AppendReplacingInvalidUtf8(bytes, /*final=*/true, &out);
  return out;
}

std::string PrintableText(absl::string_view text) {
  std::string out;
  out.reserve(text.size());
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = DecodeUtf8At(text, pos);
    const bool control = c.cp < 0x20 || c.cp == 0x7F || (c.cp >= 0x80 && c.cp < 0xA0);
    if (c.cp == kInvalidCodepoint || control) {
      for (int i = 0; i < c.len; ++i) {
        absl::StrAppendFormat(&out, "\\x%02x", static_cast<unsigned char>(text[pos + i]));
      }
    } else {
      out.append(text.data() + pos, static_cast<size_t>(c.len));
    }
    pos += c.len;
  }
  return out;
}

}  // namespace dllm
