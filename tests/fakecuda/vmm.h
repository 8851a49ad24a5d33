// Virtual memory management (cuMemCreate, cuMemMap, ...) with chunks really shared across
// processes.
//
// A chunk is a memfd: a 4 KiB header page (magic, location, device, synthetic physical address,
// size, allowed handle types) followed by the payload, which cuMemMap maps (MAP_SHARED at file
// offset 4096 + offset) into a PROT_NONE reservation; cuMemSetAccess mprotects it. Exporting a
// POSIX file descriptor hands out a dup of the memfd; importing reads the header, so the physical
// address travels with the chunk. The kernel frees the memory when the last fd and mapping of the
// memfd are gone, in whatever process.
//
// Within a process, handles are refcounted (cuMemRelease / cuMemRetainAllocationHandle) and a
// mapping keeps its handle's chunk alive after release, as in CUDA. Importing a chunk this process
// already holds (same memfd inode) reuses it, so it is charged once. Device chunks are charged to
// the device (memory.h) while held; host-located chunks (CU_MEM_LOCATION_TYPE_HOST*) are pinned
// host memory, never charged and without a physical address.
// Thread-safe (one mutex for the VMM tables; calls into AddressSpace and MemoryManager under it).

#ifndef MISSILE_TESTS_FAKECUDA_VMM_H_
#define MISSILE_TESTS_FAKECUDA_VMM_H_

#include <cuda.h>
#include <sys/types.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <utility>

#include "config.h"
#include "thread_annotations.h"

namespace fakecuda {

class FakeState;

// One physical chunk held by this process. Closing/uncharging/releasing its frames happens when
// the last handle and mapping referring to it are gone.
struct Chunk {
  FakeState* state = nullptr;
  int fd = -1;
  bool on_device = false;
  int device = -1;  // device ordinal for device chunks
  CUmemLocation location{};
  unsigned handle_types = 0;  // CUmemAllocationHandleType bits allowed for export
  // The compression asked for at cuMemCreate, granted on device memory (the header does not
  // carry it: an imported chunk reports none).
  unsigned char compression = 0;
  bool has_phys = false;
  uint64_t phys = 0;
  uint64_t size = 0;
  std::pair<dev_t, ino_t> inode{};
  bool charged = false;
  bool holds_frames = false;

  ~Chunk();
};

class VmmManager {
 public:
  explicit VmmManager(FakeState* state);
  VmmManager(const VmmManager&) = delete;
  VmmManager& operator=(const VmmManager&) = delete;

  CUresult Granularity(size_t* granularity, const CUmemAllocationProp* prop,
                       CUmemAllocationGranularity_flags option);
  CUresult Create(CUmemGenericAllocationHandle* handle, size_t size,
                  const CUmemAllocationProp* prop, unsigned long long flags);
  CUresult Release(CUmemGenericAllocationHandle handle);
  CUresult AddressReserve(CUdeviceptr* ptr, size_t size, size_t alignment, CUdeviceptr addr,
                          unsigned long long flags);
  CUresult AddressFree(CUdeviceptr ptr, size_t size);
  CUresult Map(CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,
               unsigned long long flags);
  CUresult Unmap(CUdeviceptr ptr, size_t size);
  CUresult SetAccess(CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count);
  CUresult GetAccess(unsigned long long* flags, const CUmemLocation* location, CUdeviceptr ptr);
  CUresult Export(void* shareable, CUmemGenericAllocationHandle handle,
                  CUmemAllocationHandleType type, unsigned long long flags);
  CUresult Import(CUmemGenericAllocationHandle* handle, void* os_handle,
                  CUmemAllocationHandleType type);
  CUresult RetainHandle(CUmemGenericAllocationHandle* handle, void* addr);
  CUresult GetProperties(CUmemAllocationProp* prop, CUmemGenericAllocationHandle handle);

  // Synthetic physical addresses (fakecuda.h).
  CUresult ChunkPhys(CUmemGenericAllocationHandle handle, unsigned long long* phys);
  CUresult PointerPhys(CUdeviceptr ptr, unsigned long long* phys);

 private:
  struct Handle {
    std::shared_ptr<Chunk> chunk;
    int refs = 0;      // 0: released, kept only while mapped (for cuMemRetainAllocationHandle)
    int mappings = 0;  // cuMemMap calls not yet unmapped
    CUmemAllocationProp prop{};
  };
  struct Mapping {
    size_t size = 0;
    size_t offset = 0;
    CUmemGenericAllocationHandle handle = 0;
    std::shared_ptr<Chunk> chunk;
    uintptr_t reservation_base = 0;
    size_t reservation_size = 0;
    std::array<unsigned char, kMaxDevices> access{};
    unsigned char host_access = 0;
  };

  CUresult CheckProp(const CUmemAllocationProp* prop) const;
  // A handle that is not released; nullptr otherwise.
  Handle* LiveHandleLocked(CUmemGenericAllocationHandle handle)
      FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  CUmemGenericAllocationHandle AddHandleLocked(std::shared_ptr<Chunk> chunk,
                                               const CUmemAllocationProp& prop)
      FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropHandleIfUnusedLocked(CUmemGenericAllocationHandle handle)
      FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The reservation containing [ptr, ptr + size), or reservations_.end().
  std::map<uintptr_t, size_t>::iterator ReservationOfLocked(uintptr_t ptr, size_t size)
      FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The mapping containing ptr, or mappings_.end().
  std::map<uintptr_t, Mapping>::iterator MappingOfLocked(uintptr_t ptr)
      FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Replaces the mapping at `it` with PROT_NONE reserved space and forgets it.
  void UnmapOneLocked(std::map<uintptr_t, Mapping>::iterator it)
      FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FakeState* state_;
  Mutex mu_;
  CUmemGenericAllocationHandle next_handle_ FAKECUDA_GUARDED_BY(mu_) = 0x1000;
  std::map<CUmemGenericAllocationHandle, Handle> handles_ FAKECUDA_GUARDED_BY(mu_);
  std::map<uintptr_t, size_t> reservations_ FAKECUDA_GUARDED_BY(mu_);  // base -> size
  std::map<uintptr_t, Mapping> mappings_ FAKECUDA_GUARDED_BY(mu_);     // va -> mapping
  std::map<std::pair<dev_t, ino_t>, std::weak_ptr<Chunk>> chunks_ FAKECUDA_GUARDED_BY(mu_);
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_VMM_H_
