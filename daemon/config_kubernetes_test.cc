// [kubernetes]: its default, the socket read back through DescribeConfig, bad values refused.
#include <string>
#include <vector>

#include "daemon/config.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using ::testing::HasSubstr;

TEST(ConfigKubernetesTest, OffByDefault) {
  absl::StatusOr<DaemonConfig> c = ParseConfig("");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kubernetes.pod_resources_socket, "");
}

TEST(ConfigKubernetesTest, ReadsTheSocketAndDescribesIt) {
  absl::StatusOr<DaemonConfig> c = ParseConfig(
      "[kubernetes]\npod_resources_socket = \"/var/lib/kubelet/pod-resources/kubelet.sock\"\n");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->kubernetes.pod_resources_socket, "/var/lib/kubelet/pod-resources/kubelet.sock");
  EXPECT_THAT(DescribeConfig(*c),
              HasSubstr("kubernetes.pod_resources_socket = "
                        "\"/var/lib/kubelet/pod-resources/kubelet.sock\""));
  absl::StatusOr<DaemonConfig> again = ParseConfig(DescribeConfig(*c));
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(again->kubernetes, c->kubernetes);
  EXPECT_THAT(DescribeConfig(DaemonConfig{}), HasSubstr("kubernetes.pod_resources_socket = \"\""));
}

TEST(ConfigKubernetesTest, RefusesBadValuesNamingTheKey) {
  for (const std::string& text : std::vector<std::string>{
           "[kubernetes]\npod_resources_socket = \"kubelet.sock\"\n",
           "[kubernetes]\npod_resources_socket = \"/" + std::string(200, 'a') + "\"\n",
           "[kubernetes]\npod_resources_socket = 1\n",
       }) {
    absl::StatusOr<DaemonConfig> c = ParseConfig(text);
    EXPECT_FALSE(c.ok()) << text;
    EXPECT_THAT(std::string(c.status().message()), HasSubstr("kubernetes.pod_resources_socket"))
        << text;
  }
  absl::StatusOr<DaemonConfig> c = ParseConfig("[kubernetes]\nsocket = \"/x\"\n");
  EXPECT_FALSE(c.ok());
  EXPECT_THAT(std::string(c.status().message()), HasSubstr("kubernetes.socket"));
}

}  // namespace
}  // namespace missile::daemon
