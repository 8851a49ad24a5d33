// cuMemAlloc-style memory, accounting, pinned host memory and pointer queries.

#include <cstdlib>
#include <vector>

#include "test_util.h"

namespace fakecuda_test {
namespace {

class MemoryTest : public ::testing::Test {
 protected:
  void SetUp() override { ctx_ = InitPrimary(); }
  CUcontext ctx_ = nullptr;
};

TEST(MemoryBeforeInit, EveryCallButTheBootstrapOnesNeedsCuInit) {
  const int status = RunInChild([] {
    CUdeviceptr p = 0;
    int version = 0;
    if (cuMemAlloc(&p, 4096) != CUDA_ERROR_NOT_INITIALIZED) return 1;
    if (cuDriverGetVersion(&version) != CUDA_SUCCESS || version != 13000) return 2;
    const char* s = nullptr;
    if (cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s) != CUDA_SUCCESS) return 3;
    int count = 0;
    if (cuDeviceGetCount(&count) != CUDA_ERROR_NOT_INITIALIZED) return 4;
    if (cuInit(0) != CUDA_SUCCESS || cuDeviceGetCount(&count) != CUDA_SUCCESS || count != 1) {
      return 5;
    }
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
}

TEST_F(MemoryTest, AllocIsUsableHostMemoryAndAccounted) {
  size_t free0 = 0;
  size_t total = 0;
  CU_ASSERT(cuMemGetInfo(&free0, &total));
  EXPECT_EQ(total, 16ull << 30);
  size_t dev_total = 0;
  CU_ASSERT(cuDeviceTotalMem(&dev_total, 0));
  EXPECT_EQ(dev_total, total);

  CUdeviceptr p = 0;
  CU_ASSERT(cuMemAlloc(&p, 1 << 20));
  EXPECT_EQ(p % 256, 0u);
  size_t free1 = 0;
  CU_ASSERT(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, 1u << 20);
  // Device memory is host memory: plain stores and loads work.
  auto* bytes = reinterpret_cast<unsigned char*>(p);
  bytes[0] = 1;
  bytes[(1 << 20) - 1] = 2;
  EXPECT_EQ(bytes[0] + bytes[(1 << 20) - 1], 3);

  CUdeviceptr base = 0;
  size_t size = 0;
  CU_ASSERT(cuMemGetAddressRange(&base, &size, p + 1000));
  EXPECT_EQ(base, p);
  EXPECT_EQ(size, 1u << 20);

  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFree(p + 256));  // interior pointer
  CU_ASSERT(cuMemFree(p));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFree(p));  // twice
  size_t free2 = 0;
  CU_ASSERT(cuMemGetInfo(&free2, &total));
  EXPECT_EQ(free2, free0);
}

TEST_F(MemoryTest, InvalidArgumentsGetErrorsNotCrashes) {
  CUdeviceptr p = 0;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(&p, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemAlloc(nullptr, 4096));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFree(0x1234));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemGetInfo(nullptr, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_NOT_FOUND, cuMemGetAddressRange(nullptr, nullptr, 0x1234));
  size_t pitch = 0;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemAllocPitch(&p, &pitch, 100, 10, 3));
  const char* s = "unchanged";
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGetErrorString(static_cast<CUresult>(12345), &s));
  EXPECT_EQ(s, nullptr);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuGetErrorName(static_cast<CUresult>(12345), &s));
  EXPECT_EQ(s, nullptr);
  CU_ASSERT(cuGetErrorString(CUDA_ERROR_OUT_OF_MEMORY, &s));
  EXPECT_STREQ(s, "out of memory");
  CU_ASSERT(cuGetErrorName(CUDA_ERROR_INVALID_HANDLE, &s));
  EXPECT_STREQ(s, "CUDA_ERROR_INVALID_HANDLE");
}

TEST_F(MemoryTest, OutOfMemoryBeyondTheDeviceTotal) {
  size_t free0 = 0;
  size_t total = 0;
  CU_ASSERT(cuMemGetInfo(&free0, &total));
  CUdeviceptr p = 0;
  CU_EXPECT_ERR(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, free0 + 4096));
  CUdeviceptr all = 0;
  CU_ASSERT(cuMemAlloc(&all, free0));  // address space only: mapped MAP_NORESERVE
  size_t free1 = 0;
  CU_ASSERT(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, 0u);
  CU_EXPECT_ERR(CUDA_ERROR_OUT_OF_MEMORY, cuMemAlloc(&p, 4096));
  CU_ASSERT(cuMemFree(all));
  CU_ASSERT(cuMemAlloc(&p, 4096));
  CU_ASSERT(cuMemFree(p));
}

TEST_F(MemoryTest, AllocPitchRoundsRows) {
  CUdeviceptr p = 0;
  size_t pitch = 0;
  CU_ASSERT(cuMemAllocPitch(&p, &pitch, 1000, 3, 4));
  EXPECT_GE(pitch, 1000u);
  EXPECT_EQ(pitch % 256, 0u);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_ASSERT(cuMemGetAddressRange(&base, &size, p));
  EXPECT_GE(size, pitch * 3);
  CU_ASSERT(cuMemFree(p));
}

TEST_F(MemoryTest, PointerAttributesOfDeviceMemory) {
  CUdeviceptr p = 0;
  CU_ASSERT(cuMemAlloc(&p, 8192));
  unsigned memory_type = 0;
  CU_ASSERT(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, p + 16));
  EXPECT_EQ(memory_type, CU_MEMORYTYPE_DEVICE);
  CUcontext ctx = nullptr;
  CU_ASSERT(cuPointerGetAttribute(&ctx, CU_POINTER_ATTRIBUTE_CONTEXT, p));
  EXPECT_EQ(ctx, ctx_);
  CUdeviceptr dptr = 0;
  CU_ASSERT(cuPointerGetAttribute(&dptr, CU_POINTER_ATTRIBUTE_DEVICE_POINTER, p + 16));
  EXPECT_EQ(dptr, p + 16);
  void* host = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER, p));
  CUdeviceptr start = 0;
  size_t range = 0;
  CU_ASSERT(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, p + 100));
  CU_ASSERT(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, p + 100));
  EXPECT_EQ(start, p);
  EXPECT_EQ(range, 8192u);
  unsigned managed = 7;
  unsigned mapped = 7;
  int ordinal = -1;
  CU_ASSERT(cuPointerGetAttribute(&managed, CU_POINTER_ATTRIBUTE_IS_MANAGED, p));
  CU_ASSERT(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, p));
  CU_ASSERT(cuPointerGetAttribute(&ordinal, CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL, p));
  EXPECT_EQ(managed, 0u);
  EXPECT_EQ(mapped, 1u);
  EXPECT_EQ(ordinal, 0);

  // The same through cuPointerGetAttributes.
  CUpointer_attribute attrs[] = {CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                 CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL,
                                 CU_POINTER_ATTRIBUTE_HOST_POINTER};
  unsigned type2 = 0;
  int ordinal2 = -1;
  void* host2 = &type2;
  void* data[] = {&type2, &ordinal2, &host2};
  CU_ASSERT(cuPointerGetAttributes(3, attrs, data, p));
  EXPECT_EQ(type2, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(ordinal2, 0);
  EXPECT_EQ(host2, nullptr);  // no host pointer for device memory: the default NULL
  CU_ASSERT(cuMemFree(p));

  // Unknown (pageable) memory: an error for one attribute, defaults for several.
  int local = 0;
  const auto local_ptr = reinterpret_cast<CUdeviceptr>(&local);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, local_ptr));
  CU_ASSERT(cuPointerGetAttributes(3, attrs, data, local_ptr));
  EXPECT_EQ(type2, 0u);
  EXPECT_EQ(ordinal2, -2);
}

TEST_F(MemoryTest, PinnedHostMemory) {
  void* pinned = nullptr;
  CU_ASSERT(cuMemAllocHost(&pinned, 10000));
  static_cast<char*>(pinned)[9999] = 5;
  unsigned memory_type = 0;
  CU_ASSERT(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE,
                                  reinterpret_cast<CUdeviceptr>(pinned)));
  EXPECT_EQ(memory_type, CU_MEMORYTYPE_HOST);
  void* host = nullptr;
  CU_ASSERT(cuPointerGetAttribute(&host, CU_POINTER_ATTRIBUTE_HOST_POINTER,
                                  reinterpret_cast<CUdeviceptr>(pinned) + 8));
  EXPECT_EQ(host, static_cast<char*>(pinned) + 8);
  CUdeviceptr dptr = 0;
  CU_ASSERT(cuMemHostGetDevicePointer(&dptr, static_cast<char*>(pinned) + 8, 0));
  EXPECT_EQ(dptr, reinterpret_cast<CUdeviceptr>(pinned) + 8);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(static_cast<char*>(pinned) + 8));
  CU_ASSERT(cuMemFreeHost(pinned));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFreeHost(pinned));

  void* flagged = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemHostAlloc(&flagged, 4096, 0x80));
  CU_ASSERT(cuMemHostAlloc(&flagged, 4096, CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE));
  CU_ASSERT(cuMemFreeHost(flagged));

  // Registered pageable memory becomes pinned; unregistering makes it pageable again.
  std::vector<char> buffer(1 << 16);
  CU_ASSERT(cuMemHostRegister(buffer.data(), buffer.size(), 0));
  CU_EXPECT_ERR(CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED,
                cuMemHostRegister(buffer.data() + 100, 100, 0));
  CU_ASSERT(cuMemHostGetDevicePointer(&dptr, buffer.data() + 5, 0));
  EXPECT_EQ(dptr, reinterpret_cast<CUdeviceptr>(buffer.data() + 5));
  CU_EXPECT_ERR(CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED, cuMemHostUnregister(buffer.data() + 1));
  CU_ASSERT(cuMemHostUnregister(buffer.data()));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemHostGetDevicePointer(&dptr, buffer.data(), 0));
  CU_EXPECT_ERR(CUDA_ERROR_NOT_SUPPORTED,
                cuMemHostRegister(buffer.data(), buffer.size(), CU_MEMHOSTREGISTER_IOMEMORY));
}

TEST_F(MemoryTest, DestroyingAContextFreesItsMemory) {
  CUcontext own = nullptr;
  CU_ASSERT(cuCtxCreate(&own, nullptr, 0, 0));
  size_t free0 = 0;
  size_t total = 0;
  CU_ASSERT(cuMemGetInfo(&free0, &total));
  CUdeviceptr p = 0;
  CU_ASSERT(cuMemAlloc(&p, 3 << 20));
  CU_ASSERT(cuCtxDestroy(own));  // also pops it: the primary context is current again
  CUcontext current = nullptr;
  CU_ASSERT(cuCtxGetCurrent(&current));
  EXPECT_EQ(current, ctx_);
  size_t free1 = 0;
  CU_ASSERT(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemFree(p));
}

}  // namespace
}  // namespace fakecuda_test
