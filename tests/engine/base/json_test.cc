#include "engine/base/json.h"

#include "gtest/gtest.h"
#include "tests/testing/test_paths.h"

namespace dllm {
namespace {

TEST(JsonTest, ParsesAndDumpsRoundTrip) {
  auto j = Json::Parse(R"({"a": [1, 2.5, -3e2, true, null], "s": "x\"\u00e9\ud83d\ude00", "o": {}})");
  ASSERT_TRUE(j.ok()) << j.status();
  EXPECT_EQ((*j)["a"][0].as_int(), 1);
  EXPECT_DOUBLE_EQ((*j)["a"][1].as_double(), 2.5);
  EXPECT_DOUBLE_EQ((*j)["a"][2].as_double(), -300);
  EXPECT_TRUE((*j)["a"][3].as_bool());
  EXPECT_TRUE((*j)["a"][4].is_null());
  EXPECT_EQ((*j)["s"].as_string(), "x\"\xc3\xa9\xf0\x9f\x98\x80");
  auto again = Json::Parse(j->Dump());
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->Dump(), j->Dump());
}

TEST(JsonTest, FloatsRoundTripExactly) {
  const double v = 9.999999974752427e-07;
  auto j = Json::Parse(Json(v).Dump());
  ASSERT_TRUE(j.ok());
  EXPECT_EQ(j->as_double(), v);
}

TEST(JsonTest, RejectsMalformedText) {
  for (const char* bad : {"", "{", "[1,", "{\"a\" 1}", "\"abc", "tru", "[1] x"}) {
    EXPECT_FALSE(Json::Parse(bad).ok()) << bad;
  }
}

}  // namespace
}  // namespace dllm
