// The simulated compute engine: one per device, shared by every process of the machine through
// the shared state, like the PCIe link (pcie_link.h).
//
// A kernel reaching the head of its stream reserves the interval [max(now, busy_until),
// +duration) on its device's engine, sleeps until the interval starts, applies its data effect,
// and sleeps until the interval ends. So kernels of all processes and streams on one device run
// one at a time. (The effect is applied at the start of the interval, as the link copies, so
// that a kernel's completion does not lag its interval by the time the effect takes.)
//
// Which process goes next is the GPU's time-slicing between contexts:
// - FAKECUDA_TIMESLICE_US=0 (the default): turns at kernel granularity, in the order kernels
//   reach the heads of their streams. A kernel that arrives while another is reserved waits for
//   it, and a process keeping a long queue roughly halves the kernel rate of another that
//   launches one kernel at a time.
// - FAKECUDA_TIMESLICE_US=N: like the GPU, the process that holds the engine keeps it while it
//   has work (kernels launched and not finished, on any stream), for up to N us once another
//   process waits; the waiting one gets it when the slice ends or when the holder runs dry. So
//   a process that keeps the engine fed delays a process launching one kernel at a time by up
//   to a slice per kernel. The streams of the slice holder take turns per kernel. A holder that
//   reserves nothing for a whole slice (gone, or stuck) loses it.
//
// With the model off (FAKECUDA_ENGINE=0) a kernel takes its duration from the moment it reaches
// the head of its stream and shares nothing. Thread-safe and process-safe.

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
  // shared_model false: kernels do not reserve the machine-wide engine. timeslice_ns 0: turns at
  // kernel granularity.
  ComputeEngine(SharedState* shared, bool shared_model, uint64_t timeslice_ns);

  // Runs a kernel of `duration_ns` on `device`: `effect` (may be empty) at the start of its
  // interval; returns when the interval has ended.
  void Run(int device, uint64_t duration_ns, const std::function<void()>& effect);

  // An operation was queued on a stream of `device` / has run: what the time slices count as
  // this process having work (a GPU context with commands in its queue).
  void Enqueued(int device);
  void Finished(int device);

  // The end of everything reserved on the device's engine so far, by any process.
  uint64_t BusyUntilNs(int device) const;
  // Kernels this process completed on the device.
  uint64_t KernelsRun(int device) const;

 private:
  // The interval's start under kernel-granular turns (a lock-free reservation).
  uint64_t ReserveInTurn(int device, uint64_t duration_ns);
  // The interval's start under time slices: waits, polling, until this process holds the slice.
  uint64_t ReserveInSlice(int device, uint64_t duration_ns);

  // Tells the slice state this process's pending count while it holds the slice.
  void Publish(int device);

  SharedState* shared_;
  bool shared_model_;
  uint64_t timeslice_ns_;
  std::array<std::atomic<uint64_t>, kMaxDevices> completed_{};
  std::array<std::atomic<uint64_t>, kMaxDevices> pending_{};
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_ENGINE_H_
