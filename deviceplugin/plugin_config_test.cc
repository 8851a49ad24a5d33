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
  EXPECT_EQ(c.ls.quota_per_slot, SizeOrFraction::Bytes(10 * kGiB));
  EXPECT_EQ(c.be.quota_per_slot, SizeOrFraction::Bytes(1 * kGiB));
  EXPECT_EQ(c.shim_host_dir, "/h/shim");
  EXPECT_EQ(c.shim_container_dir, "/c/shim");
  EXPECT_EQ(c.socket_host_dir, "/h/run");
  EXPECT_EQ(c.socket_container_dir, "/c/run");
  EXPECT_EQ(c.device_root, "/fake/dev");
  EXPECT_EQ(c.poll_interval, std::chrono::milliseconds(50));
  EXPECT_EQ(c.failures_before_unhealthy, 3u);
}

TEST(PluginConfigTest, QuotaPerSlotAsAPercentageOfThePool) {
  absl::StatusOr<PluginArgs> args =
      ParsePluginArgs({"--ls-quota-per-slot", "12.5%", "--be-quota-per-slot=6%", "--ls-slots=8"});
  ASSERT_TRUE(args.ok()) << args.status();
  const PluginConfig& c = args->config;
  EXPECT_EQ(c.ls.quota_per_slot, SizeOrFraction::Fraction(0.125));
  EXPECT_EQ(*c.ls.SlotQuota(80 * kGiB), 10 * kGiB);
  EXPECT_EQ(*c.be.SlotQuota(100 * kGiB), 6 * kGiB);
  // A size does not depend on the pool, known or not.
  ClassResource sized = c.ls;
  sized.quota_per_slot = SizeOrFraction::Bytes(3 * kGiB);
  EXPECT_EQ(*sized.SlotQuota(0), 3 * kGiB);
  EXPECT_EQ(*sized.SlotQuota(80 * kGiB), 3 * kGiB);
  // A percentage of a pool missiled did not report is refused, not guessed.
  absl::StatusOr<uint64_t> unknown = c.ls.SlotQuota(0);
  EXPECT_EQ(unknown.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(unknown.status().message()),
              HasSubstr("missile.io/ls: the quota per slot is 12.5% of the GPU's pool, and "
                        "missiled reported no pool size"));
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
      {{"--frobnicate"}, "unknown option '--frobnicate'"},
      {{"--ls-slot", "2"}, "unknown option '--ls-slot'; did you mean '--ls-slots'?"},
      {{"serve"}, "unexpected argument 'serve'"},
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
      {{"--ls-quota-per-slot", "0%"}, "--ls-quota-per-slot:"},
      {{"--be-quota-per-slot", "101%"}, "--be-quota-per-slot:"},
      {{"--be-quota-per-slot", "12%%"}, "a percentage of the GPU's pool such as 12%"},
      {{"--ls-slots", "5", "--ls-quota-per-slot", "25%"},
       "--ls-slots 5 x --ls-quota-per-slot 25% is 125% of the GPU's pool"},
      {{"--be-quota-per-slot", "20%"},  // with the default 8 BE slots
       "--be-slots 8 x --be-quota-per-slot 20% is 160% of the GPU's pool"},
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
