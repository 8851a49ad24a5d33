// Synthetic physical addresses for VMM chunks, allocated machine-wide.
//
// Each device has total_mem / 2 MiB frames in the shared state. A chunk of k * 2 MiB gets k
// contiguous frames; its physical address is frame * 2 MiB. By default frames are handed out in
// increasing order (a machine-wide cursor that wraps, skipping frames in use); with
// FAKECUDA_PHYS_SHUFFLE=<seed> the cursor walks a seeded random permutation of the frames instead
// (the same in every process), so tests cannot depend on allocation order.
//
// A frame is in use while some process holds a chunk on it: the creator claims it, every process
// that imports the chunk adds itself as a holder, and each removes itself when its last handle and
// mapping of the chunk are gone. Holder ids are (pid, start time) so a recycled pid is not taken
// for a holder. When no free frame is left, frames whose holders are all dead processes (killed,
// or exited without releasing) are reclaimed. A chunk held by more than 7 processes at once counts
// the extra holders in an overflow counter, which is not reclaimed after a crash.
// Lock-free across processes; thread-safe within one.

#ifndef MISSILE_TESTS_FAKECUDA_PHYS_ALLOCATOR_H_
#define MISSILE_TESTS_FAKECUDA_PHYS_ALLOCATOR_H_

#include <cuda.h>

#include <cstdint>
#include <mutex>
#include <vector>

#include "config.h"
#include "shared_state.h"
#include "thread_annotations.h"

namespace fakecuda {

class PhysAllocator {
 public:
  PhysAllocator(SharedState* shared, const Config& config);

  // Claims frames for `bytes` (a multiple of 2 MiB) on `device`; CUDA_ERROR_OUT_OF_MEMORY when
  // no run of free frames is left.
  CUresult Allocate(int device, uint64_t bytes, uint64_t* phys);
  // This process starts / stops holding the frames of a chunk (import / last release).
  void AddHolder(int device, uint64_t phys, uint64_t bytes);
  void RemoveHolder(int device, uint64_t phys, uint64_t bytes);

  uint64_t self_id() const { return self_id_; }

 private:
  uint64_t FrameAt(int device, uint64_t order_index) FAKECUDA_LOCKS_EXCLUDED(mu_);
  bool TryClaimRun(int device, uint64_t first, uint64_t count);
  void ReleaseFrame(int device, uint64_t frame);
  // Clears the holder slots of dead processes on the device; true if any was cleared.
  bool ReclaimDead(int device);

  SharedState* shared_;
  bool shuffle_;
  uint64_t seed_;
  uint64_t frames_;
  uint64_t self_id_;
  Mutex mu_;
  std::vector<std::vector<uint32_t>> permutations_ FAKECUDA_GUARDED_BY(mu_);  // per device
};

// Channel of `phys` under the masks: bit i of the result is the parity of (phys & masks[i]).
int ChannelOf(const std::vector<uint64_t>& masks, uint64_t phys);

// (pid << 32) | low 32 bits of the process start time, a holder id that survives pid reuse.
uint64_t HolderIdOf(int pid);

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_PHYS_ALLOCATOR_H_
