// Entry points: virtual memory management (cuMemCreate, cuMemMap, ...).

#include "entry_points.h"
#include "fake_state.h"

using fakecuda::State;

extern "C" {

CUresult cuMemGetAllocationGranularity(size_t* granularity, const CUmemAllocationProp* prop,
                                       CUmemAllocationGranularity_flags option) {
  FAKECUDA_ENTER(cuMemGetAllocationGranularity);
  return State().vmm().Granularity(granularity, prop, option);
}

CUresult cuMemCreate(CUmemGenericAllocationHandle* handle, size_t size,
                     const CUmemAllocationProp* prop, unsigned long long flags) {
  FAKECUDA_ENTER(cuMemCreate);
  return State().vmm().Create(handle, size, prop, flags);
}

CUresult cuMemRelease(CUmemGenericAllocationHandle handle) {
  FAKECUDA_ENTER(cuMemRelease);
  return State().vmm().Release(handle);
}

CUresult cuMemAddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                             unsigned long long flags) {
  FAKECUDA_ENTER(cuMemAddressReserve);
  return State().vmm().AddressReserve(ptr, size, alignment, addr, flags);
}

CUresult cuMemAddressFree(CUdeviceptr ptr, size_t size) {
  FAKECUDA_ENTER(cuMemAddressFree);
  return State().vmm().AddressFree(ptr, size);
}

CUresult cuMemMap(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
                  unsigned long long flags) {
  FAKECUDA_ENTER(cuMemMap);
  return State().vmm().Map(ptr, size, offset, handle, flags);
}

CUresult cuMemUnmap(CUdeviceptr ptr, size_t size) {
  FAKECUDA_ENTER(cuMemUnmap);
  return State().vmm().Unmap(ptr, size);
}

CUresult cuMemSetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count) {
  FAKECUDA_ENTER(cuMemSetAccess);
  return State().vmm().SetAccess(ptr, size, desc, count);
}

CUresult cuMemGetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr) {
  FAKECUDA_ENTER(cuMemGetAccess);
  return State().vmm().GetAccess(flags, location, ptr);
}

CUresult cuMemExportToShareableHandle(void* shareableHandle, CUmemGenericAllocationHandle handle,
                                      CUmemAllocationHandleType handleType,
                                      unsigned long long flags) {
  FAKECUDA_ENTER(cuMemExportToShareableHandle);
  return State().vmm().Export(shareableHandle, handle, handleType, flags);
}

CUresult cuMemImportFromShareableHandle(CUmemGenericAllocationHandle* handle, void* osHandle,
                                        CUmemAllocationHandleType shHandleType) {
  FAKECUDA_ENTER(cuMemImportFromShareableHandle);
  return State().vmm().Import(handle, osHandle, shHandleType);
}

CUresult cuMemRetainAllocationHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  FAKECUDA_ENTER(cuMemRetainAllocationHandle);
  return State().vmm().RetainHandle(handle, addr);
}

CUresult cuMemGetAllocationPropertiesFromHandle(CUmemAllocationProp* prop,
                                                CUmemGenericAllocationHandle handle) {
  FAKECUDA_ENTER(cuMemGetAllocationPropertiesFromHandle);
  return State().vmm().GetProperties(prop, handle);
}

}  // extern "C"
