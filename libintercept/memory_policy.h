// The policies of the memory entry points: each asks the MemoryManager first and passes the
// call to the driver when Missile does not serve it (see memory.h). Declared here so hooks.cc
// instantiates these instead of the pass-through; defined in memory_hooks.cc.
#ifndef MISSILE_LIBINTERCEPT_MEMORY_POLICY_H_
#define MISSILE_LIBINTERCEPT_MEMORY_POLICY_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "policy.h"

namespace missile::shim {

#define MISSILE_MEMORY_POLICY(sym, pfn, ...)                          \
  template <>                                                         \
  struct Policy<HookId::k_##sym> {                                    \
    static CUresult Run(pfn real, __VA_ARGS__);                       \
  };

MISSILE_MEMORY_POLICY(cuMemAlloc_v2, PFN_cuMemAlloc_v3020, CUdeviceptr*, size_t)
MISSILE_MEMORY_POLICY(cuMemAllocPitch_v2, PFN_cuMemAllocPitch_v3020, CUdeviceptr*, size_t*, size_t,
                      size_t, unsigned int)
MISSILE_MEMORY_POLICY(cuMemFree_v2, PFN_cuMemFree_v3020, CUdeviceptr)
MISSILE_MEMORY_POLICY(cuMemGetInfo_v2, PFN_cuMemGetInfo_v3020, size_t*, size_t*)
MISSILE_MEMORY_POLICY(cuDeviceTotalMem_v2, PFN_cuDeviceTotalMem_v3020, size_t*, CUdevice)
MISSILE_MEMORY_POLICY(cuMemGetAddressRange_v2, PFN_cuMemGetAddressRange_v3020, CUdeviceptr*,
                      size_t*, CUdeviceptr)
MISSILE_MEMORY_POLICY(cuPointerGetAttribute, PFN_cuPointerGetAttribute_v4000, void*,
                      CUpointer_attribute, CUdeviceptr)
MISSILE_MEMORY_POLICY(cuPointerGetAttributes, PFN_cuPointerGetAttributes_v7000, unsigned int,
                      CUpointer_attribute*, void**, CUdeviceptr)
MISSILE_MEMORY_POLICY(cuMemAllocAsync, PFN_cuMemAllocAsync_v11020, CUdeviceptr*, size_t, CUstream)
MISSILE_MEMORY_POLICY(cuMemAllocAsync_ptsz, PFN_cuMemAllocAsync_v11020_ptsz, CUdeviceptr*, size_t,
                      CUstream)
MISSILE_MEMORY_POLICY(cuMemAllocFromPoolAsync, PFN_cuMemAllocFromPoolAsync_v11020, CUdeviceptr*,
                      size_t, CUmemoryPool, CUstream)
MISSILE_MEMORY_POLICY(cuMemAllocFromPoolAsync_ptsz, PFN_cuMemAllocFromPoolAsync_v11020_ptsz,
                      CUdeviceptr*, size_t, CUmemoryPool, CUstream)
MISSILE_MEMORY_POLICY(cuMemFreeAsync, PFN_cuMemFreeAsync_v11020, CUdeviceptr, CUstream)
MISSILE_MEMORY_POLICY(cuMemFreeAsync_ptsz, PFN_cuMemFreeAsync_v11020_ptsz, CUdeviceptr, CUstream)
MISSILE_MEMORY_POLICY(cuMemCreate, PFN_cuMemCreate_v10020, CUmemGenericAllocationHandle*, size_t,
                      const CUmemAllocationProp*, unsigned long long)
MISSILE_MEMORY_POLICY(cuMemRelease, PFN_cuMemRelease_v10020, CUmemGenericAllocationHandle)
MISSILE_MEMORY_POLICY(cuMemRetainAllocationHandle, PFN_cuMemRetainAllocationHandle_v11000,
                      CUmemGenericAllocationHandle*, void*)
MISSILE_MEMORY_POLICY(cuMemMap, PFN_cuMemMap_v10020, CUdeviceptr, size_t, size_t,
                      CUmemGenericAllocationHandle, unsigned long long)
MISSILE_MEMORY_POLICY(cuMemUnmap, PFN_cuMemUnmap_v10020, CUdeviceptr, size_t)

#undef MISSILE_MEMORY_POLICY

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_MEMORY_POLICY_H_
