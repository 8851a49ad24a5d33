// The simulated PCIe link: FIFO per device and direction, shared by processes.
// Assertions are about order and relative delay, with wide margins (CI machines are busy).

#include <sys/socket.h>

#include "test_util.h"

namespace fakecuda_test {
namespace {

TEST(PcieLinkTest, ABigCopyFromAnotherProcessDelaysASmallOneFifo) {
  const ShmGuard shm(UniqueShmName("link"));
  int ready[2];
  ASSERT_EQ(0, pipe(ready));
  const size_t big = 256 << 20;  // 268 ms on the link
  const pid_t child = ForkChild([&] {
    setenv("FAKECUDA_SHM", shm.name.c_str(), 1);
    setenv("FAKECUDA_PCIE_BYTES_PER_US", "1000", 1);  // 1 GB/s
    InitPrimary();
    CUdeviceptr d = 0;
    void* src = nullptr;
    if (cuMemAlloc(&d, big) != CUDA_SUCCESS || cuMemAllocHost(&src, big) != CUDA_SUCCESS) {
      return 1;
    }
    WriteU64(ready[1], 1);
    return cuMemcpyHtoD(d, src, big) == CUDA_SUCCESS ? 0 : 2;
  });
  // The other side runs in a child too, so both processes start with this configuration.
  const int status = RunInChild([&] {
    setenv("FAKECUDA_SHM", shm.name.c_str(), 1);
    setenv("FAKECUDA_PCIE_BYTES_PER_US", "1000", 1);
    InitPrimary();
    CUdeviceptr d = 0;
    std::vector<unsigned char> host(1 << 20);
    CU_EXPECT(cuMemAlloc(&d, host.size()));
    ReadU64(ready[0]);
    // Wait until the big copy holds the H2D link.
    uint64_t busy = 0;
    for (int i = 0; i < 2000; ++i) {
      busy = fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D);
      if (busy > NowNs() + 100'000'000) break;
      usleep(1000);
    }
    const uint64_t start = NowNs();
    EXPECT_GT(busy, start + 100'000'000) << "the big copy never reserved the link";

    // The other direction is independent: a D2H copy does not wait.
    CU_EXPECT(cuMemcpyDtoH(host.data(), d, host.size()));
    const uint64_t d2h_done = NowNs();
    EXPECT_LT(d2h_done, busy) << "D2H waited for the H2D queue";

    // The same direction is first-in first-out: the 1 MiB copy (1 ms alone) ends after the
    // 256 MiB one that was queued before it.
    CU_EXPECT(cuMemcpyHtoD(d, host.data(), host.size()));
    const uint64_t h2d_done = NowNs();
    EXPECT_GE(h2d_done, busy);
    const double waited_ms = (h2d_done - d2h_done) / 1e6;
    const uint64_t alone_start = NowNs();
    CU_EXPECT(cuMemcpyHtoD(d, host.data(), host.size()));
    const double alone_ms = (NowNs() - alone_start) / 1e6;
    EXPECT_GT(waited_ms, 5 * alone_ms) << waited_ms << " ms vs " << alone_ms << " ms alone";
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
  EXPECT_TRUE(ExitedOk(WaitChild(child)));
  close(ready[0]);
  close(ready[1]);
}

TEST(PcieLinkTest, StreamsOfOneProcessShareTheQueueInIssueOrder) {
  const ShmGuard shm(UniqueShmName("streams"));
  const int status = RunInChild([&] {
    setenv("FAKECUDA_SHM", shm.name.c_str(), 1);
    setenv("FAKECUDA_PCIE_BYTES_PER_US", "100", 1);
    InitPrimary();
    const size_t big = 16 << 20;  // 168 ms on the link, a few ms of memcpy
    const size_t small = 64 << 10;
    CUdeviceptr d = 0;
    void* src = nullptr;
    CU_EXPECT(cuMemAlloc(&d, big));
    CU_EXPECT(cuMemAllocHost(&src, big));
    CU_EXPECT(cuMemsetD8(d, 0, big));  // fault the pages in now, not during the copy
    CUstream a = nullptr;
    CUstream b = nullptr;
    CU_EXPECT(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
    CU_EXPECT(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
    CU_EXPECT(cuMemcpyHtoDAsync(d, src, big, a));
    // Let stream a's worker reserve its interval first.
    uint64_t big_end = 0;
    for (int i = 0; i < 2000; ++i) {
      big_end = fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D);
      if (big_end > NowNs() + 20'000'000) break;
      usleep(500);
    }
    const uint64_t issued = NowNs();
    CU_EXPECT(cuMemcpyHtoDAsync(d, src, small, b));
    CU_EXPECT(cuStreamSynchronize(b));
    const uint64_t small_done = NowNs();
    // The small copy (0.7 ms alone) could only start when the big one's interval ended.
    EXPECT_GE(small_done, big_end) << "the small copy overtook the big one queued ahead of it";
    EXPECT_GT(small_done - issued, 10 * 655'000ull);
    CU_EXPECT(cuCtxSynchronize());
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
}

}  // namespace
}  // namespace fakecuda_test
