// engine/base/flags: the one flag parser of dllm, dllm-server and dllm-client.
#include "engine/base/flags.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace dllm {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

absl::StatusOr<ParsedFlags> Parse(std::vector<std::string> args) {
  std::vector<char*> argv;
  for (std::string& a : args) argv.push_back(a.data());
  return ParseFlags(static_cast<int>(argv.size()), argv.data(), {"steps", "name", "temp"},
                    {"json"});
}

TEST(FlagsTest, ValuesBooleansPositionalsAndTheEndOfFlags) {
  auto f = Parse({"generate", "--steps", "8", "--name=a b", "--json", "x", "--", "--steps", "-h"});
  ASSERT_TRUE(f.ok()) << f.status();
  EXPECT_EQ(f->Get("steps"), "8");
  EXPECT_EQ(f->Get("name"), "a b");
  EXPECT_TRUE(f->Has("json"));
  EXPECT_FALSE(f->help);  // -h after -- is an argument
  EXPECT_EQ(f->TakeFirstPositional(), "generate");
  EXPECT_THAT(f->positional, ElementsAre("x", "--steps", "-h"));
}

TEST(FlagsTest, MistakesNameTheFlag) {
  EXPECT_THAT(Parse({"--nope", "1"}).status().message(), HasSubstr("unknown flag --nope"));
  EXPECT_THAT(Parse({"--steps"}).status().message(), HasSubstr("--steps needs a value"));
  EXPECT_THAT(Parse({"--json=1"}).status().message(), HasSubstr("--json takes no value"));
}

TEST(FlagsTest, NumbersAreCheckedAgainstTheirType) {
  auto f = Parse({"--steps", "3000000000", "--temp", "nan"});
  ASSERT_TRUE(f.ok());
  int32_t small = 7;
  EXPECT_THAT(
      std::string(f->GetNumber("steps", &small).message()),
      HasSubstr("--steps: '3000000000' is not a whole number in [-2147483648, 2147483647]"));
  EXPECT_EQ(small, 7);  // unchanged on error
  uint32_t steps = 0;
  EXPECT_TRUE(f->GetNumber("steps", &steps).ok());
  EXPECT_EQ(steps, 3000000000u);
  double temp = 1;
  EXPECT_THAT(std::string(f->GetNumber("temp", &temp).message()), HasSubstr("not a finite number"));
  EXPECT_EQ(*f->GetInt("name", 5), 5);  // absent: the fallback
  EXPECT_THAT(std::string(f->GetIntInRange("steps", 1, 1, 64).status().message()),
              HasSubstr("--steps 3000000000 is outside [1, 64]"));
  // Not a number, or beyond int64: the flag's own range, not int64's
  // (issue #34 R11).
  auto g = Parse({"--steps", "99999999999999999999", "--name", "abc"});
  ASSERT_TRUE(g.ok());
  EXPECT_EQ(std::string(g->GetIntInRange("steps", 1, 1, 64).status().message()),
            "--steps: '99999999999999999999' is not a whole number in [1, 64]");
  EXPECT_EQ(std::string(g->GetIntInRange("name", 0, 0, 1000).status().message()),
            "--name: 'abc' is not a whole number in [0, 1000]");
}

TEST(FlagsTest, CheckOnlyRefusesFlagsOfOtherCommands) {
  auto f = Parse({"--steps", "3", "--json"});
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->CheckOnly({"steps", "json"}).ok());
  EXPECT_THAT(std::string(f->CheckOnly({"steps"}).message()), HasSubstr("unknown flag --json"));
}

}  // namespace
}  // namespace dllm
