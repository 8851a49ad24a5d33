#include "allocation.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Pair;
using ::testing::UnorderedElementsAre;

const std::string kUuid0 = "GPU-00000000-1111-2222-3333-444444444444";
const std::string kUuid1 = "GPU-55555555-6666-7777-8888-999999999999";

std::vector<std::string> DevicePaths(const v1beta1::ContainerAllocateResponse& r, bool host) {
  std::vector<std::string> out;
  for (const auto& d : r.devices()) out.push_back(host ? d.host_path() : d.container_path());
  return out;
}

TEST(AllocationTest, AnLsContainerGetsTheShimItsQuotaTheSocketAndItsGpu) {
  PluginConfig config;
  config.device_root = "/fake/dev";
  std::vector<Slot> slots =
      *BuildSlots({{0, kUuid0}, {1, kUuid1}}, TenantClass::kLatencySensitive, 4);
  absl::StatusOr<v1beta1::ContainerAllocateResponse> r =
      BuildAllocation(config, config.ls, slots, {kUuid1 + "-ls-0", kUuid1 + "-ls-3"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_THAT(r->envs(), UnorderedElementsAre(
                             Pair("LD_PRELOAD", "/opt/missile/shim/libmissile.so"),
                             Pair("MISSILE_TENANT_CLASS", "ls"), Pair("MISSILE_QUOTA", "32GiB"),
                             Pair("MISSILE_SOCKET", "/run/missile/missiled.sock"),
                             Pair("MISSILE_K8S_DEVICES", kUuid1 + "-ls-0," + kUuid1 + "-ls-3")));
  ASSERT_EQ(r->mounts_size(), 2);
  EXPECT_EQ(r->mounts(0).host_path(), "/opt/missile/shim");
  EXPECT_EQ(r->mounts(0).container_path(), "/opt/missile/shim");
  EXPECT_TRUE(r->mounts(0).read_only());
  EXPECT_EQ(r->mounts(1).host_path(), "/run/missile");
  EXPECT_EQ(r->mounts(1).container_path(), "/run/missile");
  EXPECT_FALSE(r->mounts(1).read_only());
  EXPECT_THAT(DevicePaths(*r, true),
              ElementsAre("/fake/dev/nvidia1", "/fake/dev/nvidiactl", "/fake/dev/nvidia-uvm",
                          "/fake/dev/nvidia-uvm-tools"));
  EXPECT_THAT(DevicePaths(*r, false), ElementsAre("/dev/nvidia1", "/dev/nvidiactl",
                                                  "/dev/nvidia-uvm", "/dev/nvidia-uvm-tools"));
  for (const auto& d : r->devices()) EXPECT_EQ(d.permissions(), "rw");
}

TEST(AllocationTest, ContainerPathsFollowTheConfiguration) {
  PluginConfig config;
  config.shim_host_dir = "/var/lib/missile/shim";
  config.shim_container_dir = "/missile";
  config.socket_host_dir = "/run/missile-node";
  config.socket_container_dir = "/var/run/missile";
  config.be.quota_per_slot = SizeOrFraction::Bytes(3 * kGiB);
  std::vector<Slot> slots = *BuildSlots({{0, kUuid0}}, TenantClass::kBestEffort, 8);
  absl::StatusOr<v1beta1::ContainerAllocateResponse> r =
      BuildAllocation(config, config.be, slots, {kUuid0 + "-be-5"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->envs().at("LD_PRELOAD"), "/missile/libmissile.so");
  EXPECT_EQ(r->envs().at("MISSILE_TENANT_CLASS"), "be");
  EXPECT_EQ(r->envs().at("MISSILE_QUOTA"), "3GiB");
  EXPECT_EQ(r->envs().at("MISSILE_SOCKET"), "/var/run/missile/missiled.sock");
  EXPECT_EQ(r->mounts(0).host_path(), "/var/lib/missile/shim");
  EXPECT_EQ(r->mounts(1).container_path(), "/var/run/missile");
  EXPECT_EQ(r->devices(0).host_path(), "/dev/nvidia0");
}

TEST(AllocationTest, SlotsSpreadOverGpusGetEveryGpuAndTheLargestPerGpuQuota) {
  PluginConfig config;
  std::vector<Slot> slots = *BuildSlots({{0, kUuid0}, {1, kUuid1}}, TenantClass::kBestEffort, 4);
  absl::StatusOr<v1beta1::ContainerAllocateResponse> r = BuildAllocation(
      config, config.be, slots, {kUuid0 + "-be-0", kUuid1 + "-be-1", kUuid1 + "-be-2"});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->envs().at("MISSILE_QUOTA"), "16GiB");  // 2 slots x 8 GiB on GPU 1
  EXPECT_EQ(r->envs().at("MISSILE_K8S_DEVICES"),
            kUuid0 + "-be-0," + kUuid1 + "-be-1," + kUuid1 + "-be-2");
  EXPECT_THAT(DevicePaths(*r, false),
              ElementsAre("/dev/nvidia0", "/dev/nvidia1", "/dev/nvidiactl", "/dev/nvidia-uvm",
                          "/dev/nvidia-uvm-tools"));
}

TEST(AllocationTest, APercentageQuotaScalesWithEachGpusPool) {
  PluginConfig config;
  config.ls.quota_per_slot = SizeOrFraction::Fraction(0.25);
  // GPU 0's pool is 40 GiB, GPU 1's 128 GiB.
  std::vector<Slot> slots = *BuildSlots({{0, kUuid0, 40 * kGiB}, {1, kUuid1, 128 * kGiB}},
                                        TenantClass::kLatencySensitive, 4);
  auto quota = [&](const std::vector<std::string>& ids) {
    absl::StatusOr<v1beta1::ContainerAllocateResponse> r =
        BuildAllocation(config, config.ls, slots, ids);
    EXPECT_TRUE(r.ok()) << r.status();
    return r.ok() ? r->envs().at("MISSILE_QUOTA") : "";
  };
  EXPECT_EQ(quota({kUuid0 + "-ls-0"}), "10GiB");
  EXPECT_EQ(quota({kUuid0 + "-ls-0", kUuid0 + "-ls-1"}), "20GiB");
  EXPECT_EQ(quota({kUuid1 + "-ls-2"}), "32GiB");
  // Spread: two slots of the small GPU (20 GiB) against one of the large (32 GiB): the larger.
  EXPECT_EQ(quota({kUuid0 + "-ls-0", kUuid0 + "-ls-1", kUuid1 + "-ls-0"}), "32GiB");
}

TEST(AllocationTest, APercentageQuotaOnAGpuWithoutAPoolSizeIsRefused) {
  PluginConfig config;
  config.be.quota_per_slot = SizeOrFraction::Fraction(0.1);
  std::vector<Slot> slots =
      *BuildSlots({{0, kUuid0, 64 * kGiB}, {1, kUuid1, 0}}, TenantClass::kBestEffort, 2);
  EXPECT_TRUE(BuildAllocation(config, config.be, slots, {kUuid0 + "-be-0"}).ok());
  absl::StatusOr<v1beta1::ContainerAllocateResponse> r =
      BuildAllocation(config, config.be, slots, {kUuid0 + "-be-1", kUuid1 + "-be-0"});
  EXPECT_EQ(r.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(r.status().message()),
              HasSubstr("GPU " + kUuid1 + ": missile.io/be: the quota per slot is 10%"));
}

TEST(AllocationTest, RefusesUnknownRepeatedOrNoDevices) {
  PluginConfig config;
  std::vector<Slot> slots = *BuildSlots({{0, kUuid0}}, TenantClass::kBestEffort, 2);
  auto message = [&](const std::vector<std::string>& ids) {
    absl::StatusOr<v1beta1::ContainerAllocateResponse> r =
        BuildAllocation(config, config.be, slots, ids);
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    return std::string(r.status().message());
  };
  EXPECT_THAT(message({}), HasSubstr("no devices"));
  EXPECT_THAT(message({kUuid0 + "-be-7"}), HasSubstr("unknown missile.io/be device"));
  EXPECT_THAT(message({kUuid0 + "-ls-0"}), HasSubstr("unknown"));
  EXPECT_THAT(message({kUuid0 + "-be-1", kUuid0 + "-be-1"}), HasSubstr("repeated"));
}

}  // namespace
}  // namespace missile::deviceplugin
