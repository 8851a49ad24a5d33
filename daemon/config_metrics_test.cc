// [metrics]: defaults, values read, and bad values refused with a message naming the key.
#include <string>

#include "daemon/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using ::testing::HasSubstr;

TEST(ConfigMetricsTest, DefaultsAreOffOnLoopback) {
  absl::StatusOr<DaemonConfig> c = ParseConfig("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->metrics.enabled);
  EXPECT_EQ(c->metrics.address, "127.0.0.1");
  EXPECT_EQ(c->metrics.port, 9850);
}

TEST(ConfigMetricsTest, ReadsEveryKey) {
  absl::StatusOr<DaemonConfig> c =
      ParseConfig("[metrics]\nenabled = true\naddress = \"::1\"\nport = 19000\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_TRUE(c->metrics.enabled);
  EXPECT_EQ(c->metrics.address, "::1");
  EXPECT_EQ(c->metrics.port, 19000);
  // DescribeConfig writes them back as TOML that reads the same.
  absl::StatusOr<DaemonConfig> again = ParseConfig(DescribeConfig(*c));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->metrics, c->metrics);
}

std::string Error(const std::string& text) {
  absl::StatusOr<DaemonConfig> c = ParseConfig(text);
  EXPECT_FALSE(c.ok()) << "accepted:\n" << text;
  EXPECT_EQ(c.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(c.status().message());
}

TEST(ConfigMetricsTest, RefusesBadValuesNamingTheKey) {
  EXPECT_THAT(Error("[metrics]\nport = 0\n"), HasSubstr("line 2: metrics.port: must be"));
  EXPECT_THAT(Error("[metrics]\nport = 70000\n"), HasSubstr("metrics.port"));
  EXPECT_THAT(Error("[metrics]\naddress = \"localhost\"\n"),
              HasSubstr("metrics.address: must be an IPv4 or IPv6 address"));
  EXPECT_THAT(Error("[metrics]\naddress = \"127.0.0.256\"\n"), HasSubstr("metrics.address"));
  EXPECT_THAT(Error("[metrics]\nenabled = \"yes\"\n"), HasSubstr("metrics.enabled"));
  EXPECT_THAT(Error("[metrics]\nprot = 1\n"), HasSubstr("metrics.prot"));
}

}  // namespace
}  // namespace missile::daemon
