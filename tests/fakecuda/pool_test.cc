// Stream-ordered allocation and memory pools.

#include <atomic>
#include <thread>

#include "test_util.h"

namespace fakecuda_test {
namespace {

class PoolTest : public ::testing::Test {
 protected:
  void SetUp() override { InitPrimary(); }

  static uint64_t Attr(CUmemoryPool pool, CUmemPool_attribute attr) {
    cuuint64_t v = 0;
    EXPECT_EQ(CUDA_SUCCESS, cuMemPoolGetAttribute(pool, attr, &v));
    return v;
  }
  static size_t Free() {
    size_t free = 0;
    size_t total = 0;
    EXPECT_EQ(CUDA_SUCCESS, cuMemGetInfo(&free, &total));
    return free;
  }
};

TEST_F(PoolTest, AllocAsyncIsAccountedAndFreedInStreamOrder) {
  CUmemoryPool pool = nullptr;
  CU_ASSERT(cuDeviceGetDefaultMemPool(&pool, 0));
  CUmemoryPool current = nullptr;
  CU_ASSERT(cuDeviceGetMemPool(&current, 0));
  EXPECT_EQ(current, pool);
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  const size_t free0 = Free();
  const uint64_t used0 = Attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT);

  CUdeviceptr p = 0;
  CU_ASSERT(cuMemAllocAsync(&p, 1 << 20, s));
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), used0 + (1 << 20));
  EXPECT_EQ(free0 - Free(), 1u << 20);
  CU_ASSERT(cuMemsetD8Async(p, 3, 1 << 20, s));
  CUevent set = nullptr;
  CU_ASSERT(cuEventCreate(&set, 0));
  CU_ASSERT(cuEventRecord(set, s));
  CUmemoryPool owner = nullptr;
  CU_ASSERT(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  EXPECT_EQ(owner, pool);

  // Hold the stream, queue the free: the memory stays until the stream reaches the free.
  std::atomic<bool> release{false};
  CU_ASSERT(cuLaunchHostFunc(
      s,
      [](void* arg) {
        while (!static_cast<std::atomic<bool>*>(arg)->load()) {
          std::this_thread::sleep_for(std::chrono::milliseconds(1));
        }
      },
      &release));
  CU_ASSERT(cuMemFreeAsync(p, s));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(p, s));  // already being freed
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), used0 + (1 << 20));
  CU_ASSERT(cuEventSynchronize(set));  // the memset ran; the free waits behind the host function
  EXPECT_EQ(reinterpret_cast<unsigned char*>(p)[100], 3);
  release = true;
  CU_ASSERT(cuStreamSynchronize(s));
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), used0);
  EXPECT_EQ(Free(), free0);  // release threshold 0: given back at once
  EXPECT_GE(Attr(pool, CU_MEMPOOL_ATTR_USED_MEM_HIGH), used0 + (1 << 20));
  CU_ASSERT(cuEventDestroy(set));
  CU_ASSERT(cuStreamDestroy(s));
}

TEST_F(PoolTest, ThresholdKeepsMemoryReservedUntilTrimmed) {
  CUmemPoolProps props{};
  props.allocType = CU_MEM_ALLOCATION_TYPE_PINNED;
  props.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  props.location.id = 0;
  CUmemoryPool pool = nullptr;
  CU_ASSERT(cuMemPoolCreate(&pool, &props));
  cuuint64_t threshold = 64 << 20;
  CU_ASSERT(cuMemPoolSetAttribute(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD, &threshold));
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_RELEASE_THRESHOLD), threshold);
  const size_t free0 = Free();

  CUdeviceptr p = 0;
  CU_ASSERT(cuMemAllocFromPoolAsync(&p, 4 << 20, pool, nullptr));
  CU_ASSERT(cuMemFreeAsync(p, nullptr));
  CU_ASSERT(cuStreamSynchronize(nullptr));
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT), 0u);
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4u << 20);
  EXPECT_EQ(free0 - Free(), 4u << 20);  // cached memory still counts

  // A fitting allocation reuses the cached block.
  CUdeviceptr q = 0;
  CU_ASSERT(cuMemAllocFromPoolAsync_ptsz(&q, 3 << 20, pool, nullptr));
  EXPECT_EQ(q, p);
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 4u << 20);
  CU_ASSERT(cuMemFreeAsync_ptsz(q, nullptr));
  CU_ASSERT(cuStreamSynchronize_ptsz(nullptr));

  CU_ASSERT(cuMemPoolTrimTo(pool, 0));
  EXPECT_EQ(Attr(pool, CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT), 0u);
  EXPECT_EQ(Free(), free0);

  // The device's current pool can be switched; destroying it falls back to the default.
  CUmemoryPool def = nullptr;
  CU_ASSERT(cuDeviceGetDefaultMemPool(&def, 0));
  CU_ASSERT(cuDeviceSetMemPool(0, pool));
  CU_ASSERT(cuMemAllocAsync(&p, 4096, nullptr));
  CUmemoryPool owner = nullptr;
  CU_ASSERT(cuPointerGetAttribute(&owner, CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE, p));
  EXPECT_EQ(owner, pool);
  CU_ASSERT(cuMemFree(p));  // a synchronous free of a pool allocation
  CU_ASSERT(cuMemPoolDestroy(pool));
  CUmemoryPool current = nullptr;
  CU_ASSERT(cuDeviceGetMemPool(&current, 0));
  EXPECT_EQ(current, def);
  cuuint64_t v = 0;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuMemPoolGetAttribute(pool, CU_MEMPOOL_ATTR_USED_MEM_CURRENT, &v));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemPoolDestroy(def));
}

TEST_F(PoolTest, OutOfMemoryLikeCuMemAlloc) {
  const size_t free0 = Free();
  CUdeviceptr p = 0;
  CU_EXPECT_ERR(CUDA_ERROR_OUT_OF_MEMORY, cuMemAllocAsync(&p, free0 + 4096, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemAllocAsync(&p, 0, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFreeAsync(0x1000, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE,
                cuMemAllocAsync(&p, 4096, reinterpret_cast<CUstream>(0x12345)));
}

}  // namespace
}  // namespace fakecuda_test
