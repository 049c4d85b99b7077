// The exception-free edges of service/json/json.h around nlohmann::json.
#include "service/json/json.h"

#include "gtest/gtest.h"

namespace dllm {
namespace {

TEST(JsonTest, ParseErrorsAreStatusesThatSayWhere) {
  for (const char* bad : {"", "{", "[1,", "{\"a\" 1}", "\"abc", "tru", "[1] x"}) {
    absl::StatusOr<Json> j = ParseJson(bad);
    ASSERT_FALSE(j.ok()) << bad;
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(j.status().message().find("column"), absl::string_view::npos) << j.status();
  }
}

// Found by openai_request_fuzzer: nlohmann throws out_of_range, not a
// parse_error, for a number beyond double's range.
TEST(JsonTest, NumbersOutOfRangeAreErrorsToo) {
  for (const char* bad : {"1e99999", "[-1e400]", "{\"max_tokens\": 9e999}"}) {
    absl::StatusOr<Json> j = ParseJson(bad);
    ASSERT_FALSE(j.ok()) << bad;
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
  }
}

// Issue #25 N1: a client's body is bounded in depth and values before any
// tree is built; errors say which bound. Syntax errors still say where.
TEST(JsonTest, BoundedParseRefusesDeepOrLargeDocumentsBeforeBuildingThem) {
  const JsonLimits limits{.max_depth = 4, .max_values = 10};
  EXPECT_TRUE(ParseJson("[[[[1]]]]", limits).ok());
  EXPECT_TRUE(ParseJson("[1,2,3,4,5,6,7,8,9]", limits).ok());  // 10 values with the array
  const std::string deep(4 << 20, '[');  // the issue's 4 MiB body: refused at depth 5
  for (const auto& [text, says] :
       {std::pair<std::string, std::string>{"[[[[[1]]]]]", "nested deeper than 4"},
        {deep, "nested deeper than 4"},
        {"[1,2,3,4,5,6,7,8,9,10]", "more than 10 values"},
        {"{\"a\": [{}, {}, {}, {}, {}, {}, {}, {}, {}]}", "more than 10 values"},
        {"[1,", "column"},
        {"[1e99999]", "number overflow"}}) {
    absl::StatusOr<Json> j = ParseJson(text, limits);
    ASSERT_FALSE(j.ok()) << text.substr(0, 40);
    EXPECT_EQ(j.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(j.status().message().find(says), absl::string_view::npos) << j.status();
  }
  // The defaults take a token-id prompt of 100k ids.
  std::string ids = "[0";
  for (int i = 1; i < 100000; ++i) ids += ",7";
  ids += "]";
  EXPECT_TRUE(ParseJson(ids, JsonLimits{}).ok());
}

// Issue #34 R1: an object's members are bounded too (they are inserted by a
// linear scan), and a body of many small containers parses in one linear
// pass (HttpApi times it by the server's CPU).
TEST(JsonTest, BoundedParseBoundsAnObjectsMembers) {
  const JsonLimits limits{.max_object_members = 3};
  EXPECT_TRUE(
      ParseJson(R"({"a": 1, "b": {"c": 2, "d": 3, "e": 4}, "f": [5, 6, 7, 8]})", limits).ok());
  absl::StatusOr<Json> j = ParseJson(R"({"x": {"a": 1, "b": 2, "c": 3, "d": 4}})", limits);
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("more than 3 members"), absl::string_view::npos)
      << j.status();
  // Duplicate keys count as members: each one is a scan.
  EXPECT_FALSE(ParseJson(R"({"a": 1, "a": 2, "a": 3, "a": 4})", limits).ok());

  std::string objects = "[{}";
  for (int i = 1; i < 131000; ++i) objects += ",{}";
  objects += "]";
  absl::StatusOr<Json> many = ParseJson(objects, JsonLimits{});
  ASSERT_TRUE(many.ok()) << many.status();
  EXPECT_EQ(many->size(), 131000u);
}

TEST(JsonTest, ReadJsonFileNamesTheFile) {
  absl::StatusOr<Json> j = ReadJsonFile("/nonexistent/x.json");
  ASSERT_FALSE(j.ok());
  EXPECT_NE(j.status().message().find("/nonexistent/x.json"), absl::string_view::npos);
}

TEST(JsonTest, DumpReplacesBytesThatAreNotUtf8) {
  Json j = {{"piece", std::string("a\xe2\x82")}};  // a truncated U+20AC
  EXPECT_EQ(DumpJson(j), "{\"piece\":\"a\xef\xbf\xbd\"}");
}

TEST(JsonTest, ObjectsKeepInsertionOrderAndFloatsRoundTrip) {
  Json j = Json::object();
  j["z"] = 1;
  j["a"] = 9.999999974752427e-07;
  EXPECT_EQ(DumpJson(j), "{\"z\":1,\"a\":9.999999974752427e-07}");
  absl::StatusOr<Json> back = ParseJson(DumpJson(j));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ((*back)["a"].get<double>(), 9.999999974752427e-07);
}

TEST(JsonTest, FindMember) {
  Json j = {{"a", 1}};
  ASSERT_NE(FindMember(j, "a"), nullptr);
  EXPECT_EQ(FindMember(j, "a")->get<int>(), 1);
  EXPECT_EQ(FindMember(j, "b"), nullptr);
  EXPECT_EQ(FindMember(Json::array(), "a"), nullptr);
}

TEST(JsonTest, InvalidUtf8IsRefusedNamingTheMember) {
  const std::string body = "{\"a\": \"ok\", \"input_suffix\": \"x\xff\"}";
  absl::StatusOr<Json> parsed = ParseJson(body, JsonLimits{});
  ASSERT_FALSE(parsed.ok());
  EXPECT_EQ(parsed.status().message(), "input_suffix: invalid UTF-8 at byte 30 of the body");
  EXPECT_EQ(KeyBefore("{\"k\\\"\": [\"v\"]}", 12), "k\\\"");
  EXPECT_EQ(KeyBefore("[\"x\"]", 3), "");
}

}  // namespace
}  // namespace dllm
