#include "pools.h"

#include <sys/mman.h>

#include <algorithm>
#include <cstring>

#include "fake_state.h"

namespace fakecuda {

PoolManager::PoolManager(FakeState* state) : state_(state) {}

PoolManager::Pool* PoolManager::LookupLocked(CUmemoryPool pool) {
  auto it = pools_.find(reinterpret_cast<Pool*>(pool));
  return it == pools_.end() || it->second->destroyed ? nullptr : it->second.get();
}

PoolManager::Pool* PoolManager::DefaultLocked(int device) {
  if (default_[device] == nullptr) {
    auto pool = std::make_unique<Pool>();
    pool->device = device;
    pool->is_default = true;
    default_[device] = pool.get();
    pools_[pool.get()] = std::move(pool);
  }
  if (current_[device] == nullptr) current_[device] = default_[device];
  return default_[device];
}

CUresult PoolManager::DefaultPool(CUdevice dev, CUmemoryPool* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = state_->contexts().CheckDevice(dev); r != CUDA_SUCCESS) return r;
  MutexLock lock(&mu_);
  *out = DefaultLocked(dev)->handle();
  return CUDA_SUCCESS;
}

CUresult PoolManager::CurrentPool(CUdevice dev, CUmemoryPool* out) {
  if (out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = state_->contexts().CheckDevice(dev); r != CUDA_SUCCESS) return r;
  MutexLock lock(&mu_);
  DefaultLocked(dev);
  *out = current_[dev]->handle();
  return CUDA_SUCCESS;
}

CUresult PoolManager::SetCurrentPool(CUdevice dev, CUmemoryPool pool) {
  if (CUresult r = state_->contexts().CheckDevice(dev); r != CUDA_SUCCESS) return r;
  MutexLock lock(&mu_);
  Pool* p = LookupLocked(pool);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (p->device != dev) return CUDA_ERROR_INVALID_DEVICE;
  DefaultLocked(dev);
  current_[dev] = p;
  return CUDA_SUCCESS;
}

CUresult PoolManager::Create(const CUmemPoolProps* props, CUmemoryPool* out) {
  if (props == nullptr || out == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (props->allocType != CU_MEM_ALLOCATION_TYPE_PINNED) return CUDA_ERROR_INVALID_VALUE;
  if (props->location.type != CU_MEM_LOCATION_TYPE_DEVICE) return CUDA_ERROR_NOT_SUPPORTED;
  if (CUresult r = state_->contexts().CheckDevice(props->location.id); r != CUDA_SUCCESS) {
    return r;
  }
  if ((static_cast<unsigned>(props->handleTypes) &
       ~static_cast<unsigned>(CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR)) != 0) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  auto pool = std::make_unique<Pool>();
  pool->device = props->location.id;
  MutexLock lock(&mu_);
  *out = pool->handle();
  pools_[pool.get()] = std::move(pool);
  return CUDA_SUCCESS;
}

CUresult PoolManager::Destroy(CUmemoryPool pool) {
  MutexLock lock(&mu_);
  Pool* p = LookupLocked(pool);
  if (p == nullptr || p->is_default) return CUDA_ERROR_INVALID_VALUE;
  // Outstanding allocations stay valid; their memory is released when they are freed.
  p->destroyed = true;
  if (current_[p->device] == p) current_[p->device] = default_[p->device];
  TrimLocked(p, 0);
  return CUDA_SUCCESS;
}

CUresult PoolManager::SetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  Pool* p = LookupLocked(pool);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  int int_value = 0;
  cuuint64_t u64_value = 0;
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      std::memcpy(&int_value, value, sizeof(int_value));
      p->reuse_follow_event_dependencies = int_value;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      std::memcpy(&int_value, value, sizeof(int_value));
      p->reuse_allow_opportunistic = int_value;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      std::memcpy(&int_value, value, sizeof(int_value));
      p->reuse_allow_internal_dependencies = int_value;
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      std::memcpy(&u64_value, value, sizeof(u64_value));
      p->release_threshold = u64_value;
      TrimLocked(p, p->release_threshold);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      // Only resetting (to the current value) is allowed, by setting 0.
      std::memcpy(&u64_value, value, sizeof(u64_value));
      if (u64_value != 0) return CUDA_ERROR_INVALID_VALUE;
      if (attr == CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH) {
        p->reserved_high = p->reserved;
      } else {
        p->used_high = p->used;
      }
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult PoolManager::GetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value) {
  if (value == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  Pool* p = LookupLocked(pool);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  auto put_int = [value](int v) { std::memcpy(value, &v, sizeof(v)); };
  auto put_u64 = [value](cuuint64_t v) { std::memcpy(value, &v, sizeof(v)); };
  switch (attr) {
    case CU_MEMPOOL_ATTR_REUSE_FOLLOW_EVENT_DEPENDENCIES:
      put_int(p->reuse_follow_event_dependencies);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_OPPORTUNISTIC:
      put_int(p->reuse_allow_opportunistic);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_REUSE_ALLOW_INTERNAL_DEPENDENCIES:
      put_int(p->reuse_allow_internal_dependencies);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RELEASE_THRESHOLD:
      put_u64(p->release_threshold);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_CURRENT:
      put_u64(p->reserved);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_RESERVED_MEM_HIGH:
      put_u64(p->reserved_high);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_CURRENT:
      put_u64(p->used);
      return CUDA_SUCCESS;
    case CU_MEMPOOL_ATTR_USED_MEM_HIGH:
      put_u64(p->used_high);
      return CUDA_SUCCESS;
    default:
      return CUDA_ERROR_INVALID_VALUE;
  }
}

CUresult PoolManager::TrimTo(CUmemoryPool pool, size_t min_bytes_to_keep) {
  MutexLock lock(&mu_);
  Pool* p = LookupLocked(pool);
  if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
  TrimLocked(p, min_bytes_to_keep);
  return CUDA_SUCCESS;
}

void PoolManager::TrimLocked(Pool* pool, uint64_t keep) {
  while (pool->reserved > keep && !pool->cached.empty()) {
    auto it = std::prev(pool->cached.end());  // largest first
    munmap(reinterpret_cast<void*>(it->second), it->first);
    state_->memory().Uncharge(pool->device, it->first);
    pool->reserved -= it->first;
    pool->cached.erase(it);
  }
}

CUresult PoolManager::AllocAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool,
                                 CUstream stream, DefaultStream mode) {
  if (dptr == nullptr || bytes == 0) return CUDA_ERROR_INVALID_VALUE;
  std::shared_ptr<Stream> s;
  if (CUresult r = state_->streams().Resolve(stream, mode, &s); r != CUDA_SUCCESS) return r;
  const size_t size = MemoryManager::PageRound(bytes);
  if (size < bytes) return CUDA_ERROR_OUT_OF_MEMORY;
  Region region;
  {
    MutexLock lock(&mu_);
    Pool* p = nullptr;
    if (pool == nullptr) {
      DefaultLocked(s->ctx()->device);
      p = current_[s->ctx()->device];
    } else {
      p = LookupLocked(pool);
      if (p == nullptr) return CUDA_ERROR_INVALID_VALUE;
    }
    uintptr_t ptr = 0;
    size_t block = 0;
    // Reuse a cached block that fits without wasting more than half of it.
    auto it = p->cached.lower_bound(size);
    if (it != p->cached.end() && it->first <= 2 * size) {
      block = it->first;
      ptr = it->second;
      p->cached.erase(it);
    } else {
      if (!state_->memory().Charge(p->device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
      void* mem = MemoryManager::MapAnonymous(size);
      if (mem == nullptr) {
        state_->memory().Uncharge(p->device, size);
        return CUDA_ERROR_OUT_OF_MEMORY;
      }
      ptr = reinterpret_cast<uintptr_t>(mem);
      block = size;
      p->reserved += block;
      p->reserved_high = std::max(p->reserved_high, p->reserved);
    }
    p->used += block;
    p->used_high = std::max(p->used_high, p->used);
    p->live[ptr] = block;
    region.base = ptr;
    region.size = block;
    region.kind = RegionKind::kPoolAlloc;
    region.device_memory = true;
    region.device = p->device;
    region.ctx = s->ctx()->handle();
    region.pool = p->handle();
    region.prot = PROT_READ | PROT_WRITE;
  }
  region.buffer_id = state_->memory().NextBufferId();
  state_->address_space().Insert(region);
  *dptr = region.base;
  return CUDA_SUCCESS;
}

CUresult PoolManager::FreeAsync(CUdeviceptr dptr, CUstream stream, DefaultStream mode) {
  std::optional<Region> r = state_->address_space().Find(dptr);
  if (!r || r->base != dptr || r->kind != RegionKind::kPoolAlloc) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  std::shared_ptr<Stream> s;
  if (CUresult rc = state_->streams().Resolve(stream, mode, &s); rc != CUDA_SUCCESS) return rc;
  // A free captured into a graph: the graph's memory stays for the graph's nodes, which may run
  // at any later launch (a free node of the driver's graph memory; not modelled further). A
  // later free outside capture releases it.
  if (s->Capture().status == CU_STREAM_CAPTURE_STATUS_ACTIVE) return CUDA_SUCCESS;
  auto* pool = reinterpret_cast<Pool*>(r->pool);
  {
    MutexLock lock(&mu_);
    if (!pool->freeing.emplace(dptr, true).second) return CUDA_ERROR_INVALID_VALUE;  // twice
  }
  s->Enqueue([this, pool, dptr] { ReturnBlock(pool, dptr); });
  return CUDA_SUCCESS;
}

CUresult PoolManager::FreeNow(CUdeviceptr dptr) {
  std::optional<Region> r = state_->address_space().Find(dptr);
  if (!r || r->base != dptr || r->kind != RegionKind::kPoolAlloc) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  auto* pool = reinterpret_cast<Pool*>(r->pool);
  {
    MutexLock lock(&mu_);
    if (!pool->freeing.emplace(dptr, true).second) return CUDA_ERROR_INVALID_VALUE;
  }
  ReturnBlock(pool, dptr);
  return CUDA_SUCCESS;
}

void PoolManager::ReturnBlock(Pool* pool, uintptr_t ptr) {
  state_->address_space().Remove(ptr);
  MutexLock lock(&mu_);
  pool->freeing.erase(ptr);
  auto it = pool->live.find(ptr);
  if (it == pool->live.end()) return;
  const size_t block = it->second;
  pool->live.erase(it);
  pool->used -= block;
  pool->cached.emplace(block, ptr);
  TrimLocked(pool, pool->destroyed ? 0 : pool->release_threshold);
}

}  // namespace fakecuda
