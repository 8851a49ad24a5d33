// VMM chunks shared across processes: export -> SCM_RIGHTS -> import -> map.

#include <sys/socket.h>

#include "test_util.h"

namespace fakecuda_test {
namespace {

constexpr unsigned char Pattern(size_t i) {
  return static_cast<unsigned char>((i * 31 + 7) & 0xff);
}

// Imports the chunk behind `fd`, maps it read-write at a new reservation and returns the address.
CUdeviceptr ImportAndMap(int fd, size_t size, CUmemGenericAllocationHandle* handle) {
  if (cuMemImportFromShareableHandle(handle, reinterpret_cast<void*>(static_cast<intptr_t>(fd)),
                                     CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS) {
    return 0;
  }
  CUdeviceptr va = 0;
  const CUmemAccessDesc rw = ReadWrite();
  if (cuMemAddressReserve(&va, size, 0, 0, 0) != CUDA_SUCCESS ||
      cuMemMap(va, size, 0, *handle, 0) != CUDA_SUCCESS ||
      cuMemSetAccess(va, size, &rw, 1) != CUDA_SUCCESS) {
    return 0;
  }
  return va;
}

TEST(SharingTest, ChildWritesWhatTheParentExported) {
  InitPrimary();
  int sv[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
  const size_t size = 2 * kTwoMiB;

  const pid_t child = ForkChild([&] {
    close(sv[0]);
    InitPrimary();
    uint64_t parent_phys = 0;
    const int fd = RecvFd(sv[1], &parent_phys);
    if (fd < 0) return 1;
    CUmemGenericAllocationHandle h = 0;
    const CUdeviceptr va = ImportAndMap(fd, size, &h);
    close(fd);  // the import keeps its own reference
    if (va == 0) return 2;
    unsigned long long phys = 0;
    if (fakecudaChunkPhysAddr(h, &phys) != CUDA_SUCCESS || phys != parent_phys) return 3;
    auto* bytes = reinterpret_cast<unsigned char*>(va);
    for (size_t i = 0; i < size; ++i) bytes[i] = Pattern(i);
    // Importing the same chunk again gives a new handle but is charged once.
    size_t free0 = 0;
    size_t free1 = 0;
    size_t total = 0;
    if (cuMemGetInfo(&free0, &total) != CUDA_SUCCESS) return 4;
    const int again = RecvFd(sv[1]);
    CUmemGenericAllocationHandle h2 = 0;
    if (cuMemImportFromShareableHandle(&h2, reinterpret_cast<void*>(static_cast<intptr_t>(again)),
                                       CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) != CUDA_SUCCESS ||
        h2 == h || cuMemGetInfo(&free1, &total) != CUDA_SUCCESS || free1 != free0) {
      return 5;
    }
    WriteU64(sv[1], 1);  // done writing
    return 0;
  });
  close(sv[1]);
  const CUmemAllocationProp prop = DeviceProp();
  CUmemGenericAllocationHandle h = 0;
  CU_ASSERT(cuMemCreate(&h, size, &prop, 0));
  unsigned long long phys = 0;
  ASSERT_EQ(CUDA_SUCCESS, fakecudaChunkPhysAddr(h, &phys));
  int fd = -1;
  CU_ASSERT(cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  ASSERT_GE(fd, 0);
  ASSERT_TRUE(SendFd(sv[0], fd, phys));
  ASSERT_TRUE(SendFd(sv[0], fd, 0));
  close(fd);  // the caller owns exported fds
  EXPECT_EQ(ReadU64(sv[0]), 1u);
  close(sv[0]);
  const int status = WaitChild(child);
  ASSERT_TRUE(ExitedOk(status)) << status;

  // The child is gone; the chunk is still ours and holds what it wrote.
  CUdeviceptr va = 0;
  CU_ASSERT(cuMemAddressReserve(&va, size, 0, 0, 0));
  CU_ASSERT(cuMemMap(va, size, 0, h, 0));
  const CUmemAccessDesc rw = ReadWrite();
  CU_ASSERT(cuMemSetAccess(va, size, &rw, 1));
  std::vector<unsigned char> out(size);
  CU_ASSERT(cuMemcpyDtoH(out.data(), va, size));
  size_t mismatches = 0;
  for (size_t i = 0; i < size; ++i) mismatches += out[i] != Pattern(i);
  EXPECT_EQ(mismatches, 0u);
  CU_ASSERT(cuMemUnmap(va, size));
  CU_ASSERT(cuMemRelease(h));
  CU_ASSERT(cuMemAddressFree(va, size));
}

TEST(SharingTest, RunsConcurrentlyAndSurvivesTheExporterReleasing) {
  // The child creates, exports and releases; the parent imports after the child's release and
  // still sees the data (the fd in flight keeps the memfd alive), with the same phys address.
  InitPrimary();
  int sv[2];
  ASSERT_EQ(0, socketpair(AF_UNIX, SOCK_STREAM, 0, sv));
  const int status = RunInChild([&] {
    close(sv[0]);
    InitPrimary();
    const CUmemAllocationProp prop = DeviceProp();
    CUmemGenericAllocationHandle h = 0;
    CUdeviceptr va = 0;
    const CUmemAccessDesc rw = ReadWrite();
    if (cuMemCreate(&h, kTwoMiB, &prop, 0) != CUDA_SUCCESS ||
        cuMemAddressReserve(&va, kTwoMiB, 0, 0, 0) != CUDA_SUCCESS ||
        cuMemMap(va, kTwoMiB, 0, h, 0) != CUDA_SUCCESS ||
        cuMemSetAccess(va, kTwoMiB, &rw, 1) != CUDA_SUCCESS) {
      return 1;
    }
    CU_EXPECT(cuMemsetD32(va, 0xabcd1234u, kTwoMiB / 4));
    unsigned long long phys = 0;
    int fd = -1;
    if (fakecudaChunkPhysAddr(h, &phys) != CUDA_SUCCESS ||
        cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0) !=
            CUDA_SUCCESS ||
        !SendFd(sv[1], fd, phys)) {
      return 2;
    }
    close(fd);
    CU_EXPECT(cuMemUnmap(va, kTwoMiB));
    CU_EXPECT(cuMemRelease(h));
    return 0;
  });
  close(sv[1]);
  ASSERT_TRUE(ExitedOk(status)) << status;
  uint64_t child_phys = 0;
  const int fd = RecvFd(sv[0], &child_phys);
  close(sv[0]);
  ASSERT_GE(fd, 0);
  CUmemGenericAllocationHandle h = 0;
  const CUdeviceptr va = ImportAndMap(fd, kTwoMiB, &h);
  close(fd);
  ASSERT_NE(va, 0u);
  unsigned long long phys = 0;
  ASSERT_EQ(CUDA_SUCCESS, fakecudaChunkPhysAddr(h, &phys));
  EXPECT_EQ(phys, child_phys);
  uint32_t word = 0;
  CU_ASSERT(cuMemcpyDtoH(&word, va + kTwoMiB - 4, 4));
  EXPECT_EQ(word, 0xabcd1234u);
  CU_ASSERT(cuMemUnmap(va, kTwoMiB));
  CU_ASSERT(cuMemRelease(h));
  CU_ASSERT(cuMemAddressFree(va, kTwoMiB));
}

TEST(SharingTest, ImportRejectsWhatIsNotAChunk) {
  InitPrimary();
  int pipe_fds[2];
  ASSERT_EQ(0, pipe(pipe_fds));
  CUmemGenericAllocationHandle h = 0;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuMemImportFromShareableHandle(
                    &h, reinterpret_cast<void*>(static_cast<intptr_t>(pipe_fds[0])),
                    CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(intptr_t{-1}),
                                               CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR));
  close(pipe_fds[0]);
  close(pipe_fds[1]);
  // A chunk created without the POSIX fd handle type cannot be exported.
  const CUmemAllocationProp prop = DeviceProp(0, /*exportable=*/false);
  CU_ASSERT(cuMemCreate(&h, kTwoMiB, &prop, 0));
  int fd = -1;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuMemExportToShareableHandle(&fd, h, CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0));
  CU_ASSERT(cuMemRelease(h));
}

}  // namespace
}  // namespace fakecuda_test
