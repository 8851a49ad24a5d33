// The machine-wide state of the fake, shared by every process that uses the same FAKECUDA_SHM:
// the simulated PCIe links (pcie_link.h), the compute engines (engine.h) and the synthetic
// physical frames (phys_allocator.h).
//
// A POSIX shared-memory file (/dev/shm/<name>) with a magic/version header. It is created fully
// initialised under a temporary name and then link()ed into place, so a process never sees a
// half-written file and creation races need no lock. All fields after the header's constant part
// are only accessed through std::atomic_ref (lock-free, address-free 64-bit atomics), and nothing
// in it is a lock, so a process killed at any point leaves it consistent.
//
// The first process fixes the geometry (total memory per device, shuffle seed); a later process
// with different settings gets an error telling it to use another FAKECUDA_SHM.
// Thread-safe: the object is immutable after Open; the memory is accessed atomically.

#ifndef MISSILE_TESTS_FAKECUDA_SHARED_STATE_H_
#define MISSILE_TESTS_FAKECUDA_SHARED_STATE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include "config.h"

namespace fakecuda {

inline constexpr int kHolderSlots = 7;

// One 2 MiB physical frame: the processes holding it (see phys_allocator.h). 64 bytes.
struct alignas(64) ShmFrame {
  uint64_t holders[kHolderSlots];  // holder ids, 0 = empty slot
  uint64_t overflow;               // holders that found no free slot
};

// A device's compute engine as every process sees it (engine.h says how it is used).
struct alignas(64) EngineSlice {
  uint64_t busy_until_ns;   // end of the last reserved interval (also read without the lock)
  uint64_t owner;           // pid holding the time slice, 0: none
  uint64_t slice_start_ns;  // when the owner's slice began
  uint64_t waiting;         // pid of a process waiting for the slice, 0: none
  uint64_t owner_pending;   // the owner's kernels launched and not finished
  uint32_t lock;            // spin lock over the fields above; held for a few loads and stores
};

class SharedState {
 public:
  // Opens the state named config.shm_name, creating it if missing. nullptr and *error on failure.
  static std::unique_ptr<SharedState> Open(const Config& config, std::string* error);
  ~SharedState();
  SharedState(const SharedState&) = delete;
  SharedState& operator=(const SharedState&) = delete;

  // CLOCK_MONOTONIC ns until which the link of (device, direction) is reserved.
  std::atomic_ref<uint64_t> LinkBusyUntil(int device, int direction) const;
  // CLOCK_MONOTONIC ns until which the compute engine of `device` is reserved.
  std::atomic_ref<uint64_t> EngineBusyUntil(int device) const;
  // The device's engine: its reservation and time-slice state, for the engine model.
  EngineSlice* Engine(int device) const;
  // Next index into the device's frame order (phys_allocator.h).
  std::atomic_ref<uint64_t> Cursor(int device) const;
  ShmFrame* Frame(int device, uint64_t index) const;
  uint64_t frames_per_device() const { return frames_per_device_; }

 private:
  SharedState(void* base, size_t size, uint64_t frames_per_device);

  void* base_;
  size_t size_;
  uint64_t frames_per_device_;
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_SHARED_STATE_H_
