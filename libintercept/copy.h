// Which copies cross PCIe, and which GPU's copy gate (copy_gate.h, owned by the GPU's
// SessionGpu, session_gpu.h) a copy goes through.
//
// A copy is scheduled when it moves between host and device memory, is at least the daemon's
// bypass size, is not being captured into a CUDA graph, and the daemon is reachable. Each GPU's
// gate belongs to one daemon session; after a restarted daemon takes the process back, the next
// copy opens a new gate in the new session. Device
// memory is Missile's own allocations or whatever the driver reports as device memory; host
// memory is pinned (the driver knows it) or pageable (it does not). Everything else passes
// straight to the driver.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_COPY_H_
#define MISSILE_LIBINTERCEPT_COPY_H_

#include <cuda.h>

#include <atomic>

#include "copy_gate.h"
#include "driver_api.h"
#include "allocation_table.h"
#include "session_gpu.h"
#include "session_manager.h"

namespace missile::shim {

enum class MemKind { kDevice, kPinnedHost, kPageableHost, kOther };

class CopyManager {
 public:
  // `sessions` and `allocations` (Missile's device allocations) must outlive the manager.
  CopyManager(const DriverApi& api, SessionManager* sessions, const AllocationTable* allocations)
      : api_(api), sessions_(sessions), allocations_(allocations) {}

  // The gate for a copy of `bytes` whose device side is `device_memory`, or null when the copy
  // is not scheduled (too small, no daemon, stream being captured). The gate is that of the GPU
  // holding the memory, which is the link the copy crosses, whatever context is current: with
  // unified addressing a thread may copy another GPU's memory. The GPU the hook resolved for
  // `call` (the current context's) is used when `device_memory` is 0 (an array) or the driver
  // does not say, and when the memory is on that GPU.
  CopyGate* GateFor(const WorkCall& call, uint64_t bytes, CUdeviceptr device_memory);
  // The same for an asynchronous copy on `stream` (the call's stream): not while it is captured.
  CopyGate* GateForAsync(WorkCall& call, uint64_t bytes, CUdeviceptr device_memory,
                         CUstream stream, bool ptsz);

  // Whether a copy of `bytes` is too small ever to be scheduled (one atomic load).
  bool Bypassed(uint64_t bytes) const {
    return bytes < bypass_below_.load(std::memory_order_relaxed);
  }

  MemKind Classify(CUdeviceptr p);

  uint64_t scheduled() const { return scheduled_.load(std::memory_order_relaxed); }
  void CountScheduled() { scheduled_.fetch_add(1, std::memory_order_relaxed); }

 private:
  const DriverApi& api_;
  SessionManager* sessions_;
  const AllocationTable* allocations_;
  // Copies below this never need a gate; 0 until the first gate tells the daemon's setting.
  std::atomic<uint64_t> bypass_below_{0};
  std::atomic<uint64_t> scheduled_{0};
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_COPY_H_
