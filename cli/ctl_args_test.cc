#include "ctl_args.h"

#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "missile/common/compute_settings.h"
#include "missile/flags/suggest.h"

namespace missile::cli {
namespace {

using flags::DidYouMean;
using flags::EditDistance;
using ::testing::HasSubstr;

absl::StatusOr<CtlArgs> Parse(std::vector<std::string> args) {
  return ParseCtlArgs(args, "/default.sock");
}

std::string Error(std::vector<std::string> args) {
  absl::StatusOr<CtlArgs> parsed = Parse(std::move(args));
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
  return std::string(parsed.status().message());
}

TEST(DefaultSocketTest, EnvironmentOverridesDefault) {
  EXPECT_EQ(DefaultSocket(nullptr), "/run/missile/missiled.sock");
  EXPECT_EQ(DefaultSocket(""), "/run/missile/missiled.sock");
  EXPECT_EQ(DefaultSocket("/tmp/m.sock"), "/tmp/m.sock");
}

TEST(CtlArgsTest, Status) {
  absl::StatusOr<CtlArgs> a = Parse({"status"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, CtlCommand::kStatus);
  EXPECT_EQ(a->socket, "/default.sock");
  EXPECT_FALSE(a->json);
}

TEST(CtlArgsTest, GlobalOptionsBeforeOrAfterTheCommand) {
  absl::StatusOr<CtlArgs> a = Parse({"--socket", "/s", "--json", "tenants"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, CtlCommand::kTenants);
  EXPECT_EQ(a->socket, "/s");
  EXPECT_TRUE(a->json);

  a = Parse({"tenants", "--socket=/t", "--json"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->socket, "/t");
  EXPECT_TRUE(a->json);
}

TEST(CtlArgsTest, Help) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"--help"}, {"-h"}, {"help"}, {"status", "--help"}, {"set", "--pid", "1", "-h"}}) {
    absl::StatusOr<CtlArgs> a = Parse(args);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->command, CtlCommand::kHelp);
  }
  EXPECT_THAT(CtlUsage(), HasSubstr("usage: missilectl"));
}

TEST(CtlArgsTest, Version) {
  for (auto args : std::vector<std::vector<std::string>>{
           {"--version"}, {"status", "--version"}, {"--socket", "/s", "--version"}}) {
    absl::StatusOr<CtlArgs> a = Parse(args);
    ASSERT_TRUE(a.ok()) << a.status();
    EXPECT_EQ(a->command, CtlCommand::kVersion);
  }
  EXPECT_THAT(CtlUsage(), HasSubstr("--version"));
}

TEST(CtlArgsTest, DidYouMean) {
  EXPECT_EQ(Error({"stauts"}), "unknown command 'stauts'; did you mean 'status'?");
  EXPECT_EQ(Error({"tenant"}), "unknown command 'tenant'; did you mean 'tenants'?");
  EXPECT_EQ(Error({"frobnicate"}),
            "unknown command 'frobnicate' (status, tenants, set, top or check; try --help)");
  EXPECT_EQ(Error({"status", "--jsn"}), "status: unknown option '--jsn'; did you mean '--json'?");
  EXPECT_EQ(Error({"--sockt", "/s", "status"}),
            "unknown option '--sockt'; did you mean '--socket'?");
  EXPECT_EQ(Error({"set", "--pid", "3", "--wieght", "5"}),
            "set: unknown option '--wieght'; did you mean '--weight'?");
  EXPECT_EQ(Error({"set", "--pid", "3", "--class-too", "ls"}),
            "set: unknown option '--class-too'; did you mean '--class-to'?");
  EXPECT_EQ(Error({"set", "--window-u", "5"}),
            "set: unknown option '--window-u'; did you mean '--window-us'?");
  EXPECT_EQ(Error({"set", "--pid", "3", "--verbose"}), "set: unknown option '--verbose'");
}

TEST(SuggestTest, EditDistance) {
  EXPECT_EQ(EditDistance("", ""), 0u);
  EXPECT_EQ(EditDistance("status", "status"), 0u);
  EXPECT_EQ(EditDistance("stauts", "status"), 1u);  // one swap
  EXPECT_EQ(EditDistance("--jsn", "--json"), 1u);
  EXPECT_EQ(EditDistance("kitten", "sitting"), 3u);
  EXPECT_EQ(EditDistance("", "abc"), 3u);
  // Equally near candidates: no guess.
  EXPECT_EQ(DidYouMean("--clas", {"--class", "--clash"}), "");
  EXPECT_EQ(DidYouMean("x", {"y"}), "; did you mean 'y'?");
  EXPECT_EQ(DidYouMean("xyz", {"abc"}), "");
}

TEST(CtlArgsTest, UsageErrors) {
  EXPECT_THAT(Error({}), HasSubstr("no command"));
  EXPECT_THAT(Error({"stats"}), HasSubstr("unknown command 'stats'"));
  EXPECT_THAT(Error({"--verbose", "status"}), HasSubstr("unknown option '--verbose'"));
  EXPECT_THAT(Error({"status", "extra"}), HasSubstr("status: unexpected argument 'extra'"));
  EXPECT_THAT(Error({"tenants", "--pid", "3"}), HasSubstr("tenants: unknown option '--pid'"));
  EXPECT_THAT(Error({"--socket"}), HasSubstr("--socket needs a value"));
  EXPECT_THAT(Error({"--socket=", "status"}), HasSubstr("--socket: empty path"));
  EXPECT_THAT(Error({"--socket", "/a", "--socket", "/b", "status"}), HasSubstr("given twice"));
  EXPECT_THAT(Error({"--socket", "/a", "status", "--socket=/b"}),
              HasSubstr("--socket given twice"));
  EXPECT_THAT(Error({"status", "tenants"}), HasSubstr("status: unexpected argument 'tenants'"));
  EXPECT_THAT(Error({"--json=yes", "status"}), HasSubstr("--json takes no value"));
}

TEST(CtlArgsTest, SetByPid) {
  absl::StatusOr<CtlArgs> a = Parse({"set", "--pid", "1234", "--priority", "-5", "--quota", "8G"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, CtlCommand::kSet);
  EXPECT_EQ(a->set.pid, 1234u);
  EXPECT_EQ(a->set.priority, -5);
  EXPECT_EQ(a->set.quota_bytes, uint64_t{8} << 30);

  v1::SetPolicyRequest req = BuildSetPolicyRequest(a->set);
  EXPECT_EQ(req.target_case(), v1::SetPolicyRequest::kPid);
  EXPECT_EQ(req.pid(), 1234u);
  EXPECT_TRUE(req.has_priority());
  EXPECT_EQ(req.priority(), -5);
  EXPECT_EQ(req.quota_bytes(), uint64_t{8} << 30);
  EXPECT_FALSE(req.has_weight());
  EXPECT_FALSE(req.has_new_class());
  EXPECT_FALSE(req.has_class_quota_bytes());
}

TEST(CtlArgsTest, SetByNameChangesClassAndWeight) {
  absl::StatusOr<CtlArgs> a =
      Parse({"set", "--name=trainer", "--class-to", "be", "--weight", "1048576"});
  ASSERT_TRUE(a.ok()) << a.status();
  v1::SetPolicyRequest req = BuildSetPolicyRequest(a->set);
  EXPECT_EQ(req.target_case(), v1::SetPolicyRequest::kName);
  EXPECT_EQ(req.name(), "trainer");
  EXPECT_TRUE(req.has_new_class());
  EXPECT_EQ(req.new_class(), v1::BEST_EFFORT);
  EXPECT_EQ(req.weight(), 1048576u);
  EXPECT_FALSE(req.has_priority());
}

TEST(CtlArgsTest, SetClassDefaults) {
  absl::StatusOr<CtlArgs> a = Parse({"--json", "set", "--class", "ls", "--quota", "8GiB",
                                     "--class-quota", "64G", "--priority", "19"});
  ASSERT_TRUE(a.ok()) << a.status();
  v1::SetPolicyRequest req = BuildSetPolicyRequest(a->set);
  EXPECT_EQ(req.target_case(), v1::SetPolicyRequest::kTenantClass);
  EXPECT_EQ(req.tenant_class(), v1::LATENCY_SENSITIVE);
  EXPECT_EQ(req.quota_bytes(), uint64_t{8} << 30);
  EXPECT_EQ(req.class_quota_bytes(), uint64_t{64} << 30);
  EXPECT_EQ(req.priority(), 19);
  EXPECT_FALSE(req.has_new_class());
}

// Sizes read as missiled's configuration reads them: `set --class be --quota 95` once set a
// 95-byte quota and kept it.
TEST(CtlArgsTest, AQuotaWithoutAUnitIsRefusedAsTheConfigurationRefusesIt) {
  for (const char* flag : {"--quota", "--class-quota"}) {
    const std::string error = Error({"set", "--class", "be", flag, "95"});
    EXPECT_THAT(error, HasSubstr(std::string(flag) + ": "));
    EXPECT_THAT(error, HasSubstr("a number without a unit is ambiguous"));
    EXPECT_THAT(error, HasSubstr("\"95%\", \"95GiB\" or \"95B\""));
  }
  EXPECT_THAT(Error({"set", "--pid", "1", "--quota", "1.5"}), HasSubstr("ambiguous"));
  absl::StatusOr<CtlArgs> a = Parse({"set", "--class", "be", "--quota", "95B"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(BuildSetPolicyRequest(a->set).quota_bytes(), 95u);
}

TEST(CtlArgsTest, AQuotaMayBeAPercentageOfThePool) {
  absl::StatusOr<CtlArgs> a =
      Parse({"set", "--class", "be", "--quota", "12.5%", "--class-quota", "50%"});
  ASSERT_TRUE(a.ok()) << a.status();
  v1::SetPolicyRequest req = BuildSetPolicyRequest(a->set);
  EXPECT_FALSE(req.has_quota_bytes());
  EXPECT_FALSE(req.has_class_quota_bytes());
  EXPECT_EQ(req.quota_percent(), 12.5);
  EXPECT_EQ(req.class_quota_percent(), 50.0);
  EXPECT_FALSE(req.force());
  EXPECT_THAT(Error({"set", "--pid", "1", "--quota", "0%"}), HasSubstr("--quota: "));
  EXPECT_THAT(Error({"set", "--pid", "1", "--quota", "101%"}), HasSubstr("at most 100%"));
  EXPECT_THAT(Error({"set", "--class", "be", "--quota", "60%", "--class-quota", "50%"}),
              HasSubstr("--quota cannot exceed --class-quota"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--quota", "5%", "--quota", "8G"}),
              HasSubstr("--quota given twice"));
}

TEST(CtlArgsTest, AZeroQuotaNeedsForce) {
  EXPECT_THAT(Error({"set", "--class", "be", "--quota", "0"}),
              HasSubstr("--quota 0 leaves every tenant of the class no memory"));
  EXPECT_THAT(Error({"set", "--class", "be", "--quota", "0GiB"}), HasSubstr("--force"));
  EXPECT_THAT(Error({"set", "--class", "be", "--class-quota", "0"}),
              HasSubstr("--class-quota 0 leaves the class no memory"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--quota", "0"}), HasSubstr("--force"));
  absl::StatusOr<CtlArgs> a = Parse({"set", "--class", "be", "--quota", "0", "--force"});
  ASSERT_TRUE(a.ok()) << a.status();
  v1::SetPolicyRequest req = BuildSetPolicyRequest(a->set);
  EXPECT_TRUE(req.has_quota_bytes());
  EXPECT_EQ(req.quota_bytes(), 0u);
  EXPECT_TRUE(req.force());
  EXPECT_THAT(Error({"set", "--force", "--pacing", "off"}), HasSubstr("(got --force)"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--force=yes", "--quota", "1G"}),
              HasSubstr("--force takes no value"));
}

TEST(CtlArgsTest, ALatencyBudgetForATenantOrTheLsClass) {
  absl::StatusOr<CtlArgs> a = Parse({"set", "--name", "web", "--budget-pct", "150"});
  ASSERT_TRUE(a.ok()) << a.status();
  v1::SetPolicyRequest req = BuildSetPolicyRequest(a->set);
  EXPECT_EQ(req.target_case(), v1::SetPolicyRequest::kName);
  ASSERT_TRUE(req.has_budget_pct());
  EXPECT_EQ(req.budget_pct(), 150u);
  EXPECT_FALSE(req.has_priority());
  a = Parse({"set", "--class", "ls", "--budget-pct", "1000"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(BuildSetPolicyRequest(a->set).tenant_class(), v1::LATENCY_SENSITIVE);
  EXPECT_EQ(BuildSetPolicyRequest(a->set).budget_pct(), 1000u);
  // 0 clears it (and is sent as such); a BE tenant moved to LS may get one with the move.
  a = Parse({"set", "--pid", "12", "--budget-pct", "0"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(BuildSetPolicyRequest(a->set).has_budget_pct());
  EXPECT_EQ(BuildSetPolicyRequest(a->set).budget_pct(), 0u);
  EXPECT_TRUE(Parse({"set", "--pid", "12", "--class-to", "ls", "--budget-pct", "200"}).ok());
  // Without it, no budget is sent.
  a = Parse({"set", "--pid", "12", "--weight", "3"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(BuildSetPolicyRequest(a->set).has_budget_pct());

  for (const char* bad : {"99", "1", "1001", "-100", "150%", "abc"}) {
    EXPECT_THAT(Error({"set", "--name", "web", "--budget-pct", bad}),
                HasSubstr(std::string("--budget-pct: '") + bad +
                          "' is not a budget in [100, 1000] percent, or 0 to clear it"));
  }
  EXPECT_THAT(Error({"set", "--class", "be", "--budget-pct", "150"}),
              HasSubstr("class be has no latency budget; only LS tenants have one"));
  EXPECT_THAT(Error({"set", "--pid", "12", "--class-to", "be", "--budget-pct", "150"}),
              HasSubstr("a tenant moved to class be has no latency budget"));
  EXPECT_THAT(Error({"set", "--budget-pct", "150", "--ls-budget-pct", "200"}),
              HasSubstr("(got --budget-pct)"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--budget-pct", "150", "--budget-pct", "200"}),
              HasSubstr("--budget-pct given twice"));
  EXPECT_THAT(CtlUsage(), HasSubstr("--budget-pct N (LS only"));
}

TEST(CtlArgsTest, SetErrors) {
  EXPECT_THAT(Error({"set", "--priority", "1"}),
              HasSubstr("exactly one of --pid, --name or --class"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--name", "x", "--priority", "1"}),
              HasSubstr("exactly one of"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--class", "be", "--priority", "1"}),
              HasSubstr("exactly one of"));
  EXPECT_THAT(Error({"set", "--pid", "1"}), HasSubstr("nothing to change"));
  EXPECT_THAT(Error({"set", "--pid", "0", "--weight", "1"}),
              HasSubstr("--pid: '0' is not a process id"));
  EXPECT_THAT(Error({"set", "--pid", "abc", "--weight", "1"}), HasSubstr("not a process id"));
  EXPECT_THAT(Error({"set", "--pid", "-3", "--weight", "1"}), HasSubstr("not a process id"));
  EXPECT_THAT(Error({"set", "--pid"}), HasSubstr("--pid needs a value"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--pid", "2", "--weight", "1"}),
              HasSubstr("--pid given twice"));
  EXPECT_THAT(Error({"set", "--name", "bad name", "--weight", "1"}), HasSubstr("--name:"));
  EXPECT_THAT(Error({"set", "--name", "", "--weight", "1"}), HasSubstr("--name:"));
  EXPECT_THAT(Error({"set", "--class", "gold", "--weight", "1"}),
              HasSubstr("--class: 'gold' is not ls or be"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--class-to", "LS"}), HasSubstr("--class-to: 'LS'"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--priority", "20"}), HasSubstr("[-20, 19]"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--priority", "-21"}), HasSubstr("[-20, 19]"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--priority", "x"}), HasSubstr("--priority: 'x'"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--weight", "0"}), HasSubstr("[1, 1048576]"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--weight", "1048577"}), HasSubstr("[1, 1048576]"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--quota", "8Q"}), HasSubstr("--quota:"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--quota", "-1"}), HasSubstr("--quota:"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--class-quota", "8G"}),
              HasSubstr("--class-quota needs a --class target"));
  EXPECT_THAT(Error({"set", "--class", "be", "--class-to", "ls"}),
              HasSubstr("--class-to changes a tenant"));
  EXPECT_THAT(Error({"set", "--class", "be", "--quota", "16G", "--class-quota", "8G"}),
              HasSubstr("--quota cannot exceed --class-quota"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--weight", "1", "--frobnicate"}),
              HasSubstr("set: unknown option '--frobnicate'"));
  EXPECT_THAT(Error({"set", "--pid", "1", "--weight", "1", "now"}),
              HasSubstr("set: unexpected argument 'now'"));
}

TEST(CtlArgsTest, SetPacingWithoutATarget) {
  absl::StatusOr<CtlArgs> a = Parse({"set", "--window-us", "300", "--pacing", "off",
                                     "--window-items=16", "--ls-idle-us", "0", "--ls-stale-ms",
                                     "1", "--max-hold-ms", "600000", "--unknown-us", "1000000",
                                     "--share-slack-us", "0"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, CtlCommand::kSetPacing);
  v1::SetPacingRequest req = BuildSetPacingRequest(a->set.pacing);
  EXPECT_TRUE(req.has_pacing());
  EXPECT_FALSE(req.pacing());
  EXPECT_EQ(req.window_us(), 300u);
  EXPECT_EQ(req.window_items(), 16u);
  EXPECT_TRUE(req.has_ls_idle_us());
  EXPECT_EQ(req.ls_idle_us(), 0u);
  EXPECT_EQ(req.ls_stale_ms(), 1u);
  EXPECT_EQ(req.max_hold_ms(), 600000u);
  EXPECT_EQ(req.unknown_us(), 1000000u);
  EXPECT_TRUE(req.has_share_slack_us());

  // Only what was given is sent.
  a = Parse({"--json", "set", "--pacing", "on"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, CtlCommand::kSetPacing);
  req = BuildSetPacingRequest(a->set.pacing);
  EXPECT_TRUE(req.pacing());
  EXPECT_FALSE(req.has_window_us());
  EXPECT_FALSE(req.has_window_items());
  EXPECT_FALSE(req.has_max_hold_ms());

  // A tenant change stays a tenant change.
  a = Parse({"set", "--pid", "3", "--weight", "5"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, CtlCommand::kSet);
  EXPECT_FALSE(a->set.pacing.any());
}

TEST(CtlArgsTest, SetPacingErrors) {
  EXPECT_THAT(Error({"set", "--window-us", "5000000"}),
              HasSubstr("--window-us: '5000000' is not microseconds in [0, 1000000]"));
  EXPECT_THAT(Error({"set", "--window-us", "-1"}), HasSubstr("--window-us: '-1'"));
  EXPECT_THAT(Error({"set", "--window-items", "0"}),
              HasSubstr("--window-items: '0' is not a count in [1, 1024]"));
  EXPECT_THAT(Error({"set", "--window-items", "1025"}), HasSubstr("--window-items"));
  EXPECT_THAT(Error({"set", "--ls-idle-us", "1000001"}), HasSubstr("--ls-idle-us"));
  EXPECT_THAT(Error({"set", "--ls-stale-ms", "0"}),
              HasSubstr("--ls-stale-ms: '0' is not milliseconds in [1, 600000]"));
  EXPECT_THAT(Error({"set", "--max-hold-ms", "600001"}), HasSubstr("--max-hold-ms"));
  EXPECT_THAT(Error({"set", "--unknown-us", "x"}), HasSubstr("--unknown-us: 'x'"));
  EXPECT_THAT(Error({"set", "--share-slack-us", "1e6"}), HasSubstr("--share-slack-us"));
  EXPECT_THAT(Error({"set", "--pacing", "yes"}), HasSubstr("--pacing: 'yes' is not on or off"));
  EXPECT_THAT(Error({"set", "--pacing"}), HasSubstr("--pacing needs a value"));
  EXPECT_THAT(Error({"set", "--window-us", "1", "--window-us", "2"}),
              HasSubstr("--window-us given twice"));
  // Pacing is the daemon's, not a tenant's: no target, no tenant change beside it.
  EXPECT_THAT(Error({"set", "--pid", "7", "--window-us", "300"}),
              HasSubstr("set: --window-us changes the daemon's pacing on every GPU and takes no "
                        "tenant target or change (got --pid)"));
  EXPECT_THAT(Error({"set", "--pacing", "off", "--name", "web"}), HasSubstr("(got --name)"));
  EXPECT_THAT(Error({"set", "--class", "be", "--max-hold-ms", "5"}), HasSubstr("(got --class)"));
  EXPECT_THAT(Error({"set", "--unknown-us", "5", "--weight", "3"}),
              HasSubstr("set: --unknown-us changes the daemon's pacing"));
  EXPECT_THAT(Error({"set", "--share-slack-us", "5", "--quota", "1G"}), HasSubstr("(got --quota)"));
  EXPECT_THAT(Error({"set"}), HasSubstr("or only pacing options"));
}

TEST(CtlArgsTest, UsageListsThePacingOptions) {
  for (const char* flag : {"--pacing on|off", "--window-items N", "--window-us N", "--ls-idle-us N",
                           "--ls-stale-ms N", "--max-hold-ms N", "--unknown-us N",
                           "--share-slack-us N"}) {
    EXPECT_THAT(CtlUsage(), HasSubstr(flag));
  }
}

// Each line of compute_settings.inc is a `set` option with its range, in the usage text.
TEST(CtlArgsTest, EveryPacingSettingIsAnOptionWithItsRange) {
  for (const settings::Setting& s : settings::kComputeSettings) {
    SCOPED_TRACE(s.key);
    const std::string flag(s.flag);
    EXPECT_THAT(CtlUsage(), HasSubstr(flag + " "));
    if (s.unit == settings::Unit::kBool) {
      EXPECT_TRUE(Parse({"set", flag, "on"}).ok());
      EXPECT_THAT(Error({"set", flag, "1"}), HasSubstr(flag + ": '1' is not on or off"));
      continue;
    }
    for (int64_t v : {s.min, s.max}) {
      absl::StatusOr<CtlArgs> a = Parse({"set", flag, std::to_string(v)});
      ASSERT_TRUE(a.ok()) << a.status();
      EXPECT_EQ(a->command, CtlCommand::kSetPacing);
      const v1::SetPacingRequest req = BuildSetPacingRequest(a->set.pacing);
      const google::protobuf::FieldDescriptor* field =
          req.GetDescriptor()->FindFieldByName(std::string(s.key));
      ASSERT_NE(field, nullptr);
      EXPECT_TRUE(req.GetReflection()->HasField(req, field));
    }
    for (int64_t v : {s.min - 1, s.max + 1}) {
      EXPECT_THAT(Error({"set", flag, std::to_string(v)}),
                  HasSubstr(absl::StrCat(flag, ": '", v, "' is not ")));
    }
  }
}

}  // namespace
}  // namespace missile::cli
