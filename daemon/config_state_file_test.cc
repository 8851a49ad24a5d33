// daemon.state_file: where policy set at run time is kept (policy_state.h).
#include "gtest/gtest.h"
#include "daemon/config.h"

namespace missile::daemon {
namespace {

TEST(ConfigStateFileTest, ExplicitPathOrSystemdStateDirectoryOrNone) {
  absl::StatusOr<DaemonConfig> set = ParseConfig("[daemon]\nstate_file = \"/srv/missile/p.toml\"\n");
  ASSERT_TRUE(set.ok()) << set.status();
  EXPECT_EQ(set->daemon.StateFilePath("/var/lib/missile"), "/srv/missile/p.toml");
  DaemonSection d;
  EXPECT_EQ(d.state_file, "");
  EXPECT_EQ(d.StateFilePath("/var/lib/missile"), "/var/lib/missile/policy.toml");
  EXPECT_EQ(d.StateFilePath("/var/lib/missile:/var/lib/other"), "/var/lib/missile/policy.toml");
  EXPECT_EQ(d.StateFilePath(""), "") << "no state directory: not kept";
  EXPECT_EQ(d.StateFilePath(nullptr), "");
}

TEST(ConfigStateFileTest, MustBeAbsolute) {
  absl::StatusOr<DaemonConfig> c = ParseConfig("[daemon]\nstate_file = \"policy.toml\"\n");
  ASSERT_FALSE(c.ok());
  EXPECT_NE(c.status().message().find("daemon.state_file"), std::string::npos) << c.status();
  EXPECT_FALSE(ParseConfig("[daemon]\nstate_file = 3\n").ok());
}

}  // namespace
}  // namespace missile::daemon
