#include "missile/flags/parse.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::flags {
namespace {

struct Tool {
  CLI::App app;
  std::string config;
  int number = 0;
  bool check = false;
  Tool() {
    Configure(app);
    app.add_option("--config", config);
    app.add_option("-n,--number", number);
    app.add_flag("--check-config", check);
  }
};

std::string Error(const std::vector<std::string>& args) {
  Tool tool;
  absl::Status s = Parse(tool.app, args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_EQ(s.message().find('\n'), std::string::npos);
  return std::string(s.message());
}

TEST(FlagsParseTest, ValueInlineOrNext) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--config=/etc/m.toml", "--number=-5"},
        std::vector<std::string>{"--config", "/etc/m.toml", "--number", "-5"}}) {
    Tool tool;
    ASSERT_TRUE(Parse(tool.app, args).ok());
    EXPECT_EQ(tool.config, "/etc/m.toml");
    EXPECT_EQ(tool.number, -5);
  }
}

TEST(FlagsParseTest, AValueIsTakenAsIsAndTheLastOneWins) {
  Tool tool;
  ASSERT_TRUE(
      Parse(tool.app, {"--config", "--check-config", "--config", "b", "--check-config"}).ok());
  EXPECT_EQ(tool.config, "b");
  EXPECT_TRUE(tool.check);
}

TEST(FlagsParseTest, UnknownOptionSuggestsTheNearest) {
  EXPECT_EQ(Error({"--confg", "x"}), "unknown option '--confg'; did you mean '--config'?");
  EXPECT_EQ(Error({"--check-confg=1"}),
            "unknown option '--check-confg'; did you mean '--check-config'?");
  EXPECT_EQ(Error({"--verbose"}), "unknown option '--verbose'");
  EXPECT_EQ(Error({"stray"}), "unexpected argument 'stray'");
}

TEST(FlagsParseTest, MissingValuesAndValuesOnFlags) {
  EXPECT_EQ(Error({"--config"}), "--config needs a value");
  EXPECT_EQ(Error({"--check-config=yes"}), "--check-config takes no value");
  EXPECT_THAT(Error({"--number", "x"}), ::testing::HasSubstr("x"));
}

TEST(FlagsParseTest, AnEmptyInlineValueIsAValue) {
  Tool tool;
  tool.config = "default";
  ASSERT_TRUE(Parse(tool.app, {"--config="}).ok());
  EXPECT_EQ(tool.config, "");
}

TEST(FlagsParseTest, OptionNames) {
  Tool tool;
  EXPECT_THAT(OptionNames(tool.app),
              ::testing::UnorderedElementsAre("--config", "--number", "-n", "--check-config"));
}

}  // namespace
}  // namespace missile::flags
