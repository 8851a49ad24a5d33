// Entry points: cuMemAlloc-style device memory, pinned host memory, pointer queries.

#include "entry_points.h"
#include "fake_state.h"

using fakecuda::Context;
using fakecuda::State;

namespace {

CUresult Current(Context** ctx) { return State().contexts().Current(ctx); }

}  // namespace

extern "C" {

CUresult cuMemAlloc_v2(CUdeviceptr* dptr, size_t bytesize) {
  FAKECUDA_ENTER(cuMemAlloc_v2);
  Context* ctx = nullptr;
  if (CUresult r = Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().memory().Alloc(ctx, bytesize, dptr);
}

CUresult cuArrayCreate_v2(CUarray* pHandle, const CUDA_ARRAY_DESCRIPTOR* pAllocateArray) {
  FAKECUDA_ENTER(cuArrayCreate_v2);
  Context* ctx = nullptr;
  if (CUresult r = Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().copies().CreateArray(ctx, pAllocateArray, pHandle);
}

CUresult cuArrayDestroy(CUarray hArray) {
  FAKECUDA_ENTER(cuArrayDestroy);
  return State().copies().DestroyArray(hArray);
}

CUresult cuMemAllocPitch_v2(CUdeviceptr* dptr, size_t* pPitch, size_t WidthInBytes, size_t Height,
                            unsigned int ElementSizeBytes) {
  FAKECUDA_ENTER(cuMemAllocPitch_v2);
  Context* ctx = nullptr;
  if (CUresult r = Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().memory().AllocPitch(ctx, WidthInBytes, Height, ElementSizeBytes, dptr, pPitch);
}

CUresult cuMemFree_v2(CUdeviceptr dptr) {
  FAKECUDA_ENTER(cuMemFree_v2);
  return State().memory().Free(dptr);
}

CUresult cuMemGetInfo_v2(size_t* free, size_t* total) {
  FAKECUDA_ENTER(cuMemGetInfo_v2);
  Context* ctx = nullptr;
  if (CUresult r = Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().memory().GetInfo(ctx, free, total);
}

CUresult cuMemGetAddressRange_v2(CUdeviceptr* pbase, size_t* psize, CUdeviceptr dptr) {
  FAKECUDA_ENTER(cuMemGetAddressRange_v2);
  return State().memory().GetAddressRange(dptr, pbase, psize);
}

CUresult cuPointerGetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  FAKECUDA_ENTER(cuPointerGetAttribute);
  return State().memory().GetAttribute(data, attribute, ptr);
}

CUresult cuPointerGetAttributes(unsigned int numAttributes, CUpointer_attribute* attributes,
                                void** data, CUdeviceptr ptr) {
  FAKECUDA_ENTER(cuPointerGetAttributes);
  return State().memory().GetAttributes(numAttributes, attributes, data, ptr);
}

CUresult cuMemAllocHost_v2(void** pp, size_t bytesize) {
  FAKECUDA_ENTER(cuMemAllocHost_v2);
  Context* ctx = nullptr;
  if (CUresult r = Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().memory().HostAlloc(ctx, bytesize, 0, pp);
}

CUresult cuMemHostAlloc(void** pp, size_t bytesize, unsigned int Flags) {
  FAKECUDA_ENTER(cuMemHostAlloc);
  Context* ctx = nullptr;
  if (CUresult r = Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().memory().HostAlloc(ctx, bytesize, Flags, pp);
}

CUresult cuMemFreeHost(void* p) {
  FAKECUDA_ENTER(cuMemFreeHost);
  return State().memory().FreeHost(p);
}

CUresult cuMemHostRegister_v2(void* p, size_t bytesize, unsigned int Flags) {
  FAKECUDA_ENTER(cuMemHostRegister_v2);
  Context* ctx = nullptr;
  if (CUresult r = Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().memory().HostRegister(ctx, p, bytesize, Flags);
}

CUresult cuMemHostUnregister(void* p) {
  FAKECUDA_ENTER(cuMemHostUnregister);
  return State().memory().HostUnregister(p);
}

CUresult cuMemHostGetDevicePointer_v2(CUdeviceptr* pdptr, void* p, unsigned int Flags) {
  FAKECUDA_ENTER(cuMemHostGetDevicePointer_v2);
  return State().memory().HostGetDevicePointer(p, Flags, pdptr);
}

}  // extern "C"
