// StopText: the streamed deltas concatenate to the text a whole response
// gets, however the text is split, and nothing of a stop string (or half a
// UTF-8 character) is let out early.
#include "service/http/stop_text.h"

#include <random>

#include "gtest/gtest.h"

namespace dllm {
namespace {

// The text StopText gives for `text` arriving in pieces at `cuts`.
std::string Streamed(const std::vector<std::string>& stops, const std::string& text,
                     const std::vector<size_t>& cuts, std::vector<std::string>* deltas = nullptr) {
  StopText stop(stops);
  std::string out;
  size_t from = 0;
  for (size_t cut : cuts) {
    const std::string d = stop.Add(text.substr(from, cut - from));
    if (deltas) deltas->push_back(d);
    out += d;
    from = cut;
  }
  out += stop.Add(text.substr(from));
  out += stop.Finish();
  EXPECT_EQ(out, stop.text());
  return out;
}

TEST(StopTextTest, CutsAtTheFirstStopString) {
  EXPECT_EQ(Streamed({"END"}, "abc END def END", {}), "abc ");
  EXPECT_EQ(Streamed({"x", "END"}, "abENDcx", {}), "ab");
  EXPECT_EQ(Streamed({"zz"}, "no stop here", {}), "no stop here");
}

TEST(StopTextTest, HoldsBackAPossibleStartOfAStopString) {
  std::vector<std::string> deltas;
  EXPECT_EQ(Streamed({"END"}, "abc EN", {5}, &deltas), "abc EN");
  // "E" could start "END": held until the next delta shows it does not.
  EXPECT_EQ(deltas, std::vector<std::string>{"abc "});
  deltas.clear();
  EXPECT_EQ(Streamed({"END"}, "abc ENDx", {5, 6}, &deltas), "abc ");
  EXPECT_EQ(deltas, (std::vector<std::string>{"abc ", ""}));
}

TEST(StopTextTest, NeverSplitsACharacter) {
  // "é" is two bytes; a stop string starting with its first byte's
  // character class must not make a delta end inside it.
  const std::string text = "caf\xc3\xa9 au lait";
  StopText stop({"\xc3\xa9t\xc3\xa9"});
  const std::string first = stop.Add(text.substr(0, 5));  // "café"
  EXPECT_EQ(first, "caf");
  std::string rest = stop.Add(text.substr(5));
  rest += stop.Finish();
  EXPECT_EQ(rest, "\xc3\xa9 au lait");
}

TEST(StopTextTest, AnySplitGivesTheWholeText) {
  std::mt19937 rng(7);
  const std::string text = "def fibonacci(n):\n    if n < 2:\n        return n\n    return END";
  const std::vector<std::vector<std::string>> stop_sets = {
      {}, {"\n\n"}, {"return"}, {"END", "if n"}, {"nope"}};
  for (const auto& stops : stop_sets) {
    const std::string whole = Streamed(stops, text, {});
    for (int trial = 0; trial < 200; ++trial) {
      std::vector<size_t> cuts;
      for (size_t i = 1; i < text.size(); ++i) {
        if (rng() % 4 == 0) cuts.push_back(i);
      }
      EXPECT_EQ(Streamed(stops, text, cuts), whole);
    }
  }
}

// llama-server's n_indent: the text ends at the first non-blank character
// of a later line indented less; the newline and the blanks stay, and the
// deltas need not hold anything back for it.
TEST(StopTextTest, NIndentCutsAtALineIndentedTooLittle) {
  const std::string text = "x + 1\n    y = 2\n\n  z\nw";
  for (size_t cut = 0; cut <= text.size(); ++cut) {
    StopText stop({}, 4);
    std::string out = stop.Add(text.substr(0, cut));
    out += stop.Add(text.substr(cut));
    out += stop.Finish();
    EXPECT_EQ(out, "x + 1\n    y = 2\n\n  ") << cut;
    EXPECT_TRUE(stop.stopped());
    EXPECT_EQ(stop.stop_word(), "");
  }
  // The first line is never cut; a stop string before the cut wins.
  StopText first({}, 4);
  EXPECT_EQ(first.Add("a\n        b"), "a\n        b");
  EXPECT_FALSE(first.stopped());
  StopText word({"= 2"}, 4);
  EXPECT_EQ(word.Add(text) + word.Finish(), "x + 1\n    y ");
  EXPECT_EQ(word.stop_word(), "= 2");
}

}  // namespace
}  // namespace dllm
