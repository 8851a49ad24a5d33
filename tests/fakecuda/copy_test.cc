// Copies and memsets: data, validation, which link they use, and when they return.

#include <numeric>
#include <vector>

#include "test_util.h"

namespace fakecuda_test {
namespace {

class CopyTest : public ::testing::Test {
 protected:
  void SetUp() override { ctx_ = InitPrimary(); }
  CUcontext ctx_ = nullptr;
};

std::vector<unsigned char> Bytes(size_t n, int seed) {
  std::vector<unsigned char> v(n);
  for (size_t i = 0; i < n; ++i) v[i] = static_cast<unsigned char>(i * 13 + seed);
  return v;
}

TEST_F(CopyTest, RoundTripsThroughDeviceMemory) {
  const size_t n = 3 << 20;
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  CU_ASSERT(cuMemAlloc(&a, n));
  CU_ASSERT(cuMemAlloc(&b, n));
  const std::vector<unsigned char> in = Bytes(n, 1);
  std::vector<unsigned char> out(n);
  CU_ASSERT(cuMemcpyHtoD(a, in.data(), n));
  CU_ASSERT(cuMemcpyDtoD(b, a, n));
  CU_ASSERT(cuMemcpyDtoH(out.data(), b, n));
  EXPECT_EQ(in, out);
  // Unified cuMemcpy classifies each pointer; the _ptds forms use the per-thread stream.
  std::vector<unsigned char> out2(n);
  CU_ASSERT(cuMemcpy(reinterpret_cast<CUdeviceptr>(out2.data()), a, n));
  EXPECT_EQ(in, out2);
  CU_ASSERT(cuMemcpy_ptds(b, reinterpret_cast<CUdeviceptr>(Bytes(n, 2).data()), 16));
  CU_ASSERT(cuMemcpyDtoH_v2_ptds(out.data(), b, 16));
  EXPECT_EQ(out[15], Bytes(16, 2)[15]);

  // Async forms on a stream.
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  void* pinned = nullptr;
  CU_ASSERT(cuMemAllocHost(&pinned, n));
  CU_ASSERT(cuMemcpyHtoDAsync(a, in.data(), n, s));
  CU_ASSERT(cuMemcpyDtoDAsync(b, a, n, s));
  CU_ASSERT(cuMemcpyDtoHAsync(pinned, b, n, s));
  CU_ASSERT(cuMemcpyAsync(a, b, 1, s));
  CU_ASSERT(cuStreamSynchronize(s));
  EXPECT_EQ(0, std::memcmp(pinned, in.data(), n));

  // Peer copies name both contexts.
  CU_ASSERT(cuMemcpyPeer(b, ctx_, a, ctx_, 100));
  CU_ASSERT(cuMemcpyPeerAsync(b, ctx_, a, ctx_, 100, s));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_CONTEXT, cuMemcpyPeer(b, nullptr, a, ctx_, 100));
  CU_ASSERT(cuStreamSynchronize(s));

  CU_ASSERT(cuStreamDestroy(s));
  CU_ASSERT(cuMemFreeHost(pinned));
  CU_ASSERT(cuMemFree(a));
  CU_ASSERT(cuMemFree(b));
}

TEST_F(CopyTest, RejectsDevicePointersItDoesNotKnow) {
  CUdeviceptr d = 0;
  CU_ASSERT(cuMemAlloc(&d, 4096));
  std::vector<unsigned char> host(8192);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuMemcpyHtoD(reinterpret_cast<CUdeviceptr>(host.data()), host.data(), 16));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoD(d, host.data(), 8192));  // overruns
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpyDtoH(host.data(), 0, 16));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemsetD32(d + 2, 0, 4));  // misaligned
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemsetD8(0xdead0000, 0, 4));
  CU_EXPECT(cuMemcpyHtoD(d, host.data(), 0));  // empty copies are fine
  CUDA_MEMCPY2D arr{};
  arr.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  arr.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  arr.dstDevice = d;
  arr.WidthInBytes = 4;
  arr.Height = 1;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&arr));  // no such array
  CU_ASSERT(cuMemFree(d));
}

TEST_F(CopyTest, ArraysHoldRowsAndCopyToAndFromHostMemory) {
  // A 2D array of 10 x 6 float2 elements: rows of 80 bytes.
  CUDA_ARRAY_DESCRIPTOR desc{};
  desc.Width = 10;
  desc.Height = 6;
  desc.Format = CU_AD_FORMAT_FLOAT;
  desc.NumChannels = 2;
  CUarray a = nullptr;
  CU_ASSERT(cuArrayCreate(&a, &desc));
  std::vector<unsigned char> host = Bytes(480, 3);
  std::vector<unsigned char> back(480, 0);
  CU_ASSERT(cuMemcpyHtoA(a, 0, host.data(), 480));
  CU_ASSERT(cuMemcpyAtoH(back.data(), a, 0, 480));
  EXPECT_EQ(back, host);
  // A 2D window: 3 elements of rows 2..4 out to a host image with a 40-byte pitch.
  std::vector<unsigned char> window(40 * 3, 0);
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_ARRAY;
  c.srcArray = a;
  c.srcXInBytes = 16;
  c.srcY = 2;
  c.dstMemoryType = CU_MEMORYTYPE_HOST;
  c.dstHost = window.data();
  c.dstPitch = 40;
  c.WidthInBytes = 24;
  c.Height = 3;
  CU_ASSERT(cuMemcpy2D(&c));
  for (int y = 0; y < 3; ++y) {
    for (int x = 0; x < 24; ++x) EXPECT_EQ(window[y * 40 + x], host[(y + 2) * 80 + 16 + x]);
  }
  CU_ASSERT(cuMemcpyHtoAAsync(a, 8, host.data(), 16, nullptr));
  CU_ASSERT(cuStreamSynchronize(nullptr));
  // Out of range, misaligned, unknown.
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoA(a, 400, host.data(), 81));
  c.srcXInBytes = 3;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
  c.srcXInBytes = 64;  // 64 + 24 > 80
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));
  desc.NumChannels = 3;
  CUarray bad = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuArrayCreate(&bad, &desc));
  CU_ASSERT(cuArrayDestroy(a));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpyHtoA(a, 0, host.data(), 16));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuArrayDestroy(a));
}

TEST_F(CopyTest, TwoAndThreeDimensionalCopies) {
  // A 5 x 4 window at (3, 2) of a 32-byte-pitch host image into a 512-pitch device image.
  std::vector<unsigned char> image = Bytes(32 * 8, 5);
  CUdeviceptr dev = 0;
  size_t pitch = 0;
  CU_ASSERT(cuMemAllocPitch(&dev, &pitch, 64, 8, 4));
  CUDA_MEMCPY2D c{};
  c.srcMemoryType = CU_MEMORYTYPE_HOST;
  c.srcHost = image.data();
  c.srcPitch = 32;
  c.srcXInBytes = 3;
  c.srcY = 2;
  c.dstMemoryType = CU_MEMORYTYPE_DEVICE;
  c.dstDevice = dev;
  c.dstPitch = pitch;
  c.WidthInBytes = 5;
  c.Height = 4;
  CU_ASSERT(cuMemcpy2D(&c));
  const auto* d = reinterpret_cast<const unsigned char*>(dev);
  for (int y = 0; y < 4; ++y) {
    for (int x = 0; x < 5; ++x) EXPECT_EQ(d[y * pitch + x], image[(y + 2) * 32 + x + 3]);
  }
  CU_ASSERT(cuMemcpy2DUnaligned(&c));
  CU_ASSERT(cuMemcpy2DAsync(&c, nullptr));
  CU_ASSERT(cuStreamSynchronize(nullptr));
  c.srcPitch = 2;  // narrower than the width
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuMemcpy2D(&c));

  // 3D: two planes of 2 x 3 between packed host volumes via device memory.
  std::vector<unsigned char> vol = Bytes(2 * 3 * 4, 9);
  std::vector<unsigned char> back(vol.size());
  CUDA_MEMCPY3D up{};
  up.srcMemoryType = CU_MEMORYTYPE_HOST;
  up.srcHost = vol.data();
  up.srcPitch = 4;
  up.srcHeight = 3;
  up.dstMemoryType = CU_MEMORYTYPE_UNIFIED;
  up.dstDevice = dev;
  up.dstPitch = pitch;
  up.dstHeight = 3;
  up.WidthInBytes = 4;
  up.Height = 3;
  up.Depth = 2;
  CU_ASSERT(cuMemcpy3D(&up));
  CUDA_MEMCPY3D down{};
  down.srcMemoryType = CU_MEMORYTYPE_DEVICE;
  down.srcDevice = dev;
  down.srcPitch = pitch;
  down.srcHeight = 3;
  down.dstMemoryType = CU_MEMORYTYPE_HOST;
  down.dstHost = back.data();
  down.dstPitch = 4;
  down.dstHeight = 3;
  down.WidthInBytes = 4;
  down.Height = 3;
  down.Depth = 2;
  CU_ASSERT(cuMemcpy3DAsync(&down, nullptr));
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(vol, back);
  CU_ASSERT(cuMemFree(dev));
}

TEST_F(CopyTest, Memsets) {
  CUdeviceptr d = 0;
  CU_ASSERT(cuMemAlloc(&d, 4096));
  const auto* b = reinterpret_cast<const unsigned char*>(d);
  const auto* h = reinterpret_cast<const uint16_t*>(d);
  const auto* w = reinterpret_cast<const uint32_t*>(d);
  CU_ASSERT(cuMemsetD8(d, 0xab, 4096));
  EXPECT_EQ(b[4095], 0xab);
  CU_ASSERT(cuMemsetD16(d, 0x1234, 10));
  EXPECT_EQ(h[9], 0x1234);
  EXPECT_EQ(b[20], 0xab);
  CU_ASSERT(cuMemsetD32(d, 0xdeadbeef, 3));
  EXPECT_EQ(w[2], 0xdeadbeefu);
  CU_ASSERT(cuMemsetD2D8(d, 64, 0x11, 3, 4));
  EXPECT_EQ(b[3 * 64 + 2], 0x11);
  EXPECT_EQ(b[3 * 64 + 3], 0xab);
  CU_ASSERT(cuMemsetD2D16(d, 64, 0x2222, 2, 2));
  CU_ASSERT(cuMemsetD2D32(d, 64, 0x33333333, 2, 2));
  EXPECT_EQ(w[16 + 1], 0x33333333u);
  CU_ASSERT(cuMemsetD8Async(d, 1, 8, nullptr));
  CU_ASSERT(cuMemsetD16Async(d, 1, 8, nullptr));
  CU_ASSERT(cuMemsetD2D32Async(d, 64, 5, 1, 1, nullptr));
  // The legacy default stream does not order against the per-thread one here: wait first.
  CU_ASSERT(cuStreamSynchronize(nullptr));
  EXPECT_EQ(w[0], 5u);
  CU_ASSERT(cuMemsetD32Async_ptsz(d, 7, 8, nullptr));
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(w[1], 7u);
  CU_ASSERT(cuMemsetD8_v2_ptds(d, 0, 4096));
  EXPECT_EQ(b[100], 0);
  CU_ASSERT(cuMemFree(d));
}

TEST_F(CopyTest, HostDeviceCopiesUseTheLinkDeviceCopiesDoNot) {
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  CU_ASSERT(cuMemAlloc(&a, 1 << 20));
  CU_ASSERT(cuMemAlloc(&b, 1 << 20));
  std::vector<unsigned char> host(1 << 20);
  CU_ASSERT(cuMemcpyDtoD(b, a, 1 << 20));
  const uint64_t h2d0 = fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D);
  const uint64_t d2h0 = fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_D2H);
  CU_ASSERT(cuMemcpyDtoD(b, a, 1 << 20));
  CU_ASSERT(cuMemcpy(b, a, 1 << 20));
  EXPECT_EQ(fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D), h2d0);
  EXPECT_EQ(fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_D2H), d2h0);
  const uint64_t before = NowNs();
  CU_ASSERT(cuMemcpy(a, reinterpret_cast<CUdeviceptr>(host.data()), 1 << 20));  // H2D
  const uint64_t h2d1 = fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D);
  EXPECT_GT(h2d1, before);
  EXPECT_LE(h2d1, NowNs());  // a synchronous copy returns after its interval
  EXPECT_EQ(fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_D2H), d2h0);
  CU_ASSERT(cuMemcpyDtoH(host.data(), a, 1 << 20));
  EXPECT_GT(fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_D2H), before);
  EXPECT_EQ(fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D), h2d1);
  EXPECT_EQ(fakecudaLinkBusyUntilNs(5, FAKECUDA_LINK_H2D), 0u);
  // Host to host through cuMemcpy is a plain copy.
  std::vector<unsigned char> other(1 << 20, 9);
  const uint64_t h2d2 = fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D);
  const uint64_t d2h2 = fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_D2H);
  CU_ASSERT(cuMemcpy(reinterpret_cast<CUdeviceptr>(host.data()),
                     reinterpret_cast<CUdeviceptr>(other.data()), other.size()));
  EXPECT_EQ(host, other);
  EXPECT_EQ(fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_H2D), h2d2);
  EXPECT_EQ(fakecudaLinkBusyUntilNs(0, FAKECUDA_LINK_D2H), d2h2);
  CU_ASSERT(cuMemFree(a));
  CU_ASSERT(cuMemFree(b));
}

TEST(CopyTimingTest, AsyncFromPinnedReturnsAtOnceFromPageableWhenDone) {
  const ShmGuard shm(UniqueShmName("async"));
  const int status = RunInChild([&] {
    setenv("FAKECUDA_SHM", shm.name.c_str(), 1);
    setenv("FAKECUDA_PCIE_BYTES_PER_US", "100", 1);  // 64 MiB take 671 ms
    InitPrimary();
    const size_t n = 64 << 20;
    const double expected_ms = n / 100.0 / 1000.0;
    CUdeviceptr d = 0;
    void* pinned = nullptr;
    CU_EXPECT(cuMemAlloc(&d, n));
    CU_EXPECT(cuMemAllocHost(&pinned, n));
    CUstream s = nullptr;
    CU_EXPECT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
    double t0 = NowMs();
    CU_EXPECT(cuMemcpyHtoDAsync(d, pinned, n, s));
    const double issue_ms = NowMs() - t0;
    EXPECT_LT(issue_ms, expected_ms / 4);
    EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
    CU_EXPECT(cuStreamSynchronize(s));
    EXPECT_GE(NowMs() - t0, expected_ms * 0.95);
    // Pageable memory: the "async" call returns only when the copy is done.
    std::vector<unsigned char> pageable(n / 8);
    t0 = NowMs();
    CU_EXPECT(cuMemcpyDtoHAsync(pageable.data(), d, pageable.size(), s));
    EXPECT_GE(NowMs() - t0, expected_ms / 8 * 0.95);
    CU_EXPECT(cuStreamQuery(s));
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
}

}  // namespace
}  // namespace fakecuda_test
