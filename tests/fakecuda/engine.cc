#include "engine.h"

#include <unistd.h>

#include <algorithm>

#include "pcie_link.h"

namespace fakecuda {
namespace {

// The slice state's spin lock: held for a few loads and stores, never across a sleep.
class SliceLock {
 public:
  explicit SliceLock(EngineSlice* e) : lock_(e->lock) {
    while (lock_.exchange(1, std::memory_order_acquire) != 0) {
      while (lock_.load(std::memory_order_relaxed) != 0) {
      }
    }
  }
  ~SliceLock() { lock_.store(0, std::memory_order_release); }
  SliceLock(const SliceLock&) = delete;
  SliceLock& operator=(const SliceLock&) = delete;

 private:
  std::atomic_ref<uint32_t> lock_;
};

// How often a process waiting for the slice looks again.
constexpr uint64_t kPollNs = 10'000;

}  // namespace

ComputeEngine::ComputeEngine(SharedState* shared, bool shared_model, uint64_t timeslice_ns)
    : shared_(shared), shared_model_(shared_model), timeslice_ns_(timeslice_ns) {}

uint64_t ComputeEngine::ReserveInTurn(int device, uint64_t duration_ns) {
  const uint64_t now = MonotonicNowNs();
  std::atomic_ref<uint64_t> busy = shared_->EngineBusyUntil(device);
  uint64_t old = busy.load();
  uint64_t start = now;
  do {
    start = std::max(now, old);
  } while (!busy.compare_exchange_weak(old, start + duration_ns));
  return start;
}

uint64_t ComputeEngine::ReserveInSlice(int device, uint64_t duration_ns) {
  EngineSlice* e = shared_->Engine(device);
  const auto me = static_cast<uint64_t>(getpid());
  std::atomic_ref<uint64_t> busy(e->busy_until_ns);
  for (;;) {
    {
      SliceLock lock(e);
      const uint64_t now = MonotonicNowNs();
      const uint64_t until = busy.load(std::memory_order_relaxed);
      const uint64_t start = std::max(now, until);
      if (e->owner == me && e->waiting != 0 && e->waiting != me &&
          start >= e->slice_start_ns + timeslice_ns_) {
        // The slice is over and another process waits: it goes next.
        e->owner = e->waiting;
        e->waiting = 0;
        e->slice_start_ns = start;
      } else if (e->owner != me &&
                 (e->owner == 0 || (e->owner_pending == 0 && until <= now) ||
                  until + timeslice_ns_ <= now)) {
        // Nobody holds the engine, or the holder ran dry (or is gone): take it.
        e->owner = me;
        e->owner_pending = pending_[device].load();
        e->slice_start_ns = start;
        if (e->waiting == me) e->waiting = 0;
      }
      if (e->owner == me) {
        e->owner_pending = pending_[device].load();
        busy.store(start + duration_ns, std::memory_order_relaxed);
        return start;
      }
      if (e->waiting == 0) e->waiting = me;
    }
    SleepUntilNs(MonotonicNowNs() + kPollNs);
  }
}

void ComputeEngine::Run(int device, uint64_t duration_ns, const std::function<void()>& effect) {
  uint64_t start = MonotonicNowNs();
  if (shared_model_) {
    start = timeslice_ns_ == 0 ? ReserveInTurn(device, duration_ns)
                               : ReserveInSlice(device, duration_ns);
    SleepUntilNs(start);
  }
  if (effect) effect();
  SleepUntilNs(start + duration_ns);
  completed_[device].fetch_add(1, std::memory_order_acq_rel);
}

void ComputeEngine::Enqueued(int device) {
  pending_[device].fetch_add(1);
  Publish(device);
}

void ComputeEngine::Finished(int device) {
  pending_[device].fetch_sub(1);
  Publish(device);
}

void ComputeEngine::Publish(int device) {
  if (!shared_model_ || timeslice_ns_ == 0) return;
  EngineSlice* e = shared_->Engine(device);
  SliceLock lock(e);
  if (e->owner != static_cast<uint64_t>(getpid())) return;
  e->owner_pending = pending_[device].load();
  if (e->owner_pending == 0 && e->waiting != 0) {
    // Run dry with another process waiting: the GPU switches at once.
    e->owner = e->waiting;
    e->waiting = 0;
    e->owner_pending = 1;  // at least the kernel it waits with; it says more when it reserves
    e->slice_start_ns = std::max(MonotonicNowNs(), e->busy_until_ns);
  }
}

uint64_t ComputeEngine::BusyUntilNs(int device) const {
  return shared_->EngineBusyUntil(device).load();
}

uint64_t ComputeEngine::KernelsRun(int device) const {
  return completed_[device].load(std::memory_order_acquire);
}

}  // namespace fakecuda
