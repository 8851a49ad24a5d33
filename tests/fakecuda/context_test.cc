// Initialisation, devices, contexts and the environment.

#include <thread>

#include "test_util.h"

namespace fakecuda_test {
namespace {

TEST(DeviceTest, DescribesAnHopperLikeDevice) {
  CU_ASSERT(cuInit(0));
  int count = 0;
  CU_ASSERT(cuDeviceGetCount(&count));
  EXPECT_EQ(count, 1);
  CUdevice dev = -1;
  CU_ASSERT(cuDeviceGet(&dev, 0));
  EXPECT_EQ(dev, 0);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_DEVICE, cuDeviceGet(&dev, 1));
  char name[64] = {};
  CU_ASSERT(cuDeviceGetName(name, sizeof(name), 0));
  EXPECT_STREQ(name, "Fake GPU (missile test double)");
  char short_name[5] = {};
  CU_ASSERT(cuDeviceGetName(short_name, sizeof(short_name), 0));
  EXPECT_STREQ(short_name, "Fake");
  int value = -1;
  const std::pair<CUdevice_attribute, int> expected[] = {
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, 9},
      {CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, 0},
      {CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 132},
      {CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING, 1},
      {CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED, 1},
      {CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM, 1},
      {CU_DEVICE_ATTRIBUTE_MAX_THREADS_PER_BLOCK, 0},
  };
  for (const auto& [attr, want] : expected) {
    CU_ASSERT(cuDeviceGetAttribute(&value, attr, 0));
    EXPECT_EQ(value, want) << attr;
  }
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MAX, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_DEVICE,
                cuDeviceGetAttribute(&value, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, 3));
  CUuuid a{};
  CUuuid b{};
  CU_ASSERT(cuDeviceGetUuid(&a, 0));
  CU_ASSERT(cuDeviceGetUuid_v2(&b, 0));
  EXPECT_EQ(0, std::memcmp(a.bytes, b.bytes, sizeof(a.bytes)));
}

TEST(DeviceTest, EnvironmentSetsDevicesAndMemory) {
  const ShmGuard shm(UniqueShmName("env"));
  const int status = RunInChild([&] {
    setenv("FAKECUDA_SHM", shm.name.c_str(), 1);
    setenv("FAKECUDA_DEVICES", "3", 1);
    setenv("FAKECUDA_TOTAL_MEM", "8G", 1);
    CU_EXPECT(cuInit(0));
    int count = 0;
    size_t total = 0;
    CU_EXPECT(cuDeviceGetCount(&count));
    CU_EXPECT(cuDeviceTotalMem(&total, 2));
    EXPECT_EQ(count, 3);
    EXPECT_EQ(total, 8ull << 30);
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;

  // A malformed variable makes cuInit fail loudly instead of running with a guess.
  const int bad = RunInChild([&] {
    setenv("FAKECUDA_SHM", shm.name.c_str(), 1);
    setenv("FAKECUDA_TOTAL_MEM", "lots", 1);
    return cuInit(0) == CUDA_ERROR_INVALID_VALUE ? 0 : 1;
  });
  EXPECT_TRUE(ExitedOk(bad)) << bad;

  // Processes sharing a state file must agree on its geometry.
  const int mismatch = RunInChild([&] {
    setenv("FAKECUDA_SHM", shm.name.c_str(), 1);
    setenv("FAKECUDA_TOTAL_MEM", "4G", 1);
    return cuInit(0) == CUDA_ERROR_OPERATING_SYSTEM ? 0 : 1;
  });
  EXPECT_TRUE(ExitedOk(mismatch)) << mismatch;
}

TEST(DeviceTest, RefusesToRunWhereARealGpuIs) {
  if (access("/dev/nvidiactl", F_OK) != 0) {
    GTEST_SKIP() << "no /dev/nvidiactl here; the refusal cannot be exercised on this machine";
  }
  const int status = RunInChild([] {
    unsetenv("FAKECUDA_ALLOW_WITH_GPU");
    return cuInit(0) == CUDA_ERROR_NO_DEVICE ? 0 : 1;
  });
  EXPECT_TRUE(ExitedOk(status));
}

TEST(ContextTest, PrimaryContextIsRefcounted) {
  CU_ASSERT(cuInit(0));
  const int status = RunInChild([] {  // a fresh state: no retains from other tests
    CU_EXPECT(cuInit(0));
    unsigned flags = 99;
    int active = -1;
    CU_EXPECT(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EXPECT_EQ(active, 0);
    CU_EXPECT(cuDevicePrimaryCtxSetFlags(0, CU_CTX_SCHED_BLOCKING_SYNC));
    CUcontext a = nullptr;
    CUcontext b = nullptr;
    CU_EXPECT(cuDevicePrimaryCtxRetain(&a, 0));
    CU_EXPECT(cuDevicePrimaryCtxRetain(&b, 0));
    EXPECT_EQ(a, b);
    CU_EXPECT(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EXPECT_EQ(active, 1);
    EXPECT_EQ(flags, static_cast<unsigned>(CU_CTX_SCHED_BLOCKING_SYNC));
    CU_EXPECT(cuCtxSetCurrent(a));
    CUdeviceptr p = 0;
    CU_EXPECT(cuMemAlloc(&p, 4096));
    CU_EXPECT(cuDevicePrimaryCtxRelease(0));
    CU_EXPECT(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EXPECT_EQ(active, 1);
    CU_EXPECT(cuDevicePrimaryCtxRelease(0));
    CU_EXPECT(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EXPECT_EQ(active, 0);
    // Its memory went with it, and it is no longer usable though still current.
    CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFree(p));
    CU_EXPECT_ERR(CUDA_ERROR_CONTEXT_IS_DESTROYED, cuMemAlloc(&p, 4096));
    CU_EXPECT_ERR(CUDA_ERROR_INVALID_CONTEXT, cuDevicePrimaryCtxRelease(0));
    // Retained again: the same handle, active again.
    CU_EXPECT(cuDevicePrimaryCtxRetain(&b, 0));
    EXPECT_EQ(a, b);
    CU_EXPECT(cuMemAlloc(&p, 4096));
    CU_EXPECT(cuDevicePrimaryCtxReset(0));
    CU_EXPECT(cuDevicePrimaryCtxGetState(0, &flags, &active));
    EXPECT_EQ(active, 0);
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
}

TEST(ContextTest, CurrentContextIsPerThreadAndStacked) {
  CUcontext primary = InitPrimary();
  CUcontext created = nullptr;
  CU_ASSERT(cuCtxCreate(&created, nullptr, 0, 0));
  CUcontext current = nullptr;
  CU_ASSERT(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, created);
  CUdevice dev = -1;
  CU_ASSERT(cuCtxGetDevice(&dev));
  EXPECT_EQ(dev, 0);
  CU_ASSERT(cuCtxGetDevice_v2(&dev, primary));
  EXPECT_EQ(dev, 0);

  std::thread([&] {
    CUcontext other = reinterpret_cast<CUcontext>(1);
    CU_EXPECT(cuCtxGetCurrent(&other));
    EXPECT_EQ(other, nullptr);  // a new thread has no current context
    CUdeviceptr p = 0;
    CU_EXPECT_ERR(CUDA_ERROR_INVALID_CONTEXT, cuMemAlloc(&p, 4096));
    CU_EXPECT(cuCtxPushCurrent(created));
    CU_EXPECT(cuMemAlloc(&p, 4096));
    CU_EXPECT(cuMemFree(p));
    CUcontext popped = nullptr;
    CU_EXPECT(cuCtxPopCurrent(&popped));
    EXPECT_EQ(popped, created);
    CU_EXPECT_ERR(CUDA_ERROR_INVALID_CONTEXT, cuCtxPopCurrent(&popped));
  }).join();

  CUcontext popped = nullptr;
  CU_ASSERT(cuCtxPopCurrent(&popped));
  EXPECT_EQ(popped, created);
  CU_ASSERT(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, primary);
  CU_ASSERT(cuCtxPushCurrent(created));
  CU_ASSERT(cuCtxDestroy(created));
  CU_ASSERT(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, primary);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(created));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_CONTEXT, cuCtxSetCurrent(created));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_CONTEXT, cuCtxDestroy(primary));  // primary: not destroyable
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuCtxCreate(&created, nullptr, 0x1000, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_DEVICE, cuCtxCreate(&created, nullptr, 0, 5));
  CU_ASSERT(cuCtxCreate_v2(&created, 0, 0));
  CU_ASSERT(cuCtxDestroy(created));
  CU_ASSERT(cuCtxCreate_v3(&created, nullptr, 0, 0, 0));
  CU_ASSERT(cuCtxDestroy(created));
}

TEST(ContextTest, SynchronizeWaitsForEveryStreamOfTheContext) {
  InitPrimary();
  CUstream a = nullptr;
  CUstream b = nullptr;
  CU_ASSERT(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(cuStreamCreate(&b, 0));
  std::atomic<int> done{0};
  auto sleeper = [](void* arg) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    static_cast<std::atomic<int>*>(arg)->fetch_add(1);
  };
  CU_ASSERT(cuLaunchHostFunc(a, sleeper, &done));
  CU_ASSERT(cuLaunchHostFunc(b, sleeper, &done));
  CU_ASSERT(cuLaunchHostFunc(nullptr, sleeper, &done));
  CU_ASSERT(cuLaunchHostFunc_ptsz(nullptr, sleeper, &done));
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(done.load(), 4);
  CU_ASSERT(cuStreamDestroy(a));
  CU_ASSERT(cuStreamDestroy(b));
}

}  // namespace
}  // namespace fakecuda_test
