// The memory path in process: MemoryManager over a FakeSession (the daemon) and a
// RecordingDriver (the GPU). Each test checks what reaches the daemon and the driver.
#include "memory.h"

#include <memory>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "session_manager.h"
#include "spdlog/sinks/null_sink.h"
#include "testing/fake_session.h"
#include "testing/recording_driver.h"

namespace missile::shim {
namespace {

using ::missile::shim::testing::FakeConnector;
using ::missile::shim::testing::FakeSession;
using ::missile::shim::testing::RecordingDriver;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr std::optional<CUresult> kOk = CUDA_SUCCESS;

class MemoryManagerTest : public ::testing::Test {
 protected:
  // One GPU of `total` bytes (the reuse cache then holds an eighth of it, here 32 MiB), 2 MiB
  // granules; `quota` 0: unlimited.
  void Start(uint64_t quota, uint64_t total = 256 * kMiB) {
    GpuLink link{0, RecordingDriver::UuidOf(0), total, 2 * kMiB, 1};
    auto s = std::make_unique<FakeSession>(std::vector<GpuLink>{link}, quota);
    session_ = s.get();
    connector_.Queue(std::move(s));
    sessions_ = std::make_unique<SessionManager>(config_, driver_.api(), &connector_, log_.get());
    memory_ = std::make_unique<MemoryManager>(config_, driver_.api(), sessions_.get(), log_.get());
  }
  GpuMemory* gpu() { return memory_->StateOf(0); }
  CUdeviceptr MustAlloc(size_t bytes) {
    CUdeviceptr p = 0;
    EXPECT_EQ(memory_->Alloc(&p, bytes), kOk);
    return p;
  }

  RecordingDriver driver_;
  FakeConnector connector_;
  Config config_;
  std::shared_ptr<spdlog::logger> log_ = std::make_shared<spdlog::logger>(
      "memory_test", std::make_shared<spdlog::sinks::null_sink_mt>());
  FakeSession* session_ = nullptr;
  std::unique_ptr<SessionManager> sessions_;
  std::unique_ptr<MemoryManager> memory_;
};

TEST_F(MemoryManagerTest, AllocationIsServedFromOneDaemonBlock) {
  Start(0);
  CUdeviceptr p = MustAlloc(3 * kMiB);
  ASSERT_EQ(session_->leases().size(), 1u);
  EXPECT_TRUE(session_->leases()[0].single);
  EXPECT_EQ(session_->leases()[0].bytes, 4 * kMiB);  // rounded up to the granularity
  EXPECT_EQ(driver_.Sequence({"cuMemAddressReserve", "cuMemImportFromShareableHandle", "cuMemMap",
                              "cuMemRelease", "cuMemSetAccess"}),
            (std::vector<std::string>{"cuMemAddressReserve", "cuMemImportFromShareableHandle",
                                      "cuMemMap", "cuMemRelease", "cuMemSetAccess"}));
  auto entry = memory_->Find(p + 1);
  ASSERT_TRUE(entry.has_value());
  EXPECT_EQ(entry->base, p);
  EXPECT_EQ(entry->size, 3 * kMiB);
  EXPECT_EQ(memory_->leased_bytes(), 4 * kMiB);
  EXPECT_EQ(memory_->allocations(), 1u);
}

TEST_F(MemoryManagerTest, FreedRangeIsReusedWithoutTheDaemonOrTheDriver) {
  Start(0);
  CUdeviceptr p = MustAlloc(4 * kMiB);
  EXPECT_EQ(memory_->Free(p), kOk);
  EXPECT_EQ(driver_.Count("cuCtxSynchronize"), 1);  // as cuMemFree does, before memory goes
  EXPECT_EQ(driver_.Count("cuMemUnmap"), 0);        // kept mapped, in the cache
  EXPECT_TRUE(session_->frees().empty());
  EXPECT_FALSE(memory_->Find(p).has_value());
  EXPECT_EQ(gpu()->cached_ranges(), 1u);
  EXPECT_EQ(memory_->leased_bytes(), 0u);
  driver_.ClearCalls();
  EXPECT_EQ(MustAlloc(4 * kMiB), p);
  EXPECT_EQ(session_->leases().size(), 1u);
  EXPECT_EQ(driver_.Count("cuMemMap"), 0);
  EXPECT_EQ(gpu()->cached_ranges(), 0u);
  // Another size is not served from it.
  CUdeviceptr q = MustAlloc(6 * kMiB);
  EXPECT_NE(q, p);
  EXPECT_EQ(session_->leases().size(), 2u);
}

TEST_F(MemoryManagerTest, SmallAllocationsAreCarvedFromOneGranuleBlock) {
  Start(0);
  std::vector<CUdeviceptr> ptrs;
  for (int i = 0; i < 3; ++i) ptrs.push_back(MustAlloc(1000));
  ASSERT_EQ(session_->leases().size(), 1u);
  EXPECT_FALSE(session_->leases()[0].single);
  EXPECT_EQ(session_->leases()[0].bytes, 2 * kMiB);
  for (CUdeviceptr p : ptrs) EXPECT_EQ(p % 256, 0u);
  EXPECT_NE(ptrs[0], ptrs[1]);
  EXPECT_NE(ptrs[1], ptrs[2]);
  for (CUdeviceptr p : ptrs) EXPECT_EQ(memory_->Free(p), kOk);
  EXPECT_EQ(memory_->Free(ptrs[0]), std::nullopt);  // no longer Missile's: the driver's error
}

TEST_F(MemoryManagerTest, QuotaRefusalReturnsTheCacheAndRetriesOnce) {
  Start(/*quota=*/8 * kMiB);
  CUdeviceptr p = MustAlloc(4 * kMiB);
  EXPECT_EQ(memory_->Free(p), kOk);  // cached: the daemon still counts it
  CUdeviceptr q = MustAlloc(6 * kMiB);
  EXPECT_NE(q, 0u);
  std::vector<FakeSession::Lease> leases = session_->leases();
  ASSERT_EQ(leases.size(), 3u);
  EXPECT_TRUE(leases[0].granted);
  EXPECT_FALSE(leases[1].granted);  // 4 cached + 6 > 8
  EXPECT_TRUE(leases[2].granted);   // after the cache went back
  ASSERT_EQ(session_->frees().size(), 1u);
  EXPECT_EQ(session_->frees()[0].size(), 1u);
  EXPECT_EQ(driver_.Count("cuMemUnmap"), 1);
  EXPECT_EQ(session_->used_bytes(), 6 * kMiB);
}

TEST_F(MemoryManagerTest, QuotaRefusalWithNothingToReturnIsOutOfMemory) {
  Start(/*quota=*/8 * kMiB);
  CUdeviceptr p = 0;
  EXPECT_EQ(memory_->Alloc(&p, 10 * kMiB), std::optional<CUresult>(CUDA_ERROR_OUT_OF_MEMORY));
  EXPECT_EQ(session_->leases().size(), 2u);  // tried, then once more after returning nothing
  EXPECT_EQ(driver_.Count("cuMemMap"), 0);
  EXPECT_EQ(memory_->leased_bytes(), 0u);
}

TEST_F(MemoryManagerTest, WithoutADaemonAllocationsPassThrough) {
  connector_.set_socket_exists(false);
  Start(0);
  CUdeviceptr p = 0;
  EXPECT_EQ(memory_->Alloc(&p, 4 * kMiB), std::nullopt);
  EXPECT_EQ(connector_.connects(), 0);  // no socket: not even tried
  EXPECT_FALSE(memory_->connected());
}

TEST_F(MemoryManagerTest, WithoutADaemonAndRefuseAllocationsFail) {
  connector_.set_socket_exists(false);
  config_.refuse_without_daemon = true;
  Start(0);
  CUdeviceptr p = 0;
  EXPECT_EQ(memory_->Alloc(&p, 4 * kMiB), std::optional<CUresult>(CUDA_ERROR_OUT_OF_MEMORY));
}

TEST_F(MemoryManagerTest, EvictedBlocksGoBackInBatches) {
  Start(0);  // reuse cache: 32 MiB at most, so a 34 MiB range is unmapped when freed
  for (size_t i = 1; i < GpuMemory::kFreeBatchBlocks; ++i) {
    EXPECT_EQ(memory_->Free(MustAlloc(34 * kMiB)), kOk);
    EXPECT_EQ(gpu()->queued_blocks(), i);
  }
  EXPECT_TRUE(session_->frees().empty());
  EXPECT_EQ(memory_->Free(MustAlloc(34 * kMiB)), kOk);
  ASSERT_EQ(session_->frees().size(), 1u);
  EXPECT_EQ(session_->frees()[0].size(), GpuMemory::kFreeBatchBlocks);
  EXPECT_EQ(gpu()->queued_blocks(), 0u);
  EXPECT_EQ(session_->used_bytes(), 0u);
  EXPECT_TRUE(driver_.mappings().empty());
}

TEST_F(MemoryManagerTest, CapacityQueryReturnsCachedAndQueuedBlocksFirst) {
  Start(/*quota=*/64 * kMiB);
  CUdeviceptr small_range = MustAlloc(4 * kMiB);
  CUdeviceptr big = MustAlloc(40 * kMiB);  // over the 8 MiB cache bound: queued when freed
  EXPECT_EQ(memory_->Free(small_range), kOk);
  EXPECT_EQ(memory_->Free(big), kOk);
  EXPECT_EQ(gpu()->cached_ranges(), 1u);
  EXPECT_EQ(gpu()->queued_blocks(), 1u);
  size_t free_bytes = 0, total = 0;
  EXPECT_EQ(memory_->GetInfo(&free_bytes, &total), kOk);
  EXPECT_EQ(total, 64 * kMiB);
  EXPECT_EQ(free_bytes, 64 * kMiB);  // what the program freed is free
  ASSERT_EQ(session_->frees().size(), 1u);
  EXPECT_EQ(session_->frees()[0].size(), 2u);
  EXPECT_EQ(gpu()->cached_ranges(), 0u);
}

CUmemAllocationProp DeviceProp() {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  return prop;
}

TEST_F(MemoryManagerTest, VmmHandleGoesBackOnlyWhenReleasedAndUnmapped) {
  Start(0);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(memory_->VmmCreate(&h, 2 * kMiB, &prop, 0), kOk);
  const uint64_t block = session_->leases().size() == 1 ? 100 : 0;  // the fake's first block
  EXPECT_EQ(memory_->vmm_handles().CountsOf(h), std::make_pair(1, 0));
  memory_->VmmMapped(0x5000000, 2 * kMiB, h);
  memory_->VmmRetained(h);
  EXPECT_EQ(memory_->vmm_handles().CountsOf(h), std::make_pair(2, 1));
  EXPECT_EQ(memory_->VmmRelease(h), kOk);
  EXPECT_EQ(memory_->VmmRelease(h), kOk);
  EXPECT_EQ(driver_.Count("cuMemRelease"), 2);  // the program's releases reach the driver
  EXPECT_EQ(memory_->vmm_handles().CountsOf(h), std::make_pair(0, 1));
  EXPECT_EQ(gpu()->queued_blocks(), 0u);  // still mapped: the block stays
  EXPECT_EQ(memory_->leased_bytes(), 2 * kMiB);
  memory_->VmmUnmapped(0x5000000, 2 * kMiB);
  EXPECT_FALSE(memory_->vmm_handles().CountsOf(h).has_value());
  EXPECT_EQ(gpu()->queued_blocks(), 1u);
  EXPECT_EQ(memory_->leased_bytes(), 0u);
  size_t free_bytes = 0, total = 0;
  EXPECT_EQ(memory_->GetInfo(&free_bytes, &total), kOk);
  ASSERT_EQ(session_->frees().size(), 1u);
  EXPECT_EQ(session_->frees()[0], std::vector<uint64_t>{block});
  // A handle Missile did not make is the driver's.
  EXPECT_EQ(memory_->VmmRelease(h), std::nullopt);
}

TEST_F(MemoryManagerTest, VmmHandleUnmappedBeforeReleaseGoesBackAtRelease) {
  Start(0);
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  ASSERT_EQ(memory_->VmmCreate(&h, 2 * kMiB, &prop, 0), kOk);
  memory_->VmmMapped(0x5000000, 2 * kMiB, h);
  memory_->VmmUnmapped(0x5000000, 2 * kMiB);
  EXPECT_EQ(memory_->vmm_handles().CountsOf(h), std::make_pair(1, 0));
  EXPECT_EQ(gpu()->queued_blocks(), 0u);
  EXPECT_EQ(memory_->VmmRelease(h), kOk);
  EXPECT_EQ(gpu()->queued_blocks(), 1u);
}

TEST_F(MemoryManagerTest, DeferredFreeWaitsForItsStream) {
  Start(0);
  driver_.set_events_pending(true);
  CUdeviceptr p = MustAlloc(4 * kMiB);
  EXPECT_EQ(memory_->FreeAsync(p, nullptr, false), kOk);
  EXPECT_FALSE(memory_->Find(p).has_value());
  EXPECT_EQ(gpu()->cached_ranges(), 0u);  // the stream has not reached the free
  CUdeviceptr q = MustAlloc(4 * kMiB);
  EXPECT_NE(q, p);
  driver_.CompleteEvents();
  EXPECT_EQ(MustAlloc(4 * kMiB), p);  // reaped, then reused
}

TEST_F(MemoryManagerTest, EndedSessionUnmapsItsCacheAndPassesThrough) {
  Start(0);
  CUdeviceptr p = MustAlloc(4 * kMiB);
  EXPECT_EQ(memory_->Free(p), kOk);
  session_->End();
  CUdeviceptr q = 0;
  EXPECT_EQ(memory_->Alloc(&q, 4 * kMiB), std::nullopt);  // MISSILE_NO_DAEMON=passthrough
  EXPECT_EQ(driver_.Count("cuMemUnmap"), 1);  // the end listener emptied the cache
  EXPECT_TRUE(session_->frees().empty());     // nothing goes to an ended session
}

}  // namespace
}  // namespace missile::shim
