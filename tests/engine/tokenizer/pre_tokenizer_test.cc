#include "engine/tokenizer/pre_tokenizer.h"

#include <random>
#include <regex>
#include <string>
#include <vector>

#include "absl/strings/escaping.h"
#include "engine/tokenizer/unicode.h"
#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

using testing::StatusIs;

std::vector<std::string> Split(PreTokenizer pre, absl::string_view text) {
  std::vector<absl::string_view> words;
  SplitWords(pre, text, &words);
  return std::vector<std::string>(words.begin(), words.end());
}

using W = std::vector<std::string>;

TEST(PreTokenizerTest, Gpt2SplitsLikeItsRegex) {
  const PreTokenizer g = PreTokenizer::kGpt2;
  EXPECT_EQ(Split(g, "Hello world"), (W{"Hello", " world"}));
  EXPECT_EQ(Split(g, "many   spaces"), (W{"many", "  ", " spaces"}));
  EXPECT_EQ(Split(g, "trailing  "), (W{"trailing", "  "}));
  EXPECT_EQ(Split(g, "don't"), (W{"don", "'t"}));
  EXPECT_EQ(Split(g, "DON'T"), (W{"DON", "'", "T"}));  // case-sensitive contractions
  EXPECT_EQ(Split(g, "1234 x"), (W{"1234", " x"}));
  EXPECT_EQ(Split(g, "a\n\nb"), (W{"a", "\n", "\n", "b"}));
  EXPECT_EQ(Split(g, "x != y"), (W{"x", " !=", " y"}));
  EXPECT_EQ(Split(g, "\tx"), (W{"\t", "x"}));
  EXPECT_EQ(Split(g, ""), W{});
}

TEST(PreTokenizerTest, Qwen2AndLlama3SplitLikeTheirRegex) {
  const PreTokenizer q = PreTokenizer::kQwen2;
  EXPECT_EQ(Split(q, "1234"), (W{"1", "2", "3", "4"}));
  EXPECT_EQ(Split(PreTokenizer::kLlama3, "1234567"), (W{"123", "456", "7"}));
  EXPECT_EQ(Split(q, "DON'T"), (W{"DON", "'T"}));  // (?i:...)
  EXPECT_EQ(Split(q, "a\n\nb"), (W{"a", "\n\n", "b"}));
  EXPECT_EQ(Split(q, "x  \n  y"), (W{"x", "  \n", " ", " y"}));
  EXPECT_EQ(Split(q, "(hello)"), (W{"(hello", ")"}));
  EXPECT_EQ(Split(q, "a.\n\nb"), (W{"a", ".\n\n", "b"}));
  EXPECT_EQ(Split(q, "\tx"), (W{"\tx"}));
  EXPECT_EQ(Split(q, "\nx"), (W{"\n", "x"}));
}

// llama.cpp has no hand-written matcher for the bailingmoe regex: it runs
// std::regex (ECMAScript) over a "collapsed" text in which every non-ASCII
// code point becomes one byte standing for its class (letter 0xD2, number
// 0xD1, whitespace 0x0B, anything else 0xD0 and up), with \p{L} / \p{N}
// rewritten to those bytes plus their ASCII ranges. This is that reference,
// rebuilt from the facts of src/unicode.cpp, to hold the hand matcher to.
std::vector<std::string> SplitLikeLlamaCppStdRegex(const std::string& text) {
  std::vector<size_t> starts;
  std::string collapsed;
  for (size_t pos = 0; pos < text.size();) {
    const Utf8Char c = DecodeUtf8At(text, pos);
    starts.push_back(pos);
    if (c.cp < 128) {
      collapsed += static_cast<char>(c.cp);
    } else {
      switch (CategoryOf(c.cp)) {
        case CodepointCategory::kWhitespace:
          collapsed += '\x0B';
          break;
        case CodepointCategory::kLetter:
          collapsed += '\xD2';
          break;
        case CodepointCategory::kNumber:
          collapsed += '\xD1';
          break;
        default:
          collapsed += '\xD0';
          break;
      }
    }
    pos += c.len;
  }
  starts.push_back(text.size());
  const std::string letter =
                        "\xD2"
                        "A-Za-z",
                    number =
                        "\xD1"
                        "0-9";
  const std::regex re("'(?:[sSdDmMtT]|[lL][lL]|[vV][eE]|[rR][eE])|[^\\r\\n" + letter + number +
                      "]?[" + letter + "]+|[" + number + "]| ?[^\\s" + letter + number +
                      "]+[\\r\\n]*|\\s*[\\r\\n]|\\s+(?!\\S)|\\s+");
  std::vector<std::string> words;
  size_t at = 0;  // in code points
  for (auto it = std::sregex_iterator(collapsed.begin(), collapsed.end(), re);
       it != std::sregex_iterator(); ++it) {
    const size_t from = static_cast<size_t>(it->position()), to = from + it->length();
    if (from > at) words.push_back(text.substr(starts[at], starts[from] - starts[at]));
    words.push_back(text.substr(starts[from], starts[to] - starts[from]));
    at = to;
  }
  if (at + 1 < starts.size()) words.push_back(text.substr(starts[at]));
  return words;
}

TEST(PreTokenizerTest, BailingMoeSplitsLikeLlamaCppsStdRegex) {
  const PreTokenizer b = PreTokenizer::kBailingMoe;
  EXPECT_EQ(Split(b, "I'M HERE"), (W{"I", "'M", " HERE"}));
  EXPECT_EQ(Split(b, "}\n}\n\n"), (W{"}\n", "}\n\n"}));
  EXPECT_EQ(Split(b, "a  \n  b"), (W{"a", "  \n", " ", " b"}));
  EXPECT_EQ(Split(b, "12345"), (W{"1", "2", "3", "4", "5"}));
  // Random strings over the characters where the alternatives differ:
  // apostrophes before contraction letters in both cases, CR/LF runs,
  // ASCII and Unicode spaces, digits, letters, marks, CJK and emoji.
  const std::vector<std::string> pieces = {"'",
                                           "s",
                                           "S",
                                           "t",
                                           "LL",
                                           "ve",
                                           "Re",
                                           "d",
                                           "x",
                                           "Q",
                                           " ",
                                           "  ",
                                           "\t",
                                           "\n",
                                           "\r",
                                           "\r\n",
                                           "\xc2\xa0",
                                           "\xe3\x80\x80",
                                           "1",
                                           "\xd9\xa1",
                                           "7",
                                           ".",
                                           "!",
                                           "(",
                                           "_",
                                           "\xc3\xa9",
                                           "\xcc\x81",
                                           "\xe6\x97\xa5",
                                           "\xf0\x9f\x99\x82",
                                           "\xe2\x80\x94",
                                           "$"};
  std::mt19937 rng(12);
  for (int trial = 0; trial < 4000; ++trial) {
    std::string text;
    const int n = 1 + static_cast<int>(rng() % 12);
    for (int i = 0; i < n; ++i) text += pieces[rng() % pieces.size()];
    ASSERT_EQ(Split(b, text), SplitLikeLlamaCppStdRegex(text)) << absl::CHexEscape(text);
  }
}

TEST(PreTokenizerTest, InvalidBytesAreKept) {
  const std::string text =
      "a\xff"
      "b \x80";
  std::string joined;
  for (const std::string& w : Split(PreTokenizer::kQwen2, text)) joined += w;
  EXPECT_EQ(joined, text);
}

TEST(PreTokenizerTest, ParsesNames) {
  EXPECT_EQ(*ParsePreTokenizer("gpt-2"), PreTokenizer::kGpt2);
  EXPECT_EQ(*ParsePreTokenizer("qwen2"), PreTokenizer::kQwen2);
  EXPECT_EQ(*ParsePreTokenizer("llama-bpe"), PreTokenizer::kLlama3);
  for (const char* name : {"bailingmoe", "bailingmoe2", "llada-moe"}) {
    EXPECT_EQ(*ParsePreTokenizer(name), PreTokenizer::kBailingMoe) << name;
  }
  EXPECT_THAT(ParsePreTokenizer("starcoder").status(),
              StatusIs(absl::StatusCode::kUnimplemented, "'starcoder'"));
  EXPECT_EQ(PreTokenizerName(PreTokenizer::kQwen2), "qwen2");
}

TEST(UnicodeTest, ClassifiesCodepoints) {
  EXPECT_EQ(CategoryOf('a'), CodepointCategory::kLetter);
  EXPECT_EQ(CategoryOf(0xE9), CodepointCategory::kLetter);    // é
  EXPECT_EQ(CategoryOf(0x4F60), CodepointCategory::kLetter);  // 你
  EXPECT_EQ(CategoryOf(0x0661), CodepointCategory::kNumber);  // Arabic-Indic one
  EXPECT_EQ(CategoryOf(0x2167), CodepointCategory::kNumber);  // Roman numeral (Nl)
  EXPECT_EQ(CategoryOf(0xA0), CodepointCategory::kWhitespace);
  EXPECT_EQ(CategoryOf(0x3000), CodepointCategory::kWhitespace);
  EXPECT_EQ(CategoryOf(0x85), CodepointCategory::kWhitespace);
  EXPECT_EQ(CategoryOf(0x301), CodepointCategory::kOther);    // combining acute (Mn)
  EXPECT_EQ(CategoryOf(0x1F600), CodepointCategory::kOther);  // emoji
  EXPECT_EQ(CategoryOf(0x10FFFF), CodepointCategory::kOther);
  EXPECT_EQ(CategoryOf(kInvalidCodepoint), CodepointCategory::kOther);
  EXPECT_STREQ(UnicodeTableVersion(), "14.0.0");
}

TEST(UnicodeTest, DecodesUtf8Leniently) {
  const std::string s = "\xc3\xa9\xf0\x9f\x98\x80\xc3(\xed\xa0\x80";
  Utf8Char c = DecodeUtf8At(s, 0);
  EXPECT_EQ(c.cp, 0xE9u);
  EXPECT_EQ(c.len, 2);
  c = DecodeUtf8At(s, 2);
  EXPECT_EQ(c.cp, 0x1F600u);
  EXPECT_EQ(c.len, 4);
  c = DecodeUtf8At(s, 6);  // lead byte without continuation
  EXPECT_EQ(c.cp, kInvalidCodepoint);
  EXPECT_EQ(c.len, 1);
  EXPECT_EQ(DecodeUtf8At(s, 8).cp, kInvalidCodepoint);  // surrogate
  std::string out;
  AppendUtf8(0x1F600, &out);
  EXPECT_EQ(out, "\xf0\x9f\x98\x80");
}

}  // namespace
}  // namespace dllm
