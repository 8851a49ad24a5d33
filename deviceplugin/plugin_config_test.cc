#include "plugin_config.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::deviceplugin {
namespace {

using ::testing::HasSubstr;

TEST(PluginConfigTest, DefaultsAdvertiseBothResourcesAtTheKubeletsPaths) {
  absl::StatusOr<PluginArgs> args = ParsePluginArgs({});
  ASSERT_TRUE(args.ok()) << args.status();
  const PluginConfig& c = args->config;
  EXPECT_EQ(c.KubeletSocket(), "/var/lib/kubelet/device-plugins/kubelet.sock");
  EXPECT_EQ(c.missiled_socket, "/run/missile/missiled.sock");
  ASSERT_EQ(c.Resources().size(), 2u);
  EXPECT_EQ(c.Resources()[0].resource, "missile.io/ls");
  EXPECT_EQ(c.Resources()[1].resource, "missile.io/be");
  EXPECT_FALSE(args->help);
  EXPECT_FALSE(args->version);
}

TEST(PluginConfigTest, ReadsEveryFlag) {
  absl::StatusOr<PluginArgs> args = ParsePluginArgs(
      {"--kubelet-dir", "/k", "--kubelet-socket=/k/other.sock", "--missiled-socket", "/m/d.sock",
       "--ls-slots", "2", "--be-slots=0", "--ls-quota-per-slot", "10GiB", "--be-quota-per-slot",
       "1G", "--shim-host-dir", "/h/shim", "--shim-container-dir", "/c/shim",
       "--socket-host-dir", "/h/run", "--socket-container-dir", "/c/run", "--device-root",
       "/fake/dev", "--poll-ms", "50", "--unhealthy-after", "3"});
  ASSERT_TRUE(args.ok()) << args.status();
  const PluginConfig& c = args->config;
  EXPECT_EQ(c.kubelet_dir, "/k");
  EXPECT_EQ(c.KubeletSocket(), "/k/other.sock");
  EXPECT_EQ(c.missiled_socket, "/m/d.sock");
  ASSERT_EQ(c.Resources().size(), 1u);
  EXPECT_EQ(c.ls.slots_per_gpu, 2u);
  EXPECT_EQ(c.ls.quota_per_slot, 10 * kGiB);
  EXPECT_EQ(c.be.quota_per_slot, 1 * kGiB);
  EXPECT_EQ(c.shim_host_dir, "/h/shim");
  EXPECT_EQ(c.shim_container_dir, "/c/shim");
  EXPECT_EQ(c.socket_host_dir, "/h/run");
  EXPECT_EQ(c.socket_container_dir, "/c/run");
  EXPECT_EQ(c.device_root, "/fake/dev");
  EXPECT_EQ(c.poll_interval, std::chrono::milliseconds(50));
  EXPECT_EQ(c.failures_before_unhealthy, 3u);
}

TEST(PluginConfigTest, HelpAndVersion) {
  EXPECT_TRUE(ParsePluginArgs({"--help"})->help);
  EXPECT_TRUE(ParsePluginArgs({"-h"})->help);
  EXPECT_TRUE(ParsePluginArgs({"--version"})->version);
}

TEST(PluginConfigTest, BadArgumentsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  const std::vector<Case> cases = {
      {{"--frobnicate"}, "unknown argument '--frobnicate'"},
      {{"--ls-slots"}, "--ls-slots needs a value"},
      {{"--ls-slots", "x"}, "--ls-slots: 'x' is not a whole number in 0..1000"},
      {{"--be-slots", "1001"}, "--be-slots: '1001' is not a whole number"},
      {{"--ls-slots", "-1"}, "--ls-slots: '-1'"},
      {{"--ls-quota-per-slot", "0"}, "--ls-quota-per-slot: '0' is not in 1B..16TiB"},
      {{"--be-quota-per-slot", "lots"}, "--be-quota-per-slot:"},
      {{"--be-quota-per-slot", "17TiB"}, "is not in 1B..16TiB"},
      {{"--kubelet-dir", "relative/dir"}, "--kubelet-dir: 'relative/dir' is not an absolute path"},
      {{"--device-root="}, "--device-root: '' is not an absolute path"},
      {{"--poll-ms", "5"}, "--poll-ms: '5' is not a whole number in 10..60000"},
      {{"--unhealthy-after", "0"}, "--unhealthy-after"},
      {{"--help=yes"}, "--help takes no value"},
      {{"--ls-slots", "0", "--be-slots", "0"}, "nothing to advertise"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<PluginArgs> args = ParsePluginArgs(c.args);
    ASSERT_FALSE(args.ok()) << c.args[0];
    EXPECT_EQ(args.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_THAT(std::string(args.status().message()), HasSubstr(c.message));
  }
}

}  // namespace
}  // namespace missile::deviceplugin
