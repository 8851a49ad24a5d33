// The TPC masker in process: the descriptor patch byte for byte, and the probe and the masks
// over the driver test double's launch callback stand-in (tests/fakecuda: 72 TPCs, 3, 12, 25,
// 38, 51 and 64 floorswept; live TPC k holds SMs k and k + 66).

#include "tpc_mask.h"

#include <dlfcn.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <array>
#include <cstring>
#include <memory>
#include <set>
#include <vector>

#include "test_util.h"
#include "spdlog/sinks/null_sink.h"
#include "spdlog/spdlog.h"

namespace missile::shim {
namespace {

// A launch callback's parameter block as the driver lays it out: size first, at byte 32 a
// pointer to the descriptor.
struct FakeLaunch {
  std::array<unsigned char, 512> descriptor = {};
  alignas(8) std::array<unsigned char, 0x30> params = {};
  explicit FakeLaunch(uint32_t size = 0x30, uint8_t version = 0x40) {
    std::memcpy(params.data(), &size, sizeof(size));
    void* d = descriptor.data();
    std::memcpy(params.data() + 32, &d, sizeof(d));
    descriptor[72] = version;
  }
  uint32_t Word(size_t at) const {
    uint32_t w;
    std::memcpy(&w, descriptor.data() + at, sizeof(w));
    return w;
  }
};

TEST(PatchLaunchDescriptorTest, OrsTheMaskIntoAVerifiedDescriptorOnly) {
  const pacing::TpcMask mask = pacing::DisableMask({0, 40, 127});
  FakeLaunch ok;
  ok.descriptor[304] = 0x02;  // a bit someone else disabled stays disabled
  uint8_t version = 0;
  ASSERT_TRUE(PatchLaunchDescriptor(ok.params.data(), mask, &version));
  EXPECT_EQ(version, 0x40);
  EXPECT_EQ(ok.Word(0), 0x80000000u);  // the enable bit
  EXPECT_EQ(ok.Word(304), 0x3u);
  EXPECT_EQ(ok.Word(308), 1u << 8);
  EXPECT_EQ(ok.Word(312), 0u);
  EXPECT_EQ(ok.Word(316), 0x80000000u);
  // Nothing outside the enable word and the mask's 16 bytes changed.
  for (size_t i = 4; i < ok.descriptor.size(); ++i) {
    if (i < 304 || i >= 320) {
      EXPECT_EQ(ok.descriptor[i], i == 72 ? 0x40 : 0) << i;
    }
  }
  // An empty mask is no mask: not even the enable bit.
  FakeLaunch none;
  EXPECT_TRUE(PatchLaunchDescriptor(none.params.data(), pacing::TpcMask{}, &version));
  EXPECT_EQ(none.Word(0), 0u);

  FakeLaunch other_version(0x30, 0x30);
  EXPECT_FALSE(PatchLaunchDescriptor(other_version.params.data(), mask, &version));
  EXPECT_EQ(version, 0x30);
  EXPECT_EQ(other_version.Word(304), 0u);
  FakeLaunch small(0x20);
  EXPECT_FALSE(PatchLaunchDescriptor(small.params.data(), mask, &version));
  EXPECT_EQ(small.Word(304), 0u);
  FakeLaunch no_descriptor;
  std::memset(no_descriptor.params.data() + 32, 0, 8);
  EXPECT_FALSE(PatchLaunchDescriptor(no_descriptor.params.data(), mask, &version));
  EXPECT_FALSE(PatchLaunchDescriptor(nullptr, mask, &version));
}

class TpcMaskerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    fakecuda_test::InitPrimary();
    driver_ = dlopen(FAKECUDA_LIBRARY_PATH, RTLD_NOW | RTLD_NOLOAD);
    ASSERT_NE(driver_, nullptr);
    api_.Resolve(driver_);
    ASSERT_EQ(CUDA_SUCCESS, cuModuleLoadData(&module_, "fakecuda-module"));
    ASSERT_EQ(CUDA_SUCCESS, cuModuleGetFunction(&probe_, module_, "fakecuda_sm_probe"));
    ASSERT_EQ(CUDA_SUCCESS, cuMemAlloc(&out_, kBlocks * 4));
    ASSERT_EQ(CUDA_SUCCESS, cuStreamCreate(&stream_, CU_STREAM_NON_BLOCKING));
    logger_ = std::make_shared<spdlog::logger>("test", std::make_shared<spdlog::sinks::null_sink_mt>());
  }
  void TearDown() override {
    cuStreamDestroy(stream_);
    cuMemFree(out_);
    cuModuleUnload(module_);
    if (driver_ != nullptr) dlclose(driver_);
  }

  // The SMs one probe launch of the calling thread used.
  std::set<uint32_t> Sms() {
    uint64_t dur = 0;
    void* params[] = {&out_, &dur};
    EXPECT_EQ(CUDA_SUCCESS, cuLaunchKernel(probe_, kBlocks, 1, 1, 1, 1, 1, 0, stream_, params,
                                           nullptr));
    EXPECT_EQ(CUDA_SUCCESS, cuStreamSynchronize(stream_));
    std::vector<uint32_t> host(kBlocks);
    EXPECT_EQ(CUDA_SUCCESS, cuMemcpyDtoH(host.data(), out_, kBlocks * 4));
    return std::set<uint32_t>(host.begin(), host.end());
  }

  static constexpr unsigned kBlocks = 2112;
  void* driver_ = nullptr;
  DriverApi api_;
  CUmodule module_ = nullptr;
  CUfunction probe_ = nullptr;
  CUdeviceptr out_ = 0;
  CUstream stream_ = nullptr;
  std::shared_ptr<spdlog::logger> logger_;
};

TEST_F(TpcMaskerTest, ProbesTheLiveBitsAndMasksOnlyTheScopedThreadsLaunches) {
  TpcMasker masker(api_, logger_.get());
  absl::StatusOr<const pacing::TpcMap*> map = masker.MapFor(0);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ((*map)->sm_count, 132u);
  ASSERT_EQ((*map)->live.size(), 66u);
  EXPECT_EQ((*map)->live[3].bit, 4u);     // TPC 3 is floorswept
  EXPECT_EQ((*map)->live[30].bit, 33u);   // and 12 and 25
  EXPECT_EQ((*map)->live[65].bit, 71u);
  EXPECT_EQ((*map)->live[65].sms, (std::vector<uint32_t>{65, 131}));
  EXPECT_EQ(masker.applied(), 256u);      // every bit-disabled probe launch was patched
  EXPECT_EQ(masker.MapFor(0).value(), *map);  // probed once
  EXPECT_EQ(masker.applied(), 256u);

  const pacing::TpcMask mask = pacing::ReserveMask(**map, 8);
  const std::vector<uint32_t> reserved = pacing::ReservedSms(**map, 8);
  std::set<uint32_t> sms;
  {
    TpcMasker::Scope scope(&mask);
    sms = Sms();
  }
  EXPECT_EQ(sms.size(), 116u);
  for (uint32_t sm : reserved) EXPECT_FALSE(sms.contains(sm)) << sm;
  EXPECT_EQ(masker.applied(), 257u);
  EXPECT_EQ(Sms().size(), 132u);  // out of the scope: unmasked
  EXPECT_EQ(masker.applied(), 257u);
  EXPECT_EQ(masker.refused(), 0u);
}

}  // namespace
}  // namespace missile::shim
