// engine/base/utf8: the one decoder (ScanUtf8) and what is built on it.
#include "engine/base/utf8.h"

#include <string>

#include "gtest/gtest.h"

namespace dllm {
namespace {

TEST(Utf8Test, FindsTheFirstInvalidByte) {
  EXPECT_EQ(FirstInvalidUtf8("plain"), -1);
  EXPECT_EQ(FirstInvalidUtf8("h\xc3\xa9llo \xf0\x9f\x98\x80"), -1);
  EXPECT_EQ(FirstInvalidUtf8("ab\xff"), 2);
  EXPECT_EQ(FirstInvalidUtf8("\xed\xa0\x80"), 0);      // surrogate
  EXPECT_EQ(FirstInvalidUtf8("\xc0\xaf"), 0);          // overlong
  EXPECT_EQ(FirstInvalidUtf8("\xf4\x90\x80\x80"), 0);  // past U+10FFFF
  EXPECT_EQ(FirstInvalidUtf8("x\xe2\x82"), 1);         // truncated
}

// Table 3-8 of the Unicode standard (U+FFFD for maximal subparts); Python's
// bytes.decode("utf-8", "replace") gives the same.
TEST(Utf8Test, ReplacesMaximalSubpartsAsTheUnicodeStandardShows) {
  const std::string fffd = "\xef\xbf\xbd";
  EXPECT_EQ(SanitizeUtf8("\x61\xF1\x80\x80\xE1\x80\xC2\x62\x80\x63\x80\xBF\x64"),
            "a" + fffd + fffd + fffd + "b" + fffd + "c" + fffd + fffd + "d");
  EXPECT_EQ(SanitizeUtf8("ok \xe2\x82\xac"), "ok \xe2\x82\xac");
}

TEST(Utf8Test, AStreamKeepsACharacterCutOffAtTheEnd) {
  std::string out;
  EXPECT_EQ(AppendReplacingInvalidUtf8("a\xe2\x82", /*final=*/false, &out), 1u);
  EXPECT_EQ(out, "a");
  out.clear();
  EXPECT_EQ(AppendReplacingInvalidUtf8("a\xe2\x82", /*final=*/true, &out), 3u);
  EXPECT_EQ(out, "a\xef\xbf\xbd");
}

TEST(Utf8Test, DecodeAgreesWithEncodeOnEveryCodePoint) {
  for (uint32_t cp = 0; cp < 0x110000; ++cp) {
    if (cp >= 0xD800 && cp <= 0xDFFF) continue;
    std::string s;
    AppendUtf8(cp, &s);
    const Utf8Char c = DecodeUtf8At(s, 0);
    ASSERT_EQ(c.cp, cp);
    ASSERT_EQ(c.len, static_cast<int>(s.size()));
  }
}

}  // namespace
}  // namespace dllm
