#include "memory.h"

#include <sys/mman.h>
#include <unistd.h>

#include <cstring>

#include "fake_state.h"

namespace fakecuda {
namespace {

constexpr size_t kPitchAlignment = 512;

template <typename T>
void Put(void* data, T value) {
  std::memcpy(data, &value, sizeof(T));
}

}  // namespace

MemoryManager::MemoryManager(FakeState* state) : state_(state) {}

size_t MemoryManager::PageRound(size_t bytes) {
  const size_t page = static_cast<size_t>(sysconf(_SC_PAGESIZE));
  return (bytes + page - 1) / page * page;
}

void* MemoryManager::MapAnonymous(size_t bytes) {
  void* p = mmap(nullptr, PageRound(bytes), PROT_READ | PROT_WRITE,
                 MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
  return p == MAP_FAILED ? nullptr : p;
}

bool MemoryManager::Charge(int device, uint64_t bytes) {
  const uint64_t total = state_->config().total_mem;
  std::atomic<uint64_t>& used = used_[device];
  uint64_t old = used.load();
  do {
    if (bytes > total || old > total - bytes) return false;
  } while (!used.compare_exchange_weak(old, old + bytes));
  return true;
}

void MemoryManager::ChargeUnchecked(int device, uint64_t bytes) { used_[device].fetch_add(bytes); }

void MemoryManager::Uncharge(int device, uint64_t bytes) { used_[device].fetch_sub(bytes); }

uint64_t MemoryManager::Used(int device) const { return used_[device].load(); }

CUresult MemoryManager::Alloc(Context* ctx, size_t bytes, CUdeviceptr* dptr) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  const size_t size = PageRound(bytes);
  if (size < bytes || !Charge(ctx->device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
  void* p = MapAnonymous(size);
  if (p == nullptr) {
    Uncharge(ctx->device, size);
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  Region r;
  r.base = reinterpret_cast<uintptr_t>(p);
  r.size = size;
  r.kind = RegionKind::kDeviceAlloc;
  r.device_memory = true;
  r.device = ctx->device;
  r.ctx = ctx->handle();
  r.buffer_id = NextBufferId();
  r.prot = PROT_READ | PROT_WRITE;
  state_->address_space().Insert(r);
  *dptr = r.base;
  return CUDA_SUCCESS;
}

CUresult MemoryManager::AllocPitch(Context* ctx, size_t width, size_t height, unsigned element_size,
                                   CUdeviceptr* dptr, size_t* pitch) {
  if (dptr == nullptr || pitch == nullptr || width == 0 || height == 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (element_size != 4 && element_size != 8 && element_size != 16) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const size_t row = (width + kPitchAlignment - 1) / kPitchAlignment * kPitchAlignment;
  if (row < width || height > SIZE_MAX / row) return CUDA_ERROR_OUT_OF_MEMORY;
  if (CUresult r = Alloc(ctx, row * height, dptr); r != CUDA_SUCCESS) return r;
  *pitch = row;
  return CUDA_SUCCESS;
}

CUresult MemoryManager::Free(CUdeviceptr dptr) {
  std::optional<Region> r = state_->address_space().Find(dptr);
  if (!r || r->base != dptr) return CUDA_ERROR_INVALID_VALUE;
  if (r->kind == RegionKind::kPoolAlloc) return state_->pools().FreeNow(dptr);
  if (r->kind != RegionKind::kDeviceAlloc) return CUDA_ERROR_INVALID_VALUE;
  // cuMemFree synchronizes: work already queued on the context may still touch the memory.
  Context* ctx = nullptr;
  if (state_->contexts().Resolve(r->ctx, &ctx) == CUDA_SUCCESS) {
    state_->streams().SynchronizeContext(ctx);
  }
  Region removed;
  if (!state_->address_space().Remove(dptr, &removed)) return CUDA_ERROR_INVALID_VALUE;
  munmap(reinterpret_cast<void*>(removed.base), removed.size);
  Uncharge(removed.device, removed.size);
  return CUDA_SUCCESS;
}

CUresult MemoryManager::GetInfo(Context* ctx, size_t* free, size_t* total) {
  if (free == nullptr || total == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const uint64_t t = state_->config().total_mem;
  const uint64_t used = Used(ctx->device);
  *total = t;
  *free = used >= t ? 0 : t - used;
  return CUDA_SUCCESS;
}

CUresult MemoryManager::GetAddressRange(CUdeviceptr dptr, CUdeviceptr* base, size_t* size) {
  std::optional<Region> r = state_->address_space().Find(dptr);
  if (!r || !r->device_memory) return CUDA_ERROR_NOT_FOUND;
  if (base != nullptr) *base = r->base;
  if (size != nullptr) *size = r->size;
  return CUDA_SUCCESS;
}

CUresult MemoryManager::HostAlloc(Context* ctx, size_t bytes, unsigned flags, void** pp) {
  constexpr unsigned kValid =
      CU_MEMHOSTALLOC_PORTABLE | CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_WRITECOMBINED;
  if (pp == nullptr || bytes == 0 || (flags & ~kValid) != 0) return CUDA_ERROR_INVALID_VALUE;
  void* p = MapAnonymous(bytes);
  if (p == nullptr) return CUDA_ERROR_OUT_OF_MEMORY;
  Region r;
  r.base = reinterpret_cast<uintptr_t>(p);
  r.size = PageRound(bytes);
  r.kind = RegionKind::kHostAlloc;
  r.device = ctx->device;
  r.ctx = ctx->handle();
  r.buffer_id = NextBufferId();
  r.host_flags = flags;
  r.prot = PROT_READ | PROT_WRITE;
  state_->address_space().Insert(r);
  *pp = p;
  return CUDA_SUCCESS;
}

CUresult MemoryManager::FreeHost(void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::optional<Region> r = state_->address_space().Find(addr);
  if (!r || r->base != addr || r->kind != RegionKind::kHostAlloc) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (state_->contexts().Resolve(r->ctx, &ctx) == CUDA_SUCCESS) {
    state_->streams().SynchronizeContext(ctx);
  }
  Region removed;
  if (!state_->address_space().Remove(addr, &removed)) return CUDA_ERROR_INVALID_VALUE;
  munmap(p, removed.size);
  return CUDA_SUCCESS;
}

CUresult MemoryManager::HostRegister(Context* ctx, void* p, size_t bytes, unsigned flags) {
  constexpr unsigned kValid = CU_MEMHOSTREGISTER_PORTABLE | CU_MEMHOSTREGISTER_DEVICEMAP |
                              CU_MEMHOSTREGISTER_IOMEMORY | CU_MEMHOSTREGISTER_READ_ONLY;
  if (p == nullptr || bytes == 0 || (flags & ~kValid) != 0) return CUDA_ERROR_INVALID_VALUE;
  if ((flags & CU_MEMHOSTREGISTER_IOMEMORY) != 0) return CUDA_ERROR_NOT_SUPPORTED;
  const auto addr = reinterpret_cast<uintptr_t>(p);
  if (addr + bytes < addr) return CUDA_ERROR_INVALID_VALUE;
  Region r;
  r.base = addr;
  r.size = bytes;
  r.kind = RegionKind::kHostRegistered;
  r.device = ctx->device;
  r.ctx = ctx->handle();
  r.buffer_id = NextBufferId();
  r.host_flags = flags;
  r.prot = PROT_READ | PROT_WRITE;
  // Overlap check and insert are two steps; two threads registering overlapping ranges at the
  // same instant is a caller bug the real driver does not define either.
  if (state_->address_space().Overlaps(addr, bytes)) {
    return CUDA_ERROR_HOST_MEMORY_ALREADY_REGISTERED;
  }
  state_->address_space().Insert(r);
  return CUDA_SUCCESS;
}

CUresult MemoryManager::HostUnregister(void* p) {
  const auto addr = reinterpret_cast<uintptr_t>(p);
  std::optional<Region> r = state_->address_space().Find(addr);
  if (!r || r->base != addr || r->kind != RegionKind::kHostRegistered) {
    return CUDA_ERROR_HOST_MEMORY_NOT_REGISTERED;
  }
  state_->address_space().Remove(addr);
  return CUDA_SUCCESS;
}

CUresult MemoryManager::HostGetDevicePointer(void* p, unsigned flags, CUdeviceptr* dptr) {
  if (dptr == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  std::optional<Region> r = state_->address_space().Find(reinterpret_cast<uintptr_t>(p));
  if (!r || r->device_memory) return CUDA_ERROR_INVALID_VALUE;
  *dptr = reinterpret_cast<CUdeviceptr>(p);  // unified addressing: the same address
  return CUDA_SUCCESS;
}

CUresult MemoryManager::AttributeOf(const std::optional<Region>& region,
                                    CUpointer_attribute attribute, CUdeviceptr ptr, void* data) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (!region) return CUDA_ERROR_INVALID_VALUE;
  const Region& r = *region;
  const bool vmm = r.kind == RegionKind::kVmm;
  switch (attribute) {
    case CU_POINTER_ATTRIBUTE_CONTEXT:
      Put<CUcontext>(data, r.ctx);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      Put<unsigned>(data, r.device_memory ? CU_MEMORYTYPE_DEVICE : CU_MEMORYTYPE_HOST);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_POINTER:
      Put<CUdeviceptr>(data, ptr);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_HOST_POINTER:
      if (r.device_memory) return CUDA_ERROR_INVALID_VALUE;
      Put<void*>(data, reinterpret_cast<void*>(ptr));
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
    case CU_POINTER_ATTRIBUTE_IS_MANAGED:
    case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
    case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
      Put<unsigned>(data, 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_BUFFER_ID:
    case CU_POINTER_ATTRIBUTE_MEMORY_BLOCK_ID:
      Put<unsigned long long>(data, r.buffer_id);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
      Put<int>(data, r.device);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      Put<unsigned>(data, r.kind == RegionKind::kDeviceAlloc ? 1u : 0u);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_START_ADDR:
      Put<CUdeviceptr>(data, vmm ? r.reservation_base : r.base);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      Put<size_t>(data, vmm ? r.reservation_size : r.size);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPED:
      Put<unsigned>(data, 1);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ALLOWED_HANDLE_TYPES:
      Put<unsigned long long>(data, vmm ? r.handle_types : 0);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS: {
      unsigned flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      if (vmm) {
        Context* ctx = nullptr;
        const int device =
            state_->contexts().Current(&ctx) == CUDA_SUCCESS ? ctx->device : r.device;
        flags = device >= 0 && device < kMaxDevices ? r.access[device] : 0;
      }
      Put<unsigned>(data, flags);
      return CUDA_SUCCESS;
    }
    case CU_POINTER_ATTRIBUTE_MEMPOOL_HANDLE:
      Put<CUmemoryPool>(data, r.pool);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
      Put<size_t>(data, r.size);
      return CUDA_SUCCESS;
    case CU_POINTER_ATTRIBUTE_MAPPING_BASE_ADDR:
      Put<void*>(data, reinterpret_cast<void*>(r.base));
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult MemoryManager::GetAttribute(void* data, CUpointer_attribute attribute, CUdeviceptr ptr) {
  if (data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (attribute == CU_POINTER_ATTRIBUTE_P2P_TOKENS) return CUDA_ERROR_NOT_SUPPORTED;
  return AttributeOf(state_->address_space().Find(ptr), attribute, ptr, data);
}

CUresult MemoryManager::GetAttributes(unsigned count, CUpointer_attribute* attributes, void** data,
                                      CUdeviceptr ptr) {
  if (count == 0 || attributes == nullptr || data == nullptr) return CUDA_ERROR_INVALID_VALUE;
  const std::optional<Region> region = state_->address_space().Find(ptr);
  for (unsigned i = 0; i < count; ++i) {
    if (data[i] == nullptr) return CUDA_ERROR_INVALID_VALUE;
    const CUpointer_attribute a = attributes[i];
    if (a < CU_POINTER_ATTRIBUTE_CONTEXT || a > CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE ||
        a == CU_POINTER_ATTRIBUTE_P2P_TOKENS) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  for (unsigned i = 0; i < count; ++i) {
    if (AttributeOf(region, attributes[i], ptr, data[i]) == CUDA_SUCCESS) continue;
    // Unknown memory, or an attribute that does not apply (HOST_POINTER of device memory): the
    // documented "default NULL values"; cudart reads ordinal -2 as "unregistered".
    switch (attributes[i]) {
      case CU_POINTER_ATTRIBUTE_DEVICE_ORDINAL:
        Put<int>(data[i], -2);
        break;
      case CU_POINTER_ATTRIBUTE_MEMORY_TYPE:
      case CU_POINTER_ATTRIBUTE_SYNC_MEMOPS:
      case CU_POINTER_ATTRIBUTE_IS_MANAGED:
      case CU_POINTER_ATTRIBUTE_IS_LEGACY_CUDA_IPC_CAPABLE:
      case CU_POINTER_ATTRIBUTE_MAPPED:
      case CU_POINTER_ATTRIBUTE_IS_GPU_DIRECT_RDMA_CAPABLE:
      case CU_POINTER_ATTRIBUTE_ACCESS_FLAGS:
      case CU_POINTER_ATTRIBUTE_IS_HW_DECOMPRESS_CAPABLE:
        Put<unsigned>(data[i], 0);
        break;
      case CU_POINTER_ATTRIBUTE_RANGE_SIZE:
      case CU_POINTER_ATTRIBUTE_MAPPING_SIZE:
        Put<size_t>(data[i], 0);
        break;
      default:  // pointer-sized values
        Put<unsigned long long>(data[i], 0);
        break;
    }
  }
  return CUDA_SUCCESS;
}

void MemoryManager::ReleaseContext(Context* ctx) {
  const CUcontext handle = ctx->handle();
  std::vector<Region> removed = state_->address_space().RemoveIf([handle](const Region& r) {
    return r.ctx == handle &&
           (r.kind == RegionKind::kDeviceAlloc || r.kind == RegionKind::kHostAlloc ||
            r.kind == RegionKind::kHostRegistered);
  });
  for (const Region& r : removed) {
    if (r.kind == RegionKind::kHostRegistered) continue;  // the caller's memory
    munmap(reinterpret_cast<void*>(r.base), r.size);
    if (r.kind == RegionKind::kDeviceAlloc) Uncharge(r.device, r.size);
  }
}

}  // namespace fakecuda
