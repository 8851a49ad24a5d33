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

TEST(TpcLayoutTest, LiveTpcsHoldTwoSmsEachAndTpcTIsBitT) {
  const TpcLayout layout({3, 12, 25, 38, 51, 64});
  EXPECT_EQ(layout.live_tpcs(), kDefaultLiveTpcs);
  EXPECT_EQ(layout.sm_count(), kDefaultSms);
  EXPECT_EQ(layout.PhysicalTpc(0), 0);
  EXPECT_EQ(layout.PhysicalTpc(3), 4);  // TPC 3 is dead
  EXPECT_EQ(layout.PhysicalTpc(65), 71);
  for (int t : {0, 30, 31, 32, 63, 64, 71}) EXPECT_EQ(fakecuda::TpcBit(t), t);
  std::vector<uint32_t> all(kDefaultSms);
  for (int i = 0; i < kDefaultSms; ++i) all[i] = i;
  EXPECT_EQ(layout.AllowedSms({}), all);
  for (const std::vector<int>& off : {std::vector<int>{4}, std::vector<int>{0, 30, 31, 32, 71},
                                      std::vector<int>{31}, std::vector<int>{3, 12}}) {
    TpcMask mask;
    for (int t : off) mask.Set(t);
    EXPECT_EQ(layout.AllowedSms(mask), SmsWithout(off)) << "disabling " << off.size();
  }
  // Bit 31 is TPC 31 (live TPC 28, past dead 3, 12 and 25: SMs 28 and 94).
  TpcMask bit31;
  bit31.Set(31);
  const std::vector<uint32_t> without31 = layout.AllowedSms(bit31);
  EXPECT_EQ(without31.size(), kDefaultSms - 2u);
  EXPECT_EQ(std::count(without31.begin(), without31.end(), 28u), 0);
  EXPECT_EQ(std::count(without31.begin(), without31.end(), 94u), 0);
  // Bits of dead TPCs and past the last TPC disable nothing.
  TpcMask no_tpc;
  for (int bit : {3, 64, 72, 73, 127}) no_tpc.Set(bit);
  EXPECT_EQ(layout.AllowedSms(no_tpc), all);
  // No dead TPCs: 144 SMs, live TPC k is physical TPC k.
  const TpcLayout full({});
  EXPECT_EQ(full.sm_count(), 144);
  TpcMask t40;
  t40.Set(40);
  const std::vector<uint32_t> sms = full.AllowedSms(t40);
  EXPECT_EQ(sms.size(), 142u);
  EXPECT_EQ(std::count(sms.begin(), sms.end(), 40u) + std::count(sms.begin(), sms.end(), 112u), 0);
}

TEST(TpcLayoutTest, MaskWordsPutTpcTAtBitT) {
  EXPECT_EQ(MaskWords({0, 30, 31, 63, 71}),
            (std::array<uint32_t, 4>{0xc0000001u, 0x80000000u, 0x80u, 0}));
  EXPECT_EQ(MaskWords({32, 64, 96, 127}), (std::array<uint32_t, 4>{0, 1, 1, 0x80000001u}));
}

TEST(TpcLayoutTest, TheDescriptorMaskCountsOnlyWithBit31OfItsFirstWord) {
  unsigned char desc[512] = {};
  // Words 304..316 byte by byte (little-endian): 304 = 0xffffffff, 308 = 1, 316 = 0x80000000.
  for (int i = 304; i < 308; ++i) desc[i] = 0xff;
  desc[308] = 0x01;
  desc[319] = 0x80;
  TpcMask expected;
  for (int bit = 0; bit <= 32; ++bit) expected.Set(bit);  // bit 31 of word 304 too: TPC 31
  expected.Set(127);
  EXPECT_TRUE(fakecuda::DisabledTpcsOf(desc).empty());  // word 0 is 0
  desc[3] = 0x80;  // bit 31 of the little-endian word at offset 0
  EXPECT_EQ(fakecuda::DisabledTpcsOf(desc), expected);
  // Only bit 31 of word 0 enables: bit 7 (byte 0), bit 30 or bit 31 of other words do not.
  desc[3] = 0x40;
  desc[0] = 0x80;
  desc[7] = 0x80;
  EXPECT_TRUE(fakecuda::DisabledTpcsOf(desc).empty());
  // The rest of word 0 is no part of the mask.
  std::memset(desc, 0, sizeof(desc));
  desc[0] = 0xff;
  desc[3] = 0xff;
  EXPECT_TRUE(fakecuda::DisabledTpcsOf(desc).empty());
  desc[312] = 0x01;  // bit 64
  TpcMask b64;
  b64.Set(64);
  EXPECT_EQ(fakecuda::DisabledTpcsOf(desc), b64);
  // With the enable bit clear the mask words do nothing, whatever they hold.
  desc[3] = 0x7f;
  std::memset(desc + 304, 0xff, 16);
  EXPECT_TRUE(fakecuda::DisabledTpcsOf(desc).empty());
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
  EXPECT_NE(0, table.enable()(1, 0, kLaunchDomain, kLaunchCbid));
  EXPECT_NE(0, table.enable()(1, std::max(handle, second) + 1000, kLaunchDomain, kLaunchCbid));
  EXPECT_EQ(0, table.enable()(1, handle, kLaunchDomain, kLaunchCbid));
  EXPECT_EQ(0, table.enable()(0, handle, kLaunchDomain, kLaunchCbid));
  EXPECT_EQ(0, table.enable()(0, handle, kLaunchDomain, kLaunchCbid));
  // Other sites are accepted and never called; (3, 3) among them.
  for (const std::pair<int, int>& site :
       {std::pair{3, 3}, std::pair{0xb, 2}, std::pair{3, 1}, std::pair{0, 1}, std::pair{0xb, 0}}) {
    EXPECT_EQ(0, table.enable()(1, handle, site.first, site.second)) << site.first;
    EXPECT_EQ(0, table.enable()(1, second, site.first, site.second)) << site.first;
  }
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
  // Nothing was enabled for (0xb, 1): a launch calls nobody.
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
          table.enable()(1, handle, kLaunchDomain, kLaunchCbid) != 0) {
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
