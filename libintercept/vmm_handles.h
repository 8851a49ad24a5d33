// The reference counts of the program's own VMM handles (cuMemCreate served from a daemon
// block), so the block goes back once nothing uses it.
//
// A handle is referenced by its creation and each cuMemRetainAllocationHandle, and dropped by
// each cuMemRelease; every live cuMemMap of it keeps it too, as the driver does. When both
// counts reach zero the handle is forgotten and its block is handed back to the caller to
// return. The tracker calls no driver and no daemon: the memory manager does, around it.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_VMM_HANDLES_H_
#define MISSILE_LIBINTERCEPT_VMM_HANDLES_H_

#include <cuda.h>

#include <cstdint>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"

namespace missile::shim {

class GpuMemory;

class VmmHandles {
 public:
  // A block no handle or mapping refers to any more.
  struct Unused {
    GpuMemory* owner;  // the GPU state that leased it
    uint64_t block;
    uint64_t bytes;
  };

  // A new handle (one reference, no mapping) for `block` of `owner`.
  void Add(CUmemGenericAllocationHandle handle, GpuMemory* owner, uint64_t block, uint64_t bytes)
      ABSL_LOCKS_EXCLUDED(mu_);
  bool Contains(CUmemGenericAllocationHandle handle) const ABSL_LOCKS_EXCLUDED(mu_);
  // One more reference (no-op for a handle the tracker does not know).
  void Retained(CUmemGenericAllocationHandle handle) ABSL_LOCKS_EXCLUDED(mu_);
  // One reference fewer; the block, if that was the last use.
  std::optional<Unused> Released(CUmemGenericAllocationHandle handle) ABSL_LOCKS_EXCLUDED(mu_);
  // `handle` mapped at [ptr, ptr + size).
  void Mapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Every tracked mapping that starts in [ptr, ptr + size) is gone; the blocks that were their
  // handles' last use.
  std::vector<Unused> Unmapped(CUdeviceptr ptr, size_t size) ABSL_LOCKS_EXCLUDED(mu_);

  // For tests: the counts of a handle, {references, mappings}.
  std::optional<std::pair<int, int>> CountsOf(CUmemGenericAllocationHandle handle) const
      ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Handle {
    GpuMemory* owner;
    uint64_t block;
    uint64_t bytes;
    int refs = 1;      // handle references: create + retains - releases
    int mappings = 0;  // live cuMemMap ranges
  };
  // Forgets `handle` if nothing uses it any more, and says what it held.
  std::optional<Unused> TakeIfUnused(CUmemGenericAllocationHandle handle)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<CUmemGenericAllocationHandle, Handle> handles_ ABSL_GUARDED_BY(mu_);
  // Mapping start -> {handle, size}.
  absl::btree_map<CUdeviceptr, std::pair<CUmemGenericAllocationHandle, size_t>> maps_
      ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_VMM_HANDLES_H_
