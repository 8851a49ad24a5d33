// The TPC layout, the device attributes it sets, the launch callback's export table and the
// environment that shapes them (read in forked children, whose fake driver starts afresh).

#include <algorithm>
#include <string>

#include "tpc_util.h"
#include "tpcs.h"

namespace fakecuda_test {
namespace {

using fakecuda::TpcLayout;
using fakecuda::TpcMask;

TEST(TpcLayoutTest, LiveTpcsHoldTwoSmsEachAndBit31IsNotATpc) {
  const TpcLayout layout({3, 12, 25, 38, 51, 64});
  EXPECT_EQ(layout.live_tpcs(), kDefaultLiveTpcs);
  EXPECT_EQ(layout.sm_count(), kDefaultSms);
  EXPECT_EQ(layout.PhysicalTpc(0), 0);
  EXPECT_EQ(layout.PhysicalTpc(3), 4);  // TPC 3 is dead
  EXPECT_EQ(layout.PhysicalTpc(65), 71);
  EXPECT_EQ(fakecuda::TpcBit(30), 30);
  EXPECT_EQ(fakecuda::TpcBit(31), 32);
  EXPECT_EQ(fakecuda::TpcBit(71), 72);
  std::vector<uint32_t> all(kDefaultSms);
  for (int i = 0; i < kDefaultSms; ++i) all[i] = i;
  EXPECT_EQ(layout.AllowedSms({}), all);
  for (const std::vector<int>& off :
       {std::vector<int>{4}, std::vector<int>{0, 30, 31, 32, 71}, std::vector<int>{3, 12}}) {
    TpcMask mask;
    for (int t : off) mask.Set(fakecuda::TpcBit(t));
    EXPECT_EQ(layout.AllowedSms(mask), SmsWithout(off)) << "disabling " << off.size();
  }
  // Bit 31 (the enable bit) and bits past the last TPC disable nothing.
  TpcMask no_tpc;
  no_tpc.Set(31);
  no_tpc.Set(73);
  no_tpc.Set(127);
  EXPECT_EQ(layout.AllowedSms(no_tpc), all);
  // No dead TPCs: 144 SMs, live TPC k is physical TPC k.
  const TpcLayout full({});
  EXPECT_EQ(full.sm_count(), 144);
  TpcMask t40;
  t40.Set(fakecuda::TpcBit(40));
  const std::vector<uint32_t> sms = full.AllowedSms(t40);
  EXPECT_EQ(sms.size(), 142u);
  EXPECT_EQ(std::count(sms.begin(), sms.end(), 40u) + std::count(sms.begin(), sms.end(), 112u), 0);
}

TEST(TpcLayoutTest, TheDescriptorMaskCountsOnlyWithItsEnableBit) {
  unsigned char desc[512] = {};
  auto put = [&](const std::array<uint32_t, 4>& w) { std::memcpy(desc + 304, w.data(), 16); };
  put(MaskWords({0, 30, 31, 63, 71}));
  TpcMask expected;
  for (int bit : {0, 30, 32, 64, 72}) expected.Set(bit);
  EXPECT_EQ(fakecuda::DisabledTpcsOf(desc), expected);
  put(MaskWords({0, 30, 31, 63, 71}, /*enable=*/false));
  EXPECT_TRUE(fakecuda::DisabledTpcsOf(desc).empty());
  put({0x80000000u, 0, 0, 0x80000000u});  // the enable bit is not part of the mask
  TpcMask top;
  top.Set(127);
  EXPECT_EQ(fakecuda::DisabledTpcsOf(desc), top);
}

TEST(TpcDeviceTest, SmCountFollowsTheDeadTpcsAndMpsIsOffByDefault) {
  InitPrimary();
  int sms = 0;
  int mps = -1;
  CU_ASSERT(cuDeviceGetAttribute(&sms, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
  CU_ASSERT(cuDeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, 0));
  EXPECT_EQ(sms, kDefaultSms);
  EXPECT_EQ(mps, 0);
  struct Case {
    const char* dead;
    const char* mps;
    int sms;
    int mps_enabled;
  };
  for (const Case& c :
       {Case{"none", "1", 144, 1}, Case{"0, 1,70", "0", 138, 0}, Case{"71", "1", 142, 1}}) {
    const int status = RunInChild([&] {
      setenv("FAKECUDA_DEAD_TPCS", c.dead, 1);
      setenv("FAKECUDA_MPS", c.mps, 1);
      InitPrimary();
      int n = 0;
      int m = -1;
      EXPECT_EQ(CUDA_SUCCESS,
                cuDeviceGetAttribute(&n, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 0));
      EXPECT_EQ(CUDA_SUCCESS, cuDeviceGetAttribute(&m, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, 0));
      return n == c.sms && m == c.mps_enabled ? 0 : 1;
    });
    EXPECT_TRUE(ExitedOk(status)) << "FAKECUDA_DEAD_TPCS=" << c.dead;
  }
}

TEST(TpcDeviceTest, MalformedSettingsFailCuInit) {
  for (const std::pair<const char*, const char*>& setting :
       {std::pair{"FAKECUDA_DEAD_TPCS", "72"}, std::pair{"FAKECUDA_DEAD_TPCS", "3,3"},
        std::pair{"FAKECUDA_DEAD_TPCS", "1,x"}, std::pair{"FAKECUDA_MPS", "yes"},
        std::pair{"FAKECUDA_LAUNCH_CALLBACK", "2"},
        std::pair{"FAKECUDA_LAUNCH_DESC_VERSION", "0x100"},
        std::pair{"FAKECUDA_LAUNCH_DESC_VERSION", "4o"}}) {
    const int status = RunInChild([&] {
      setenv(setting.first, setting.second, 1);
      return cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1;
    });
    EXPECT_TRUE(ExitedOk(status)) << setting.first << "=" << setting.second;
  }
  // Every TPC dead.
  std::string all;
  for (int t = 0; t < 72; ++t) all += (t == 0 ? "" : ",") + std::to_string(t);
  const int status = RunInChild([&] {
    setenv("FAKECUDA_DEAD_TPCS", all.c_str(), 1);
    return cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1;
  });
  EXPECT_TRUE(ExitedOk(status));
}

TEST(CallbackTableTest, SubscribeAndEnableCheckTheirArguments) {
  // Before cuInit too, as the driver serves its export tables.
  CallbackTable table;
  CU_ASSERT(table.Get());
  ASSERT_NE(table.entries, nullptr);
  EXPECT_GE(table.size(), 7 * sizeof(void*));
  Subscriber sub;
  uint32_t handle = 0;
  EXPECT_NE(0, table.subscribe()(nullptr, &Subscriber::OnLaunch, &sub));
  EXPECT_NE(0, table.subscribe()(&handle, nullptr, &sub));
  ASSERT_EQ(0, table.subscribe()(&handle, &Subscriber::OnLaunch, &sub));
  EXPECT_GE(handle, 1u);
  uint32_t second = 0;
  ASSERT_EQ(0, table.subscribe()(&second, &Subscriber::OnLaunch, &sub));
  EXPECT_NE(second, handle);
  EXPECT_NE(0, table.enable()(1, 0, 3, 3));
  EXPECT_NE(0, table.enable()(1, std::max(handle, second) + 1000, 3, 3));
  EXPECT_EQ(0, table.enable()(1, handle, 3, 3));
  EXPECT_EQ(0, table.enable()(1, handle, 3, 4));  // other sites: accepted, never called
  EXPECT_EQ(0, table.enable()(0, handle, 3, 3));
  EXPECT_EQ(0, table.enable()(0, handle, 3, 3));
  // The entries the fake does not model fail.
  for (int i : {1, 2, 4, 5}) {
    EXPECT_NE(0, reinterpret_cast<int (*)()>(table.entries[i])()) << "entry " << i;
  }
  // Another table id keeps the old answer.
  CUuuid other{};
  std::memcpy(other.bytes, kCallbackTableUuid, sizeof(other.bytes));
  other.bytes[15] ^= 1;
  const void* none = &table;
  CU_EXPECT_ERR(CUDA_ERROR_NOT_SUPPORTED, cuGetExportTable(&none, &other));
  EXPECT_EQ(none, nullptr);
  // Nothing was enabled for launches: a launch calls nobody.
  InitPrimary();
  Kernels kernels;
  CU_ASSERT(kernels.Load());
  CU_ASSERT(Spin(kernels, nullptr, 0));
  CU_ASSERT(cuStreamSynchronize(nullptr));
  EXPECT_EQ(sub.calls.load(), 0);
  CU_ASSERT(cuModuleUnload(kernels.module));
}

TEST(CallbackTableTest, TheEnvironmentRemovesTheTableOrSetsTheDescriptorVersion) {
  int status = RunInChild([] {
    setenv("FAKECUDA_LAUNCH_CALLBACK", "0", 1);
    CallbackTable table;
    const CUresult r = table.Get();
    return r == CUDA_ERROR_NOT_SUPPORTED && table.entries == nullptr ? 0 : 1;
  });
  EXPECT_TRUE(ExitedOk(status));
  for (const std::pair<const char*, int>& setting : {std::pair{"0x41", 0x41}, std::pair{"7", 7}}) {
    status = RunInChild([&setting] {
      setenv("FAKECUDA_LAUNCH_DESC_VERSION", setting.first, 1);
      InitPrimary();
      CallbackTable table;
      Kernels kernels;
      if (table.Get() != CUDA_SUCCESS || kernels.Load() != CUDA_SUCCESS) return 1;
      Subscriber sub;
      sub.version = static_cast<uint8_t>(setting.second);
      uint32_t handle = 0;
      if (table.subscribe()(&handle, &Subscriber::OnLaunch, &sub) != 0 ||
          table.enable()(1, handle, 3, 3) != 0) {
        return 2;
      }
      if (Spin(kernels, nullptr, 0) != CUDA_SUCCESS) return 3;
      return sub.calls.load() == 1 && sub.bad.load() == 0 ? 0 : 4;
    });
    EXPECT_TRUE(ExitedOk(status)) << "FAKECUDA_LAUNCH_DESC_VERSION=" << setting.first << ": "
                                  << status;
  }
}

}  // namespace
}  // namespace fakecuda_test
