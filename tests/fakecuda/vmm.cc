#include "vmm.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "fake_state.h"

namespace fakecuda {
namespace {

constexpr uint64_t kChunkMagic = 0x4b4e484341464b46ull;  // "FKFACHNK"
constexpr uint32_t kChunkVersion = 1;
constexpr off_t kHeaderBytes = 4096;
constexpr unsigned kSupportedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;

// The first bytes of every chunk's memfd.
struct ChunkHeader {
  uint64_t magic;
  uint32_t version;
  int32_t location_type;
  int32_t location_id;
  uint32_t handle_types;
  uint64_t has_phys;
  uint64_t phys;
  uint64_t size;
};

bool IsHostLocation(CUmemLocationType type) {
  return type == CU_MEM_LOCATION_TYPE_HOST || type == CU_MEM_LOCATION_TYPE_HOST_NUMA ||
         type == CU_MEM_LOCATION_TYPE_HOST_NUMA_CURRENT;
}

int ProtOf(unsigned flags) {
  if (flags == CU_MEM_ACCESS_FLAGS_PROT_READWRITE) return PROT_READ | PROT_WRITE;
  if (flags == CU_MEM_ACCESS_FLAGS_PROT_READ) return PROT_READ;
  return PROT_NONE;
}

bool IsPowerOfTwo(size_t x) { return x != 0 && (x & (x - 1)) == 0; }

}  // namespace

Chunk::~Chunk() {
  if (fd >= 0) close(fd);
  if (charged) state->memory().Uncharge(device, size);
  if (holds_frames) state->phys().RemoveHolder(device, phys, size);
}

VmmManager::VmmManager(FakeState* state) : state_(state) {}

CUresult VmmManager::CheckProp(const CUmemAllocationProp* prop) const {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (prop->type != CU_MEM_ALLOCATION_TYPE_PINNED) {
    return prop->type == CU_MEM_ALLOCATION_TYPE_INVALID ? CUDA_ERROR_INVALID_VALUE
                                                        : CUDA_ERROR_NOT_SUPPORTED;
  }
  if (prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (CUresult r = state_->contexts().CheckDevice(prop->location.id); r != CUDA_SUCCESS) {
      return r;
    }
  } else if (!IsHostLocation(prop->location.type)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if ((static_cast<unsigned>(prop->requestedHandleTypes) & ~kSupportedHandleTypes) != 0) {
    return CUDA_ERROR_NOT_SUPPORTED;
  }
  return CUDA_SUCCESS;
}

CUresult VmmManager::Granularity(size_t* granularity, const CUmemAllocationProp* prop,
                                 CUmemAllocationGranularity_flags option) {
  if (granularity == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (option != CU_MEM_ALLOC_GRANULARITY_MINIMUM &&
      option != CU_MEM_ALLOC_GRANULARITY_RECOMMENDED) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckProp(prop); r != CUDA_SUCCESS) return r;
  *granularity = kGranularity;
  return CUDA_SUCCESS;
}

CUmemGenericAllocationHandle VmmManager::AddHandleLocked(std::shared_ptr<Chunk> chunk,
                                                         const CUmemAllocationProp& prop) {
  const CUmemGenericAllocationHandle id = next_handle_++;
  Handle& h = handles_[id];
  h.chunk = std::move(chunk);
  h.refs = 1;
  h.prop = prop;
  return id;
}

VmmManager::Handle* VmmManager::LiveHandleLocked(CUmemGenericAllocationHandle handle) {
  auto it = handles_.find(handle);
  return it == handles_.end() || it->second.refs == 0 ? nullptr : &it->second;
}

void VmmManager::DropHandleIfUnusedLocked(CUmemGenericAllocationHandle handle) {
  auto it = handles_.find(handle);
  if (it != handles_.end() && it->second.refs == 0 && it->second.mappings == 0) {
    handles_.erase(it);
  }
}

CUresult VmmManager::Create(CUmemGenericAllocationHandle* handle, size_t size,
                            const CUmemAllocationProp* prop, unsigned long long flags) {
  if (handle == nullptr || flags != 0 || size == 0 || size % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = CheckProp(prop); r != CUDA_SUCCESS) return r;
  auto chunk = std::make_shared<Chunk>();
  chunk->state = state_;
  chunk->size = size;
  chunk->location = prop->location;
  chunk->on_device = prop->location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  chunk->device = chunk->on_device ? prop->location.id : -1;
  chunk->handle_types = static_cast<unsigned>(prop->requestedHandleTypes);
  if (chunk->on_device) chunk->compression = prop->allocFlags.compressionType;
  if (chunk->on_device) {
    if (!state_->memory().Charge(chunk->device, size)) return CUDA_ERROR_OUT_OF_MEMORY;
    chunk->charged = true;
    if (CUresult r = state_->phys().Allocate(chunk->device, size, &chunk->phys);
        r != CUDA_SUCCESS) {
      return r;  // ~Chunk uncharges
    }
    chunk->has_phys = true;
    chunk->holds_frames = true;
  }
  chunk->fd = memfd_create("fakecuda-chunk", MFD_CLOEXEC);
  if (chunk->fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  ChunkHeader header{};
  header.magic = kChunkMagic;
  header.version = kChunkVersion;
  header.location_type = prop->location.type;
  header.location_id = prop->location.id;
  header.handle_types = chunk->handle_types;
  header.has_phys = chunk->has_phys ? 1 : 0;
  header.phys = chunk->phys;
  header.size = size;
  struct stat st {};
  if (ftruncate(chunk->fd, kHeaderBytes + static_cast<off_t>(size)) != 0 ||
      pwrite(chunk->fd, &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)) ||
      fstat(chunk->fd, &st) != 0) {
    return CUDA_ERROR_OUT_OF_MEMORY;
  }
  chunk->inode = {st.st_dev, st.st_ino};
  MutexLock lock(&mu_);
  std::erase_if(chunks_, [](const auto& entry) { return entry.second.expired(); });
  chunks_[chunk->inode] = chunk;
  *handle = AddHandleLocked(std::move(chunk), *prop);
  return CUDA_SUCCESS;
}

CUresult VmmManager::Release(CUmemGenericAllocationHandle handle) {
  MutexLock lock(&mu_);
  Handle* h = LiveHandleLocked(handle);
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  --h->refs;
  DropHandleIfUnusedLocked(handle);
  return CUDA_SUCCESS;
}

CUresult VmmManager::AddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment,
                                    CUdeviceptr addr, unsigned long long flags) {
  if (ptr == nullptr || flags != 0 || size == 0 || size % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (alignment == 0) alignment = kGranularity;
  if (!IsPowerOfTwo(alignment)) return CUDA_ERROR_INVALID_VALUE;
  if (alignment < kGranularity) alignment = kGranularity;
  constexpr int kFlags = MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE;
  void* base = MAP_FAILED;
  if (addr != 0 && addr % alignment == 0) {
    // The hint is honoured only where it is free; MAP_FIXED_NOREPLACE never clobbers a mapping.
    base =
        mmap(reinterpret_cast<void*>(addr), size, PROT_NONE, kFlags | MAP_FIXED_NOREPLACE, -1, 0);
    if (base != MAP_FAILED && base != reinterpret_cast<void*>(addr)) {
      munmap(base, size);  // a kernel without MAP_FIXED_NOREPLACE took it as a mere hint
      base = MAP_FAILED;
    }
  }
  if (base == MAP_FAILED) {
    if (size + alignment < size) return CUDA_ERROR_OUT_OF_MEMORY;
    void* raw = mmap(nullptr, size + alignment, PROT_NONE, kFlags, -1, 0);
    if (raw == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
    const auto raw_addr = reinterpret_cast<uintptr_t>(raw);
    const uintptr_t aligned = (raw_addr + alignment - 1) / alignment * alignment;
    if (aligned > raw_addr) munmap(raw, aligned - raw_addr);
    const uintptr_t tail = raw_addr + size + alignment - (aligned + size);
    if (tail > 0) munmap(reinterpret_cast<void*>(aligned + size), tail);
    base = reinterpret_cast<void*>(aligned);
  }
  MutexLock lock(&mu_);
  reservations_[reinterpret_cast<uintptr_t>(base)] = size;
  *ptr = reinterpret_cast<CUdeviceptr>(base);
  return CUDA_SUCCESS;
}

CUresult VmmManager::AddressFree(CUdeviceptr ptr, size_t size) {
  MutexLock lock(&mu_);
  auto it = reservations_.find(ptr);
  if (it == reservations_.end() || it->second != size) return CUDA_ERROR_INVALID_VALUE;
  // Mappings left in the range go with it.
  for (auto m = mappings_.lower_bound(ptr); m != mappings_.end() && m->first < ptr + size;) {
    auto next = std::next(m);
    UnmapOneLocked(m);
    m = next;
  }
  munmap(reinterpret_cast<void*>(ptr), size);
  reservations_.erase(it);
  return CUDA_SUCCESS;
}

std::map<uintptr_t, size_t>::iterator VmmManager::ReservationOfLocked(uintptr_t ptr, size_t size) {
  auto it = reservations_.upper_bound(ptr);
  if (it == reservations_.begin()) return reservations_.end();
  --it;
  if (ptr < it->first || ptr + size < ptr || ptr + size > it->first + it->second) {
    return reservations_.end();
  }
  return it;
}

std::map<uintptr_t, VmmManager::Mapping>::iterator VmmManager::MappingOfLocked(uintptr_t ptr) {
  auto it = mappings_.upper_bound(ptr);
  if (it == mappings_.begin()) return mappings_.end();
  --it;
  return ptr - it->first < it->second.size ? it : mappings_.end();
}

CUresult VmmManager::Map(CUdeviceptr ptr, size_t size, size_t offset,
                         CUmemGenericAllocationHandle handle, unsigned long long flags) {
  if (flags != 0 || size == 0 || size % kGranularity != 0 || offset % kGranularity != 0 ||
      ptr % kGranularity != 0) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  MutexLock lock(&mu_);
  Handle* h = LiveHandleLocked(handle);
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (offset > h->chunk->size || size > h->chunk->size - offset) return CUDA_ERROR_INVALID_VALUE;
  auto res = ReservationOfLocked(ptr, size);
  if (res == reservations_.end()) return CUDA_ERROR_INVALID_VALUE;
  auto next = mappings_.lower_bound(ptr);
  if (MappingOfLocked(ptr) != mappings_.end() ||
      (next != mappings_.end() && next->first < ptr + size)) {
    return CUDA_ERROR_INVALID_VALUE;  // already mapped
  }
  void* p = mmap(reinterpret_cast<void*>(ptr), size, PROT_NONE, MAP_SHARED | MAP_FIXED,
                 h->chunk->fd, kHeaderBytes + static_cast<off_t>(offset));
  if (p == MAP_FAILED) return CUDA_ERROR_OUT_OF_MEMORY;
  Mapping m;
  m.size = size;
  m.offset = offset;
  m.handle = handle;
  m.chunk = h->chunk;
  m.reservation_base = res->first;
  m.reservation_size = res->second;
  ++h->mappings;

  Region r;
  r.base = ptr;
  r.size = size;
  r.kind = RegionKind::kVmm;
  r.device_memory = m.chunk->on_device;
  r.device = m.chunk->on_device ? m.chunk->device : CU_DEVICE_CPU;
  r.buffer_id = state_->memory().NextBufferId();
  r.reservation_base = m.reservation_base;
  r.reservation_size = m.reservation_size;
  r.handle = handle;
  r.has_phys = m.chunk->has_phys;
  r.phys = m.chunk->phys + offset;
  r.handle_types = m.chunk->handle_types;
  r.prot = PROT_NONE;
  mappings_[ptr] = std::move(m);
  state_->address_space().Insert(r);
  return CUDA_SUCCESS;
}

void VmmManager::UnmapOneLocked(std::map<uintptr_t, Mapping>::iterator it) {
  const uintptr_t va = it->first;
  const size_t size = it->second.size;
  const CUmemGenericAllocationHandle handle = it->second.handle;
  // Put the reservation back in place of the chunk's pages.
  mmap(reinterpret_cast<void*>(va), size, PROT_NONE,
       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE | MAP_FIXED, -1, 0);
  state_->address_space().Remove(va);
  mappings_.erase(it);
  auto h = handles_.find(handle);
  if (h != handles_.end()) {
    --h->second.mappings;
    DropHandleIfUnusedLocked(handle);
  }
}

CUresult VmmManager::Unmap(CUdeviceptr ptr, size_t size) {
  if (size == 0) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  // The range must be made of whole, back-to-back mappings.
  uintptr_t cursor = ptr;
  for (auto it = mappings_.find(ptr); cursor < ptr + size; ++it) {
    if (it == mappings_.end() || it->first != cursor) return CUDA_ERROR_INVALID_VALUE;
    cursor += it->second.size;
  }
  if (cursor != ptr + size) return CUDA_ERROR_INVALID_VALUE;
  for (auto it = mappings_.find(ptr); it != mappings_.end() && it->first < ptr + size;) {
    auto next = std::next(it);
    UnmapOneLocked(it);
    it = next;
  }
  return CUDA_SUCCESS;
}

CUresult VmmManager::SetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc,
                               size_t count) {
  if (desc == nullptr || count == 0 || size == 0) return CUDA_ERROR_INVALID_VALUE;
  for (size_t i = 0; i < count; ++i) {
    const CUmemAccess_flags f = desc[i].flags;
    if (f != CU_MEM_ACCESS_FLAGS_PROT_NONE && f != CU_MEM_ACCESS_FLAGS_PROT_READ &&
        f != CU_MEM_ACCESS_FLAGS_PROT_READWRITE) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
      if (CUresult r = state_->contexts().CheckDevice(desc[i].location.id); r != CUDA_SUCCESS) {
        return r;
      }
    } else if (!IsHostLocation(desc[i].location.type)) {
      return CUDA_ERROR_INVALID_VALUE;
    }
  }
  MutexLock lock(&mu_);
  // "The range must be a fully mapped address range": whole, back-to-back mappings.
  uintptr_t cursor = ptr;
  for (auto it = mappings_.find(ptr); cursor < ptr + size; ++it) {
    if (it == mappings_.end() || it->first != cursor) return CUDA_ERROR_INVALID_VALUE;
    cursor += it->second.size;
  }
  if (cursor != ptr + size) return CUDA_ERROR_INVALID_VALUE;
  for (auto it = mappings_.find(ptr); it != mappings_.end() && it->first < ptr + size; ++it) {
    Mapping& m = it->second;
    for (size_t i = 0; i < count; ++i) {
      if (desc[i].location.type == CU_MEM_LOCATION_TYPE_DEVICE) {
        m.access[desc[i].location.id] = static_cast<unsigned char>(desc[i].flags);
      } else {
        m.host_access = static_cast<unsigned char>(desc[i].flags);
      }
    }
    // Host code stands in for every device here, so the pages get the widest access granted.
    int prot = ProtOf(m.host_access);
    for (unsigned char a : m.access) prot |= ProtOf(a);
    if (mprotect(reinterpret_cast<void*>(it->first), m.size, prot) != 0) {
      return CUDA_ERROR_INVALID_VALUE;
    }
    const auto access = m.access;
    state_->address_space().Update(it->first, [&](Region& r) {
      r.access = access;
      r.prot = prot;
    });
  }
  return CUDA_SUCCESS;
}

CUresult VmmManager::GetAccess(unsigned long long* flags, const CUmemLocation* location,
                               CUdeviceptr ptr) {
  if (flags == nullptr || location == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  auto it = MappingOfLocked(ptr);
  if (it == mappings_.end()) return CUDA_ERROR_INVALID_VALUE;
  if (location->type == CU_MEM_LOCATION_TYPE_DEVICE) {
    if (CUresult r = state_->contexts().CheckDevice(location->id); r != CUDA_SUCCESS) return r;
    *flags = it->second.access[location->id];
  } else if (IsHostLocation(location->type)) {
    *flags = it->second.host_access;
  } else {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult VmmManager::Export(void* shareable, CUmemGenericAllocationHandle handle,
                            CUmemAllocationHandleType type, unsigned long long flags) {
  if (shareable == nullptr || flags != 0) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  MutexLock lock(&mu_);
  Handle* h = LiveHandleLocked(handle);
  if (h == nullptr || (h->chunk->handle_types & type) == 0) return CUDA_ERROR_INVALID_VALUE;
  const int fd = dup(h->chunk->fd);  // the caller owns it; not close-on-exec, like any new fd
  if (fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
  std::memcpy(shareable, &fd, sizeof(fd));
  return CUDA_SUCCESS;
}

CUresult VmmManager::Import(CUmemGenericAllocationHandle* handle, void* os_handle,
                            CUmemAllocationHandleType type) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (type != CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR) return CUDA_ERROR_NOT_SUPPORTED;
  const int fd = static_cast<int>(reinterpret_cast<intptr_t>(os_handle));
  ChunkHeader header{};
  struct stat st {};
  if (fd < 0 || fstat(fd, &st) != 0 ||
      pread(fd, &header, sizeof(header), 0) != static_cast<ssize_t>(sizeof(header)) ||
      header.magic != kChunkMagic || header.version != kChunkVersion || header.size == 0 ||
      static_cast<uint64_t>(st.st_size) < kHeaderBytes + header.size) {
    return CUDA_ERROR_INVALID_VALUE;  // not a chunk of this fake
  }
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.requestedHandleTypes = static_cast<CUmemAllocationHandleType>(header.handle_types);
  prop.location.type = static_cast<CUmemLocationType>(header.location_type);
  prop.location.id = header.location_id;
  const bool on_device = prop.location.type == CU_MEM_LOCATION_TYPE_DEVICE;
  if (on_device) {
    if (CUresult r = state_->contexts().CheckDevice(header.location_id); r != CUDA_SUCCESS) {
      return r;
    }
  }
  MutexLock lock(&mu_);
  const std::pair<dev_t, ino_t> inode{st.st_dev, st.st_ino};
  std::shared_ptr<Chunk> chunk;
  if (auto it = chunks_.find(inode); it != chunks_.end()) chunk = it->second.lock();
  if (chunk == nullptr) {
    chunk = std::make_shared<Chunk>();
    chunk->state = state_;
    chunk->fd = fcntl(fd, F_DUPFD_CLOEXEC, 0);  // the caller keeps its own fd
    if (chunk->fd < 0) return CUDA_ERROR_OUT_OF_MEMORY;
    chunk->on_device = on_device;
    chunk->device = on_device ? header.location_id : -1;
    chunk->location = prop.location;
    chunk->handle_types = header.handle_types;
    chunk->has_phys = header.has_phys != 0;
    chunk->phys = header.phys;
    chunk->size = header.size;
    chunk->inode = inode;
    if (on_device) {
      state_->memory().ChargeUnchecked(chunk->device, chunk->size);
      chunk->charged = true;
      state_->phys().AddHolder(chunk->device, chunk->phys, chunk->size);
      chunk->holds_frames = true;
    }
    chunks_[inode] = chunk;
  }
  *handle = AddHandleLocked(std::move(chunk), prop);
  return CUDA_SUCCESS;
}

CUresult VmmManager::RetainHandle(CUmemGenericAllocationHandle* handle, void* addr) {
  if (handle == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  auto it = MappingOfLocked(reinterpret_cast<uintptr_t>(addr));
  if (it == mappings_.end()) return CUDA_ERROR_INVALID_VALUE;
  auto h = handles_.find(it->second.handle);
  if (h == handles_.end()) return CUDA_ERROR_INVALID_VALUE;
  ++h->second.refs;
  *handle = it->second.handle;
  return CUDA_SUCCESS;
}

CUresult VmmManager::GetProperties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle) {
  if (prop == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  Handle* h = LiveHandleLocked(handle);
  if (h == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *prop = CUmemAllocationProp{};
  prop->type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop->requestedHandleTypes = static_cast<CUmemAllocationHandleType>(h->chunk->handle_types);
  prop->location = h->chunk->location;
  prop->allocFlags.compressionType = h->chunk->compression;
  return CUDA_SUCCESS;
}

CUresult VmmManager::ChunkPhys(CUmemGenericAllocationHandle handle, unsigned long long* phys) {
  if (phys == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  Handle* h = LiveHandleLocked(handle);
  if (h == nullptr || !h->chunk->has_phys) return CUDA_ERROR_INVALID_VALUE;
  *phys = h->chunk->phys;
  return CUDA_SUCCESS;
}

CUresult VmmManager::PointerPhys(CUdeviceptr ptr, unsigned long long* phys) {
  if (phys == nullptr) return CUDA_ERROR_INVALID_VALUE;
  MutexLock lock(&mu_);
  auto it = MappingOfLocked(ptr);
  if (it == mappings_.end() || !it->second.chunk->has_phys) return CUDA_ERROR_INVALID_VALUE;
  *phys = it->second.chunk->phys + it->second.offset + (ptr - it->first);
  return CUDA_SUCCESS;
}

}  // namespace fakecuda
