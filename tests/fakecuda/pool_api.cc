// Entry points: stream-ordered allocation and memory pools.

#include "entry_points.h"
#include "fake_state.h"

using fakecuda::DefaultStream;
using fakecuda::State;

extern "C" {

CUresult cuMemAllocAsync(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  FAKECUDA_ENTER(cuMemAllocAsync);
  return State().pools().AllocAsync(dptr, bytesize, nullptr, hStream, DefaultStream::kLegacy);
}

CUresult cuMemAllocAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUstream hStream) {
  FAKECUDA_ENTER(cuMemAllocAsync_ptsz);
  return State().pools().AllocAsync(dptr, bytesize, nullptr, hStream, DefaultStream::kPerThread);
}

CUresult cuMemFreeAsync(CUdeviceptr dptr, CUstream hStream) {
  FAKECUDA_ENTER(cuMemFreeAsync);
  return State().pools().FreeAsync(dptr, hStream, DefaultStream::kLegacy);
}

CUresult cuMemFreeAsync_ptsz(CUdeviceptr dptr, CUstream hStream) {
  FAKECUDA_ENTER(cuMemFreeAsync_ptsz);
  return State().pools().FreeAsync(dptr, hStream, DefaultStream::kPerThread);
}

CUresult cuMemAllocFromPoolAsync(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                 CUstream hStream) {
  FAKECUDA_ENTER(cuMemAllocFromPoolAsync);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return State().pools().AllocAsync(dptr, bytesize, pool, hStream, DefaultStream::kLegacy);
}

CUresult cuMemAllocFromPoolAsync_ptsz(CUdeviceptr* dptr, size_t bytesize, CUmemoryPool pool,
                                      CUstream hStream) {
  FAKECUDA_ENTER(cuMemAllocFromPoolAsync_ptsz);
  if (pool == nullptr) return CUDA_ERROR_INVALID_VALUE;
  return State().pools().AllocAsync(dptr, bytesize, pool, hStream, DefaultStream::kPerThread);
}

CUresult cuDeviceGetDefaultMemPool(CUmemoryPool* pool_out, CUdevice dev) {
  FAKECUDA_ENTER(cuDeviceGetDefaultMemPool);
  return State().pools().DefaultPool(dev, pool_out);
}

CUresult cuDeviceGetMemPool(CUmemoryPool* pool, CUdevice dev) {
  FAKECUDA_ENTER(cuDeviceGetMemPool);
  return State().pools().CurrentPool(dev, pool);
}

CUresult cuDeviceSetMemPool(CUdevice dev, CUmemoryPool pool) {
  FAKECUDA_ENTER(cuDeviceSetMemPool);
  return State().pools().SetCurrentPool(dev, pool);
}

CUresult cuMemPoolCreate(CUmemoryPool* pool, const CUmemPoolProps* poolProps) {
  FAKECUDA_ENTER(cuMemPoolCreate);
  return State().pools().Create(poolProps, pool);
}

CUresult cuMemPoolDestroy(CUmemoryPool pool) {
  FAKECUDA_ENTER(cuMemPoolDestroy);
  return State().pools().Destroy(pool);
}

CUresult cuMemPoolSetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  FAKECUDA_ENTER(cuMemPoolSetAttribute);
  return State().pools().SetAttribute(pool, attr, value);
}

CUresult cuMemPoolGetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  FAKECUDA_ENTER(cuMemPoolGetAttribute);
  return State().pools().GetAttribute(pool, attr, value);
}

CUresult cuMemPoolTrimTo(CUmemoryPool pool, size_t minBytesToKeep) {
  FAKECUDA_ENTER(cuMemPoolTrimTo);
  return State().pools().TrimTo(pool, minBytesToKeep);
}

}  // extern "C"
