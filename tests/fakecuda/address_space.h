// What the fake knows about each address of the process: device memory (cuMemAlloc, pool
// allocations, VMM mappings of device chunks), pinned host memory (cuMemAllocHost/HostAlloc,
// cuMemHostRegister, VMM mappings of host chunks), or else pageable host memory.
//
// Device memory is host memory here, so a device pointer is a real address and plain memcpy
// works on it; this map is what lets copies pick the simulated link's direction, decide whether
// an "async" copy really is async (pageable memory makes it synchronous), and reject device
// pointers the fake never handed out instead of crashing on them.
// Thread-safe: readers share a lock, writers take it exclusively; Region values are copies.

#ifndef MISSILE_TESTS_FAKECUDA_ADDRESS_SPACE_H_
#define MISSILE_TESTS_FAKECUDA_ADDRESS_SPACE_H_

#include <cuda.h>
#include <sys/mman.h>

#include <array>
#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <vector>

#include "config.h"
#include "thread_annotations.h"

namespace fakecuda {

enum class RegionKind {
  kDeviceAlloc,     // cuMemAlloc / cuMemAllocPitch
  kPoolAlloc,       // cuMemAllocAsync / cuMemAllocFromPoolAsync
  kVmm,             // one cuMemMap
  kHostAlloc,       // cuMemAllocHost / cuMemHostAlloc
  kHostRegistered,  // cuMemHostRegister
};

enum class MemClass { kPageable, kPinnedHost, kDevice };

struct Region {
  uintptr_t base = 0;
  size_t size = 0;
  RegionKind kind = RegionKind::kDeviceAlloc;
  bool device_memory = false;  // VRAM: counts as device memory for copies and attributes
  int device = -1;             // device of the memory or of the allocating context
  CUcontext ctx = nullptr;     // allocating/registering context; nullptr for VMM
  uint64_t buffer_id = 0;      // CU_POINTER_ATTRIBUTE_BUFFER_ID, unique in the process
  unsigned host_flags = 0;     // cuMemHostAlloc / cuMemHostRegister flags
  CUmemoryPool pool = nullptr;
  // kVmm only.
  uintptr_t reservation_base = 0;
  size_t reservation_size = 0;
  CUmemGenericAllocationHandle handle = 0;
  bool has_phys = false;
  uint64_t phys = 0;  // physical address of `base`
  unsigned handle_types = 0;
  std::array<unsigned char, kMaxDevices> access{};  // CUmemAccess_flags per device
  int prot = PROT_NONE;                             // current host protection of the range
};

class AddressSpace {
 public:
  void Insert(const Region& region);
  // Removes the region starting exactly at `base`; false if there is none.
  bool Remove(uintptr_t base, Region* removed = nullptr);
  // Removes every region for which `pred` holds and returns them.
  std::vector<Region> RemoveIf(const std::function<bool(const Region&)>& pred);
  // Applies `update` to the region starting exactly at `base`; false if there is none.
  bool Update(uintptr_t base, const std::function<void(Region&)>& update);

  // The region containing `addr`.
  std::optional<Region> Find(uintptr_t addr) const;
  bool Overlaps(uintptr_t addr, size_t len) const;
  MemClass Classify(uintptr_t addr, int* device) const;

  // [addr, addr + len) lies in regions the fake handed out, back to back, each readable (and
  // writable when `write`). CUDA_ERROR_INVALID_VALUE otherwise. len 0 checks addr only.
  CUresult CheckAccess(uintptr_t addr, size_t len, bool write) const;

 private:
  // The region containing addr, or end().
  std::map<uintptr_t, Region>::const_iterator FindLocked(uintptr_t addr) const
      FAKECUDA_SHARED_LOCKS_REQUIRED(mu_);

  mutable SharedMutex mu_;
  std::map<uintptr_t, Region> regions_ FAKECUDA_GUARDED_BY(mu_);  // by base address
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_ADDRESS_SPACE_H_
