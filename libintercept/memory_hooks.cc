// The memory policies (declared in memory_policy.h): thin edges between the hooks and the
// MemoryManager. Each asks the manager and falls back to the real driver.
#include "memory.h"
#include "memory_policy.h"
#include "shim.h"

namespace missile::shim {
namespace {

MemoryManager* Memory() { return Shim::Get().memory(); }

}  // namespace

#define MISSILE_TRY(call)                          \
  if (MemoryManager* m = Memory()) {               \
    if (std::optional<CUresult> r = m->call) return *r; \
  }

CUresult Policy<HookId::k_cuMemAlloc_v2>::Run(PFN_cuMemAlloc_v3020 real, CUdeviceptr* p, size_t n) {
  MISSILE_TRY(Alloc(p, n));
  return real(p, n);
}

CUresult Policy<HookId::k_cuMemAllocPitch_v2>::Run(PFN_cuMemAllocPitch_v3020 real, CUdeviceptr* p,
                                                   size_t* pitch, size_t w, size_t h,
                                                   unsigned int elem) {
  MISSILE_TRY(AllocPitch(p, pitch, w, h, elem));
  return real(p, pitch, w, h, elem);
}

CUresult Policy<HookId::k_cuMemFree_v2>::Run(PFN_cuMemFree_v3020 real, CUdeviceptr p) {
  MISSILE_TRY(Free(p));
  return real(p);
}

CUresult Policy<HookId::k_cuMemGetInfo_v2>::Run(PFN_cuMemGetInfo_v3020 real, size_t* free_b,
                                                size_t* total) {
  MISSILE_TRY(GetInfo(free_b, total));
  return real(free_b, total);
}

CUresult Policy<HookId::k_cuDeviceTotalMem_v2>::Run(PFN_cuDeviceTotalMem_v3020 real, size_t* bytes,
                                                    CUdevice dev) {
  MISSILE_TRY(TotalMem(bytes, dev));
  return real(bytes, dev);
}

CUresult Policy<HookId::k_cuMemGetAddressRange_v2>::Run(PFN_cuMemGetAddressRange_v3020 real,
                                                        CUdeviceptr* base, size_t* size,
                                                        CUdeviceptr p) {
  if (MemoryManager* m = Memory()) {
    if (auto e = m->Find(p)) {
      if (base != nullptr) *base = e->base;
      if (size != nullptr) *size = e->size;
      return CUDA_SUCCESS;
    }
  }
  return real(base, size, p);
}

namespace {

// Answers the range attributes for Missile's allocations; the driver knows only the 2 MiB
// mappings behind them. Everything else comes from the driver.
bool FillRangeAttribute(MemoryManager* m, CUpointer_attribute attr, void* data, CUdeviceptr p) {
  if (m == nullptr || data == nullptr) return false;
  if (attr != CU_POINTER_ATTRIBUTE_RANGE_START_ADDR && attr != CU_POINTER_ATTRIBUTE_RANGE_SIZE) {
    return false;
  }
  auto e = m->Find(p);
  if (!e) return false;
  if (attr == CU_POINTER_ATTRIBUTE_RANGE_START_ADDR) {
    *static_cast<CUdeviceptr*>(data) = e->base;
  } else {
    *static_cast<size_t*>(data) = e->size;
  }
  return true;
}

}  // namespace

CUresult Policy<HookId::k_cuPointerGetAttribute>::Run(PFN_cuPointerGetAttribute_v4000 real,
                                                      void* data, CUpointer_attribute attr,
                                                      CUdeviceptr p) {
  if (FillRangeAttribute(Memory(), attr, data, p)) return CUDA_SUCCESS;
  return real(data, attr, p);
}

CUresult Policy<HookId::k_cuPointerGetAttributes>::Run(PFN_cuPointerGetAttributes_v7000 real,
                                                       unsigned int n, CUpointer_attribute* attrs,
                                                       void** data, CUdeviceptr p) {
  CUresult r = real(n, attrs, data, p);
  if (r != CUDA_SUCCESS || attrs == nullptr || data == nullptr) return r;
  MemoryManager* m = Memory();
  for (unsigned i = 0; i < n; ++i) FillRangeAttribute(m, attrs[i], data[i], p);
  return r;
}

CUresult Policy<HookId::k_cuMemAllocAsync>::Run(PFN_cuMemAllocAsync_v11020 real, CUdeviceptr* p,
                                                size_t n, CUstream s) {
  MISSILE_TRY(AllocAsync(p, n, s, /*ptsz=*/false));
  return real(p, n, s);
}

CUresult Policy<HookId::k_cuMemAllocAsync_ptsz>::Run(PFN_cuMemAllocAsync_v11020_ptsz real,
                                                     CUdeviceptr* p, size_t n, CUstream s) {
  MISSILE_TRY(AllocAsync(p, n, s, /*ptsz=*/true));
  return real(p, n, s);
}

// Allocations from a program's pool are served like the default pool's: the pool's release
// threshold and reuse policy do not apply to Missile's memory (docs/interception.md).
CUresult Policy<HookId::k_cuMemAllocFromPoolAsync>::Run(PFN_cuMemAllocFromPoolAsync_v11020 real,
                                                        CUdeviceptr* p, size_t n,
                                                        CUmemoryPool pool, CUstream s) {
  MISSILE_TRY(AllocAsync(p, n, s, /*ptsz=*/false));
  return real(p, n, pool, s);
}

CUresult Policy<HookId::k_cuMemAllocFromPoolAsync_ptsz>::Run(
    PFN_cuMemAllocFromPoolAsync_v11020_ptsz real, CUdeviceptr* p, size_t n, CUmemoryPool pool,
    CUstream s) {
  MISSILE_TRY(AllocAsync(p, n, s, /*ptsz=*/true));
  return real(p, n, pool, s);
}

CUresult Policy<HookId::k_cuMemFreeAsync>::Run(PFN_cuMemFreeAsync_v11020 real, CUdeviceptr p,
                                               CUstream s) {
  MISSILE_TRY(FreeAsync(p, s, /*ptsz=*/false));
  return real(p, s);
}

CUresult Policy<HookId::k_cuMemFreeAsync_ptsz>::Run(PFN_cuMemFreeAsync_v11020_ptsz real,
                                                    CUdeviceptr p, CUstream s) {
  MISSILE_TRY(FreeAsync(p, s, /*ptsz=*/true));
  return real(p, s);
}

CUresult Policy<HookId::k_cuMemCreate>::Run(PFN_cuMemCreate_v10020 real,
                                            CUmemGenericAllocationHandle* h, size_t size,
                                            const CUmemAllocationProp* prop,
                                            unsigned long long flags) {
  MISSILE_TRY(VmmCreate(h, size, prop, flags));
  return real(h, size, prop, flags);
}

CUresult Policy<HookId::k_cuMemRelease>::Run(PFN_cuMemRelease_v10020 real,
                                             CUmemGenericAllocationHandle h) {
  MISSILE_TRY(VmmRelease(h));
  return real(h);
}

CUresult Policy<HookId::k_cuMemRetainAllocationHandle>::Run(
    PFN_cuMemRetainAllocationHandle_v11000 real, CUmemGenericAllocationHandle* h, void* addr) {
  CUresult r = real(h, addr);
  if (r == CUDA_SUCCESS && h != nullptr) {
    if (MemoryManager* m = Memory()) m->VmmRetained(*h);
  }
  return r;
}

CUresult Policy<HookId::k_cuMemMap>::Run(PFN_cuMemMap_v10020 real, CUdeviceptr p, size_t size,
                                         size_t offset, CUmemGenericAllocationHandle h,
                                         unsigned long long flags) {
  CUresult r = real(p, size, offset, h, flags);
  if (r == CUDA_SUCCESS) {
    if (MemoryManager* m = Memory()) m->VmmMapped(p, size, h);
  }
  return r;
}

CUresult Policy<HookId::k_cuMemUnmap>::Run(PFN_cuMemUnmap_v10020 real, CUdeviceptr p, size_t size) {
  CUresult r = real(p, size);
  if (r == CUDA_SUCCESS) {
    if (MemoryManager* m = Memory()) m->VmmUnmapped(p, size);
  }
  return r;
}

#undef MISSILE_TRY

}  // namespace missile::shim
