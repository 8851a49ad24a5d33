// Entry points: copies and memsets, each with its _ptds (synchronous) or _ptsz (asynchronous)
// per-thread-default-stream variant.

#include "entry_points.h"
#include "fake_state.h"

namespace fakecuda {
namespace {

constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

Issue Sync(DefaultStream mode) { return Issue{nullptr, mode, false}; }
Issue Async(CUstream stream, DefaultStream mode) { return Issue{stream, mode, true}; }

uintptr_t Addr(const void* p) { return reinterpret_cast<uintptr_t>(p); }

CUresult Linear(uintptr_t dst, bool dst_device, uintptr_t src, bool src_device, size_t bytes,
                Issue issue) {
  return State().copies().Copy(dst, dst_device, src, src_device, bytes, issue);
}

CUresult Peer(CUdeviceptr dst, CUcontext dst_ctx, CUdeviceptr src, CUcontext src_ctx, size_t bytes,
              Issue issue) {
  Context* ctx = nullptr;
  if (dst_ctx == nullptr || src_ctx == nullptr) return CUDA_ERROR_INVALID_CONTEXT;
  if (CUresult r = State().contexts().Resolve(dst_ctx, &ctx); r != CUDA_SUCCESS) return r;
  if (CUresult r = State().contexts().Resolve(src_ctx, &ctx); r != CUDA_SUCCESS) return r;
  return Linear(dst, true, src, true, bytes, issue);
}

CUresult Copy2D(const CUDA_MEMCPY2D* copy, Issue issue) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return State().copies().Copy3D(CopyEngine::From2D(*copy), issue);
}

CUresult Copy3D(const CUDA_MEMCPY3D* copy, Issue issue) {
  if (copy == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (copy->reserved0 != nullptr || copy->reserved1 != nullptr) return CUDA_ERROR_INVALID_VALUE;
  return State().copies().Copy3D(*copy, issue);
}

// A linear copy between host memory and an array.
CUresult ArrayCopy(CUarray array, size_t offset, const void* host, size_t bytes, bool to_array,
                   Issue issue) {
  return State().copies().CopyArray(array, offset, Addr(host), bytes, to_array, issue);
}

CUresult Set(CUdeviceptr dst, size_t pitch, uint32_t value, unsigned element_size, size_t width,
             size_t height, Issue issue) {
  return State().copies().Memset(dst, pitch, value, element_size, width, height, issue);
}

}  // namespace
}  // namespace fakecuda

using fakecuda::Addr;
using fakecuda::ArrayCopy;
using fakecuda::Async;
using fakecuda::kLegacy;
using fakecuda::kPerThread;
using fakecuda::Sync;

extern "C" {

// Unified-address copies: each pointer is classified by address.
CUresult cuMemcpy(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpy);
  return fakecuda::Linear(dst, false, src, false, ByteCount, Sync(kLegacy));
}

CUresult cuMemcpy_ptds(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpy_ptds);
  return fakecuda::Linear(dst, false, src, false, ByteCount, Sync(kPerThread));
}

CUresult cuMemcpyAsync(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyAsync);
  return fakecuda::Linear(dst, false, src, false, ByteCount, Async(hStream, kLegacy));
}

CUresult cuMemcpyAsync_ptsz(CUdeviceptr dst, CUdeviceptr src, size_t ByteCount, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyAsync_ptsz);
  return fakecuda::Linear(dst, false, src, false, ByteCount, Async(hStream, kPerThread));
}

CUresult cuMemcpyHtoD_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyHtoD_v2);
  return fakecuda::Linear(dstDevice, true, Addr(srcHost), false, ByteCount, Sync(kLegacy));
}

CUresult cuMemcpyHtoD_v2_ptds(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyHtoD_v2_ptds);
  return fakecuda::Linear(dstDevice, true, Addr(srcHost), false, ByteCount, Sync(kPerThread));
}

CUresult cuMemcpyDtoH_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyDtoH_v2);
  return fakecuda::Linear(Addr(dstHost), false, srcDevice, true, ByteCount, Sync(kLegacy));
}

CUresult cuMemcpyDtoH_v2_ptds(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyDtoH_v2_ptds);
  return fakecuda::Linear(Addr(dstHost), false, srcDevice, true, ByteCount, Sync(kPerThread));
}

CUresult cuMemcpyDtoD_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyDtoD_v2);
  return fakecuda::Linear(dstDevice, true, srcDevice, true, ByteCount, Sync(kLegacy));
}

CUresult cuMemcpyDtoD_v2_ptds(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyDtoD_v2_ptds);
  return fakecuda::Linear(dstDevice, true, srcDevice, true, ByteCount, Sync(kPerThread));
}

CUresult cuMemcpyHtoDAsync_v2(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                              CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyHtoDAsync_v2);
  return fakecuda::Linear(dstDevice, true, Addr(srcHost), false, ByteCount,
                          Async(hStream, kLegacy));
}

CUresult cuMemcpyHtoDAsync_v2_ptsz(CUdeviceptr dstDevice, const void* srcHost, size_t ByteCount,
                                   CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyHtoDAsync_v2_ptsz);
  return fakecuda::Linear(dstDevice, true, Addr(srcHost), false, ByteCount,
                          Async(hStream, kPerThread));
}

CUresult cuMemcpyDtoHAsync_v2(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyDtoHAsync_v2);
  return fakecuda::Linear(Addr(dstHost), false, srcDevice, true, ByteCount,
                          Async(hStream, kLegacy));
}

CUresult cuMemcpyDtoHAsync_v2_ptsz(void* dstHost, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyDtoHAsync_v2_ptsz);
  return fakecuda::Linear(Addr(dstHost), false, srcDevice, true, ByteCount,
                          Async(hStream, kPerThread));
}

CUresult cuMemcpyDtoDAsync_v2(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                              CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyDtoDAsync_v2);
  return fakecuda::Linear(dstDevice, true, srcDevice, true, ByteCount, Async(hStream, kLegacy));
}

CUresult cuMemcpyDtoDAsync_v2_ptsz(CUdeviceptr dstDevice, CUdeviceptr srcDevice, size_t ByteCount,
                                   CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyDtoDAsync_v2_ptsz);
  return fakecuda::Linear(dstDevice, true, srcDevice, true, ByteCount, Async(hStream, kPerThread));
}

CUresult cuMemcpyPeer(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                      CUcontext srcContext, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyPeer);
  return fakecuda::Peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, Sync(kLegacy));
}

CUresult cuMemcpyPeer_ptds(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyPeer_ptds);
  return fakecuda::Peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount, Sync(kPerThread));
}

CUresult cuMemcpyPeerAsync(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                           CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyPeerAsync);
  return fakecuda::Peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                        Async(hStream, kLegacy));
}

CUresult cuMemcpyPeerAsync_ptsz(CUdeviceptr dstDevice, CUcontext dstContext, CUdeviceptr srcDevice,
                                CUcontext srcContext, size_t ByteCount, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyPeerAsync_ptsz);
  return fakecuda::Peer(dstDevice, dstContext, srcDevice, srcContext, ByteCount,
                        Async(hStream, kPerThread));
}

CUresult cuMemcpy2D_v2(const CUDA_MEMCPY2D* pCopy) {
  FAKECUDA_ENTER(cuMemcpy2D_v2);
  return fakecuda::Copy2D(pCopy, Sync(kLegacy));
}

CUresult cuMemcpy2D_v2_ptds(const CUDA_MEMCPY2D* pCopy) {
  FAKECUDA_ENTER(cuMemcpy2D_v2_ptds);
  return fakecuda::Copy2D(pCopy, Sync(kPerThread));
}

// Unaligned 2D copies differ only in hardware restrictions the fake does not have.
CUresult cuMemcpy2DUnaligned_v2(const CUDA_MEMCPY2D* pCopy) {
  FAKECUDA_ENTER(cuMemcpy2DUnaligned_v2);
  return fakecuda::Copy2D(pCopy, Sync(kLegacy));
}

CUresult cuMemcpy2DUnaligned_v2_ptds(const CUDA_MEMCPY2D* pCopy) {
  FAKECUDA_ENTER(cuMemcpy2DUnaligned_v2_ptds);
  return fakecuda::Copy2D(pCopy, Sync(kPerThread));
}

CUresult cuMemcpy2DAsync_v2(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpy2DAsync_v2);
  return fakecuda::Copy2D(pCopy, Async(hStream, kLegacy));
}

CUresult cuMemcpy2DAsync_v2_ptsz(const CUDA_MEMCPY2D* pCopy, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpy2DAsync_v2_ptsz);
  return fakecuda::Copy2D(pCopy, Async(hStream, kPerThread));
}

CUresult cuMemcpy3D_v2(const CUDA_MEMCPY3D* pCopy) {
  FAKECUDA_ENTER(cuMemcpy3D_v2);
  return fakecuda::Copy3D(pCopy, Sync(kLegacy));
}

CUresult cuMemcpy3D_v2_ptds(const CUDA_MEMCPY3D* pCopy) {
  FAKECUDA_ENTER(cuMemcpy3D_v2_ptds);
  return fakecuda::Copy3D(pCopy, Sync(kPerThread));
}

CUresult cuMemcpy3DAsync_v2(const CUDA_MEMCPY3D* pCopy, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpy3DAsync_v2);
  return fakecuda::Copy3D(pCopy, Async(hStream, kLegacy));
}

CUresult cuMemcpy3DAsync_v2_ptsz(const CUDA_MEMCPY3D* pCopy, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpy3DAsync_v2_ptsz);
  return fakecuda::Copy3D(pCopy, Async(hStream, kPerThread));
}

CUresult cuMemcpyHtoA_v2(CUarray dstArray, size_t dstOffset, const void* srcHost, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyHtoA_v2);
  return ArrayCopy(dstArray, dstOffset, srcHost, ByteCount, true, Sync(kLegacy));
}

CUresult cuMemcpyHtoA_v2_ptds(CUarray dstArray, size_t dstOffset, const void* srcHost,
                              size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyHtoA_v2_ptds);
  return ArrayCopy(dstArray, dstOffset, srcHost, ByteCount, true, Sync(kPerThread));
}

CUresult cuMemcpyAtoH_v2(void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyAtoH_v2);
  return ArrayCopy(srcArray, srcOffset, dstHost, ByteCount, false, Sync(kLegacy));
}

CUresult cuMemcpyAtoH_v2_ptds(void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount) {
  FAKECUDA_ENTER(cuMemcpyAtoH_v2_ptds);
  return ArrayCopy(srcArray, srcOffset, dstHost, ByteCount, false, Sync(kPerThread));
}

CUresult cuMemcpyHtoAAsync_v2(CUarray dstArray, size_t dstOffset, const void* srcHost,
                              size_t ByteCount, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyHtoAAsync_v2);
  return ArrayCopy(dstArray, dstOffset, srcHost, ByteCount, true, Async(hStream, kLegacy));
}

CUresult cuMemcpyHtoAAsync_v2_ptsz(CUarray dstArray, size_t dstOffset, const void* srcHost,
                                   size_t ByteCount, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyHtoAAsync_v2_ptsz);
  return ArrayCopy(dstArray, dstOffset, srcHost, ByteCount, true, Async(hStream, kPerThread));
}

CUresult cuMemcpyAtoHAsync_v2(void* dstHost, CUarray srcArray, size_t srcOffset, size_t ByteCount,
                              CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyAtoHAsync_v2);
  return ArrayCopy(srcArray, srcOffset, dstHost, ByteCount, false, Async(hStream, kLegacy));
}

CUresult cuMemcpyAtoHAsync_v2_ptsz(void* dstHost, CUarray srcArray, size_t srcOffset,
                                   size_t ByteCount, CUstream hStream) {
  FAKECUDA_ENTER(cuMemcpyAtoHAsync_v2_ptsz);
  return ArrayCopy(srcArray, srcOffset, dstHost, ByteCount, false, Async(hStream, kPerThread));
}

// Memsets: a 1D memset is one row of N elements. The trailing macro arguments are the extra
// parameters of the asynchronous forms (", CUstream hStream").
#define FAKECUDA_MEMSET(name, type, size, issue, ...)                      \
  CUresult name(CUdeviceptr dstDevice, type value, size_t N __VA_ARGS__) { \
    FAKECUDA_ENTER(name);                                                  \
    return fakecuda::Set(dstDevice, 0, value, size, N, 1, issue);          \
  }
#define FAKECUDA_MEMSET2D(name, type, size, issue, ...)                           \
  CUresult name(CUdeviceptr dstDevice, size_t dstPitch, type value, size_t Width, \
                size_t Height __VA_ARGS__) {                                      \
    FAKECUDA_ENTER(name);                                                         \
    return fakecuda::Set(dstDevice, dstPitch, value, size, Width, Height, issue); \
  }

FAKECUDA_MEMSET(cuMemsetD8_v2, unsigned char, 1, Sync(kLegacy))
FAKECUDA_MEMSET(cuMemsetD16_v2, unsigned short, 2, Sync(kLegacy))
FAKECUDA_MEMSET(cuMemsetD32_v2, unsigned int, 4, Sync(kLegacy))
FAKECUDA_MEMSET(cuMemsetD8_v2_ptds, unsigned char, 1, Sync(kPerThread))
FAKECUDA_MEMSET(cuMemsetD16_v2_ptds, unsigned short, 2, Sync(kPerThread))
FAKECUDA_MEMSET(cuMemsetD32_v2_ptds, unsigned int, 4, Sync(kPerThread))
FAKECUDA_MEMSET(cuMemsetD8Async, unsigned char, 1, Async(hStream, kLegacy), , CUstream hStream)
FAKECUDA_MEMSET(cuMemsetD16Async, unsigned short, 2, Async(hStream, kLegacy), , CUstream hStream)
FAKECUDA_MEMSET(cuMemsetD32Async, unsigned int, 4, Async(hStream, kLegacy), , CUstream hStream)
FAKECUDA_MEMSET(cuMemsetD8Async_ptsz, unsigned char, 1, Async(hStream, kPerThread), ,
                CUstream hStream)
FAKECUDA_MEMSET(cuMemsetD16Async_ptsz, unsigned short, 2, Async(hStream, kPerThread), ,
                CUstream hStream)
FAKECUDA_MEMSET(cuMemsetD32Async_ptsz, unsigned int, 4, Async(hStream, kPerThread), ,
                CUstream hStream)

FAKECUDA_MEMSET2D(cuMemsetD2D8_v2, unsigned char, 1, Sync(kLegacy))
FAKECUDA_MEMSET2D(cuMemsetD2D16_v2, unsigned short, 2, Sync(kLegacy))
FAKECUDA_MEMSET2D(cuMemsetD2D32_v2, unsigned int, 4, Sync(kLegacy))
FAKECUDA_MEMSET2D(cuMemsetD2D8_v2_ptds, unsigned char, 1, Sync(kPerThread))
FAKECUDA_MEMSET2D(cuMemsetD2D16_v2_ptds, unsigned short, 2, Sync(kPerThread))
FAKECUDA_MEMSET2D(cuMemsetD2D32_v2_ptds, unsigned int, 4, Sync(kPerThread))
FAKECUDA_MEMSET2D(cuMemsetD2D8Async, unsigned char, 1, Async(hStream, kLegacy), , CUstream hStream)
FAKECUDA_MEMSET2D(cuMemsetD2D16Async, unsigned short, 2, Async(hStream, kLegacy), ,
                  CUstream hStream)
FAKECUDA_MEMSET2D(cuMemsetD2D32Async, unsigned int, 4, Async(hStream, kLegacy), , CUstream hStream)
FAKECUDA_MEMSET2D(cuMemsetD2D8Async_ptsz, unsigned char, 1, Async(hStream, kPerThread), ,
                  CUstream hStream)
FAKECUDA_MEMSET2D(cuMemsetD2D16Async_ptsz, unsigned short, 2, Async(hStream, kPerThread), ,
                  CUstream hStream)
FAKECUDA_MEMSET2D(cuMemsetD2D32Async_ptsz, unsigned int, 4, Async(hStream, kPerThread), ,
                  CUstream hStream)

#undef FAKECUDA_MEMSET
#undef FAKECUDA_MEMSET2D

}  // extern "C"
