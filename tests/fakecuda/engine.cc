#include "engine.h"

#include <algorithm>

#include "pcie_link.h"

namespace fakecuda {

ComputeEngine::ComputeEngine(SharedState* shared, bool shared_model)
    : shared_(shared), shared_model_(shared_model) {}

void ComputeEngine::Run(int device, uint64_t duration_ns, const std::function<void()>& effect) {
  const uint64_t now = MonotonicNowNs();
  uint64_t start = now;
  uint64_t end = now + duration_ns;
  if (shared_model_) {
    std::atomic_ref<uint64_t> busy = shared_->EngineBusyUntil(device);
    uint64_t old = busy.load();
    do {
      start = std::max(now, old);
      end = start + duration_ns;
    } while (!busy.compare_exchange_weak(old, end));
    SleepUntilNs(start);
  }
  if (effect) effect();
  SleepUntilNs(end);
  completed_[device].fetch_add(1, std::memory_order_acq_rel);
}

uint64_t ComputeEngine::BusyUntilNs(int device) const {
  return shared_->EngineBusyUntil(device).load();
}

uint64_t ComputeEngine::KernelsRun(int device) const {
  return completed_[device].load(std::memory_order_acquire);
}

}  // namespace fakecuda
