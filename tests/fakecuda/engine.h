// The simulated compute engine: one per device, shared by every process of the machine through
// the shared state, like the PCIe link (pcie_link.h).
//
// A kernel reaching the head of its stream atomically reserves the interval
// [max(now, busy_until), +duration) on its device's engine (a CAS loop on CLOCK_MONOTONIC
// nanoseconds), sleeps until the interval starts, applies its data effect, and sleeps until the
// interval ends. So kernels of all processes and streams on one device run one at a time, in the
// order they reached the head of their streams: the GPU time-slicing between processes at kernel
// granularity. A kernel that arrives while another is reserved waits for it, and a process with
// a long queue of kernels alternates with another one that keeps launching, roughly halving its
// rate. (The effect is applied at the start of the interval, as the link copies, so that a
// kernel's completion does not lag its interval by the time the effect takes.)
//
// With the model off (FAKECUDA_ENGINE=0) a kernel takes its duration from the moment it reaches
// the head of its stream and shares nothing. Thread-safe and process-safe; no locks.

#ifndef MISSILE_TESTS_FAKECUDA_ENGINE_H_
#define MISSILE_TESTS_FAKECUDA_ENGINE_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>

#include "config.h"
#include "shared_state.h"

namespace fakecuda {

class ComputeEngine {
 public:
  // shared_model false: kernels do not reserve the machine-wide engine.
  ComputeEngine(SharedState* shared, bool shared_model);

  // Runs a kernel of `duration_ns` on `device`: `effect` (may be empty) at the start of its
  // interval; returns when the interval has ended.
  void Run(int device, uint64_t duration_ns, const std::function<void()>& effect);

  // The end of everything reserved on the device's engine so far, by any process.
  uint64_t BusyUntilNs(int device) const;
  // Kernels this process completed on the device.
  uint64_t KernelsRun(int device) const;

 private:
  SharedState* shared_;
  bool shared_model_;
  std::array<std::atomic<uint64_t>, kMaxDevices> completed_{};
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_ENGINE_H_
