// [limits]: defaults, ranges and the rules between its keys.
#include <string>

#include "daemon/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using ::testing::HasSubstr;

std::string Error(const std::string& text) {
  absl::StatusOr<DaemonConfig> config = ParseConfig(text);
  EXPECT_FALSE(config.ok()) << "accepted:\n" << text;
  return config.ok() ? "" : std::string(config.status().message());
}

TEST(ConfigLimitsTest, DefaultsAndValues) {
  const LimitsSection defaults = ParseConfig("").value().limits;
  EXPECT_EQ(defaults.max_sessions_per_uid, 16);
  EXPECT_EQ(defaults.max_connections_per_uid, 64);
  EXPECT_EQ(defaults.max_connections, 4096);
  EXPECT_EQ(defaults.max_side_connections_per_uid, 64);
  EXPECT_EQ(defaults.idle_timeout_ms, 10000);
  EXPECT_EQ(defaults.admin_reserve_fds, 1024);
  absl::StatusOr<DaemonConfig> c = ParseConfig(
      "[limits]\nmax_sessions_per_uid = 4\nmax_connections_per_uid = 8\nmax_connections = 100\n"
      "max_side_connections_per_uid = 4\nidle_timeout_ms = 500\nadmin_reserve_fds = 64\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->limits.max_sessions_per_uid, 4);
  EXPECT_EQ(c->limits.max_connections_per_uid, 8);
  EXPECT_EQ(c->limits.max_connections, 100);
  EXPECT_EQ(c->limits.max_side_connections_per_uid, 4);
  EXPECT_EQ(c->limits.idle_timeout_ms, 500);
  EXPECT_EQ(c->limits.admin_reserve_fds, 64);
}

TEST(ConfigLimitsTest, OutOfRangeValuesAreRefused) {
  // More than half the 64 pacing slots: one uid could take them all with a second.
  EXPECT_THAT(Error("[limits]\nmax_sessions_per_uid = 33\n"),
              HasSubstr("limits.max_sessions_per_uid: must be an integer in [1, 32], got 33"));
  EXPECT_THAT(Error("[limits]\nmax_sessions_per_uid = 0\n"),
              HasSubstr("limits.max_sessions_per_uid"));
  EXPECT_THAT(Error("[limits]\nidle_timeout_ms = 10\n"), HasSubstr("limits.idle_timeout_ms"));
  EXPECT_THAT(Error("[limits]\nadmin_reserve_fds = 1\n"), HasSubstr("limits.admin_reserve_fds"));
  EXPECT_THAT(Error("[limits]\nmax_connection = 1\n"), HasSubstr("limits.max_connection"));
}

TEST(ConfigLimitsTest, TheRulesBetweenTheKeys) {
  EXPECT_THAT(Error("[limits]\nmax_sessions_per_uid = 20\nmax_connections_per_uid = 10\n"),
              HasSubstr("limits.max_connections_per_uid"));
  EXPECT_THAT(Error("[limits]\nmax_sessions_per_uid = 20\nmax_side_connections_per_uid = 10\n"),
              HasSubstr("limits.max_side_connections_per_uid"));
  EXPECT_THAT(Error("[limits]\nmax_connections_per_uid = 100\nmax_connections = 50\n"),
              HasSubstr("limits.max_connections: must be at least"));
}

}  // namespace
}  // namespace missile::daemon
