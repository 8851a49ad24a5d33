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
  EXPECT_EQ(Error({"--check-config="}), "--check-config takes no value");
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

TEST(FlagsParseTest, GivenOnceCountsEverySpelling) {
  Tool tool;
  ASSERT_TRUE(Parse(tool.app, {"--config", "a", "--config=b"}).ok());
  absl::Status s = GivenOnce({tool.app.get_option("--config")});
  EXPECT_EQ(s.message(), "--config given twice");
  EXPECT_TRUE(GivenOnce({tool.app.get_option("--number")}).ok());
}

// A tool with commands and a global option that may come before or after the command.
struct Commands {
  CLI::App app;
  bool json = false;
  int pid = 0;
  CLI::App* status;
  CLI::App* set;
  std::vector<const CLI::Option*> json_flags;
  Commands() {
    Configure(app);
    status = AddCommand(app, "status");
    set = AddCommand(app, "set");
    AddCommand(app, "help", /*listed=*/false);
    for (CLI::App* a : {&app, status, set}) json_flags.push_back(a->add_flag("--json", json));
    set->add_option("--pid", pid);
  }
};

std::string CommandError(const std::vector<std::string>& args) {
  Commands tool;
  absl::Status s = Parse(tool.app, args);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  return std::string(s.message());
}

TEST(FlagsParseTest, CommandsTakeTheirOptionsAndGlobalOnesOnEitherSide) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--json", "set", "--pid", "3"},
        std::vector<std::string>{"set", "--pid=3", "--json"}}) {
    Commands tool;
    ASSERT_TRUE(Parse(tool.app, args).ok());
    EXPECT_TRUE(tool.set->parsed());
    EXPECT_FALSE(tool.status->parsed());
    EXPECT_TRUE(tool.json);
    EXPECT_EQ(tool.pid, 3);
  }
  Commands tool;
  ASSERT_TRUE(Parse(tool.app, {"--json", "status", "--json"}).ok());
  EXPECT_EQ(GivenOnce({tool.json_flags[0], tool.json_flags[1]}).message(), "--json given twice");
}

TEST(FlagsParseTest, CommandErrorsNameTheCommand) {
  EXPECT_EQ(CommandError({"stauts"}), "unknown command 'stauts'; did you mean 'status'?");
  EXPECT_EQ(CommandError({"hepl"}), "unknown command 'hepl'; did you mean 'help'?");
  EXPECT_EQ(CommandError({"frobnicate"}),
            "unknown command 'frobnicate' (status or set; try --help)");
  EXPECT_EQ(CommandError({"status", "--jsn"}),
            "status: unknown option '--jsn'; did you mean '--json'?");
  EXPECT_EQ(CommandError({"status", "--pid", "3"}), "status: unknown option '--pid'");
  EXPECT_EQ(CommandError({"--jsn", "status"}), "unknown option '--jsn'; did you mean '--json'?");
  EXPECT_EQ(CommandError({"status", "set"}), "status: unexpected argument 'set'");
  EXPECT_EQ(CommandError({"set", "now"}), "set: unexpected argument 'now'");
  EXPECT_EQ(CommandError({"set", "--pid"}), "--pid needs a value");
}

TEST(FlagsParseTest, ThenRestLeavesTheProgramAlone) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"--config", "c", "--check-config", "prog", "--config", "--"},
        std::vector<std::string>{"--config=c", "--check-config", "--", "prog", "--config", "--"}}) {
    Tool tool;
    std::vector<std::string> rest;
    absl::Status s = ParseThenRest(tool.app, args, rest);
    ASSERT_TRUE(s.ok()) << s.message();
    EXPECT_EQ(tool.config, "c");
    EXPECT_TRUE(tool.check);
    EXPECT_THAT(rest, ::testing::ElementsAre("prog", "--config", "--"));
  }
  Tool tool;
  std::vector<std::string> rest;
  ASSERT_TRUE(ParseThenRest(tool.app, {"--config", "--", "--", "-x"}, rest).ok());
  EXPECT_EQ(tool.config, "--");
  EXPECT_THAT(rest, ::testing::ElementsAre("-x"));
  EXPECT_EQ(ParseThenRest(tool.app, {"--gpu", "0", "p"}, rest).message(), "unknown option '--gpu'");
  EXPECT_EQ(ParseThenRest(tool.app, {"--config"}, rest).message(), "--config needs a value");
}

}  // namespace
}  // namespace missile::flags
