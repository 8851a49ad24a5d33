// Virtual memory management within one process.

#include <csignal>
#include <vector>

#include "test_util.h"

namespace fakecuda_test {
namespace {

class VmmTest : public ::testing::Test {
 protected:
  void SetUp() override { InitPrimary(); }
};

TEST_F(VmmTest, GranularityIsTwoMiB) {
  const CUmemAllocationProp prop = DeviceProp();
  size_t g = 0;
  CU_ASSERT(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
  EXPECT_EQ(g, kTwoMiB);
  CU_ASSERT(cuMemGetAllocationGranularity(&g, &prop, CU_MEM_ALLOC_GRANULARITY_RECOMMENDED));
  EXPECT_EQ(g, kTwoMiB);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuMemGetAllocationGranularity(&g, nullptr, CU_MEM_ALLOC_GRANULARITY_MINIMUM));
}

TEST_F(VmmTest, CreateValidatesItsArguments) {
  CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, kTwoMiB + 4096, &prop, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemCreate(&h, 0, &prop, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemCreate(nullptr, kTwoMiB, &prop, 0));
  prop.location.id = 4;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_DEVICE, cuMemCreate(&h, kTwoMiB, &prop, 0));
  prop = DeviceProp();
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_FABRIC;
  CU_EXPECT_ERR(CUDA_ERROR_NOT_SUPPORTED, cuMemCreate(&h, kTwoMiB, &prop, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemRelease(0x12345678));
}

TEST_F(VmmTest, ReserveMapAccessUnmap) {
  const CUmemAllocationProp prop = DeviceProp();
  size_t free0 = 0;
  size_t total = 0;
  CU_ASSERT(cuMemGetInfo(&free0, &total));
  CUmemGenericAllocationHandle h = 0;
  CU_ASSERT(cuMemCreate(&h, 2 * kTwoMiB, &prop, 0));
  size_t free1 = 0;
  CU_ASSERT(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free0 - free1, 2 * kTwoMiB);

  CUdeviceptr va = 0;
  CU_ASSERT(cuMemAddressReserve(&va, 8 * kTwoMiB, 4 * kTwoMiB, 0, 0));
  EXPECT_EQ(va % (4 * kTwoMiB), 0u);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + 7 * kTwoMiB, 2 * kTwoMiB, 0, h, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemMap(va, 2 * kTwoMiB, kTwoMiB, h, 0));
  CU_ASSERT(cuMemMap(va, 2 * kTwoMiB, 0, h, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemMap(va + kTwoMiB, kTwoMiB, 0, h, 0));
  // The second half of the chunk mapped a second time, elsewhere in the range.
  CU_ASSERT(cuMemMap(va + 4 * kTwoMiB, kTwoMiB, kTwoMiB, h, 0));

  const CUmemAccessDesc rw = ReadWrite();
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemSetAccess(va, kTwoMiB, &rw, 1));  // partial
  CU_ASSERT(cuMemSetAccess(va, 2 * kTwoMiB, &rw, 1));
  CU_ASSERT(cuMemSetAccess(va + 4 * kTwoMiB, kTwoMiB, &rw, 1));
  unsigned long long flags = 0;
  CUmemLocation loc{CU_MEM_LOCATION_TYPE_DEVICE, 0};
  CU_ASSERT(cuMemGetAccess(&flags, &loc, va + 100));
  EXPECT_EQ(flags, static_cast<unsigned long long>(CU_MEM_ACCESS_FLAGS_PROT_READWRITE));

  // Both mappings show the same memory.
  auto* first = reinterpret_cast<unsigned char*>(va);
  auto* alias = reinterpret_cast<unsigned char*>(va + 4 * kTwoMiB);
  first[kTwoMiB + 5] = 0x5a;
  EXPECT_EQ(alias[5], 0x5a);

  // Pointer queries know VMM memory.
  unsigned memory_type = 0;
  CUdeviceptr start = 0;
  size_t range = 0;
  unsigned mapped = 0;
  CU_ASSERT(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va + 3));
  CU_ASSERT(cuPointerGetAttribute(&start, CU_POINTER_ATTRIBUTE_RANGE_START_ADDR, va + 3));
  CU_ASSERT(cuPointerGetAttribute(&range, CU_POINTER_ATTRIBUTE_RANGE_SIZE, va + 3));
  CU_ASSERT(cuPointerGetAttribute(&mapped, CU_POINTER_ATTRIBUTE_MAPPED, va + 3));
  EXPECT_EQ(memory_type, CU_MEMORYTYPE_DEVICE);
  EXPECT_EQ(start, va);
  EXPECT_EQ(range, 8 * kTwoMiB);
  EXPECT_EQ(mapped, 1u);
  CUdeviceptr base = 0;
  size_t size = 0;
  CU_ASSERT(cuMemGetAddressRange(&base, &size, va + 4 * kTwoMiB + 9));
  EXPECT_EQ(base, va + 4 * kTwoMiB);
  EXPECT_EQ(size, kTwoMiB);

  // Retain returns the handle; properties come back.
  CUmemGenericAllocationHandle retained = 0;
  CU_ASSERT(cuMemRetainAllocationHandle(&retained, reinterpret_cast<void*>(va + 10)));
  EXPECT_EQ(retained, h);
  CU_ASSERT(cuMemRelease(retained));
  CUmemAllocationProp got{};
  CU_ASSERT(cuMemGetAllocationPropertiesFromHandle(&got, h));
  EXPECT_EQ(got.location.type, CU_MEM_LOCATION_TYPE_DEVICE);
  EXPECT_EQ(got.requestedHandleTypes, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);

  // Released while mapped: the memory stays until unmapped, the handle is gone.
  CU_ASSERT(cuMemRelease(h));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemRelease(h));
  EXPECT_EQ(first[kTwoMiB + 5], 0x5a);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemUnmap(va, kTwoMiB));  // part of a mapping
  CU_ASSERT(cuMemUnmap(va, 2 * kTwoMiB));
  size_t free2 = 0;
  CU_ASSERT(cuMemGetInfo(&free2, &total));
  EXPECT_EQ(free2, free1);  // still mapped at va + 4 * 2 MiB
  CU_ASSERT(cuMemUnmap(va + 4 * kTwoMiB, kTwoMiB));
  CU_ASSERT(cuMemGetInfo(&free2, &total));
  EXPECT_EQ(free2, free0);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemAddressFree(va, kTwoMiB));
  CU_ASSERT(cuMemAddressFree(va, 8 * kTwoMiB));
}

TEST_F(VmmTest, ReserveHonoursAFreeFixedAddressHint) {
  CUdeviceptr first = 0;
  CU_ASSERT(cuMemAddressReserve(&first, 4 * kTwoMiB, 0, 0, 0));
  CU_ASSERT(cuMemAddressFree(first, 4 * kTwoMiB));
  CUdeviceptr again = 0;
  CU_ASSERT(cuMemAddressReserve(&again, 4 * kTwoMiB, 0, first, 0));
  EXPECT_EQ(again, first);
  // The hint is taken now: another reservation asking for it lands elsewhere.
  CUdeviceptr other = 0;
  CU_ASSERT(cuMemAddressReserve(&other, 4 * kTwoMiB, 0, first, 0));
  EXPECT_NE(other, first);
  CU_ASSERT(cuMemAddressFree(again, 4 * kTwoMiB));
  CU_ASSERT(cuMemAddressFree(other, 4 * kTwoMiB));
}

TEST_F(VmmTest, AccessBeforeSetAccessFaults) {
  const CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  CU_ASSERT(cuMemCreate(&h, kTwoMiB, &prop, 0));
  CUdeviceptr va = 0;
  CU_ASSERT(cuMemAddressReserve(&va, kTwoMiB, 0, 0, 0));
  CU_ASSERT(cuMemMap(va, kTwoMiB, 0, h, 0));
  // Copies refuse memory without access instead of faulting.
  char byte = 1;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(va, &byte, 1));
  const int status = RunInChild([va] {
    volatile char* p = reinterpret_cast<volatile char*>(va);
    return static_cast<int>(*p);  // must not get here
  });
  EXPECT_TRUE(WIFSIGNALED(status) && WTERMSIG(status) == SIGSEGV) << status;
  const CUmemAccessDesc rw = ReadWrite();
  CU_ASSERT(cuMemSetAccess(va, kTwoMiB, &rw, 1));
  CU_ASSERT(cuMemcpyHtoD(va, &byte, 1));
  CU_ASSERT(cuMemUnmap(va, kTwoMiB));
  CU_ASSERT(cuMemRelease(h));
  CU_ASSERT(cuMemAddressFree(va, kTwoMiB));
}

TEST_F(VmmTest, CopiesSpanBackToBackMappings) {
  const CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h[2] = {};
  CUdeviceptr va = 0;
  CU_ASSERT(cuMemAddressReserve(&va, 2 * kTwoMiB, 0, 0, 0));
  for (int i = 0; i < 2; ++i) {
    CU_ASSERT(cuMemCreate(&h[i], kTwoMiB, &prop, 0));
    CU_ASSERT(cuMemMap(va + i * kTwoMiB, kTwoMiB, 0, h[i], 0));
  }
  const CUmemAccessDesc rw = ReadWrite();
  CU_ASSERT(cuMemSetAccess(va, 2 * kTwoMiB, &rw, 1));
  std::vector<unsigned char> in(kTwoMiB), out(kTwoMiB);
  for (size_t i = 0; i < in.size(); ++i) in[i] = static_cast<unsigned char>(i * 7);
  const CUdeviceptr straddle = va + kTwoMiB / 2;
  CU_ASSERT(cuMemcpyHtoD(straddle, in.data(), in.size()));
  CU_ASSERT(cuMemcpyDtoH(out.data(), straddle, out.size()));
  EXPECT_EQ(in, out);
  // The physical address follows the chunk under each half.
  unsigned long long phys0 = 0;
  unsigned long long phys1 = 0;
  unsigned long long byte_phys = 0;
  ASSERT_EQ(CUDA_SUCCESS, fakecudaChunkPhysAddr(h[0], &phys0));
  ASSERT_EQ(CUDA_SUCCESS, fakecudaChunkPhysAddr(h[1], &phys1));
  ASSERT_EQ(CUDA_SUCCESS, fakecudaPointerPhysAddr(va + 12345, &byte_phys));
  EXPECT_EQ(byte_phys, phys0 + 12345);
  ASSERT_EQ(CUDA_SUCCESS, fakecudaPointerPhysAddr(va + kTwoMiB + 7, &byte_phys));
  EXPECT_EQ(byte_phys, phys1 + 7);
  EXPECT_NE(phys0, phys1);
  EXPECT_EQ(phys0 % kTwoMiB, 0u);
  CU_ASSERT(cuMemUnmap(va, 2 * kTwoMiB));
  for (auto handle : h) CU_ASSERT(cuMemRelease(handle));
  CU_ASSERT(cuMemAddressFree(va, 2 * kTwoMiB));
}

TEST_F(VmmTest, HostLocatedChunksArePinnedHostMemoryNotDeviceMemory) {
  CUmemAllocationProp prop = DeviceProp();
  prop.location.type = CU_MEM_LOCATION_TYPE_HOST;
  prop.location.id = 0;
  size_t free0 = 0;
  size_t total = 0;
  CU_ASSERT(cuMemGetInfo(&free0, &total));
  CUmemGenericAllocationHandle h = 0;
  CU_ASSERT(cuMemCreate(&h, kTwoMiB, &prop, 0));
  size_t free1 = 0;
  CU_ASSERT(cuMemGetInfo(&free1, &total));
  EXPECT_EQ(free1, free0);
  unsigned long long phys = 0;
  EXPECT_EQ(CUDA_ERROR_INVALID_VALUE, fakecudaChunkPhysAddr(h, &phys));
  CUdeviceptr va = 0;
  CU_ASSERT(cuMemAddressReserve(&va, kTwoMiB, 0, 0, 0));
  CU_ASSERT(cuMemMap(va, kTwoMiB, 0, h, 0));
  const CUmemAccessDesc rw = ReadWrite();
  CU_ASSERT(cuMemSetAccess(va, kTwoMiB, &rw, 1));
  unsigned memory_type = 0;
  CU_ASSERT(cuPointerGetAttribute(&memory_type, CU_POINTER_ATTRIBUTE_MEMORY_TYPE, va));
  EXPECT_EQ(memory_type, CU_MEMORYTYPE_HOST);
  CU_ASSERT(cuMemUnmap(va, kTwoMiB));
  CU_ASSERT(cuMemRelease(h));
  CU_ASSERT(cuMemAddressFree(va, kTwoMiB));
}

}  // namespace
}  // namespace fakecuda_test
