// The frees of cuMemFreeAsync that wait for their stream: each is an event recorded on the
// stream at the free and the freed allocation's table entry; once the event has completed, the
// allocation is released through the callback the owner gave (MemoryManager: its FreeManaged).
// Until then the memory stays mapped, so work queued before the free still finds it.
// Thread-safety: every method may be called from any thread. The release callback runs on the
// thread that reaps, with no lock of this class held.
#ifndef MISSILE_LIBINTERCEPT_DEFERRED_FREES_H_
#define MISSILE_LIBINTERCEPT_DEFERRED_FREES_H_

#include <cuda.h>

#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "allocation_table.h"
#include "driver_api.h"

namespace missile::shim {

class DeferredFrees {
 public:
  using Release = std::function<void(CUdeviceptr ptr, const AllocationTable::Entry& entry)>;

  // `api` must outlive this.
  DeferredFrees(const DriverApi& api, Release release);
  DeferredFrees(const DeferredFrees&) = delete;
  DeferredFrees& operator=(const DeferredFrees&) = delete;

  // A new event recorded on `stream` (per-thread default stream semantics if `ptsz`): the point
  // a free waits for. On the driver's error nothing is left behind.
  CUresult RecordEvent(CUstream stream, bool ptsz, CUevent* event);
  // Destroys an event recorded for a free that did not happen.
  void Discard(CUevent event) { api_.EventDestroy(event); }
  // Releases `entry` (at `ptr`) once `event` has completed: at a later Reap.
  void Add(CUevent event, CUdeviceptr ptr, const AllocationTable::Entry& entry)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Releases the frees whose streams reached them; with `wait`, waits until every stream has.
  void Reap(bool wait) ABSL_LOCKS_EXCLUDED(mu_);
  // Frees waiting (tests).
  size_t pending() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct Pending {
    CUevent event;
    CUdeviceptr ptr;
    CUcontext ctx;
  };

  const DriverApi& api_;
  const Release release_;
  mutable absl::Mutex mu_;
  std::vector<Pending> pending_ ABSL_GUARDED_BY(mu_);
  // The entry of each pending free: the release needs its kind and device.
  absl::flat_hash_map<CUdeviceptr, AllocationTable::Entry> entries_ ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_DEFERRED_FREES_H_
