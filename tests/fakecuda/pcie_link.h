// The simulated PCIe link: one first-in first-out DMA queue per device and direction, shared by
// every process of the machine through the shared state.
//
// A transfer of n bytes atomically reserves the interval [max(now, busy_until), +n/rate) on its
// queue's busy_until (a CAS loop on CLOCK_MONOTONIC nanoseconds), sleeps until the interval starts
// (its turn), performs the copy, and sleeps until the interval ends. So the data moves during the
// transfer's own interval, a transfer completes no earlier than everything queued before it by
// any process, and a big copy from one process delays a small copy from another, like the
// hardware. (The copy runs at the start of the interval rather than after it so that a copy's
// completion does not lag its interval by the time memcpy takes.)
// Thread-safe and process-safe; no locks.

#ifndef MISSILE_TESTS_FAKECUDA_PCIE_LINK_H_
#define MISSILE_TESTS_FAKECUDA_PCIE_LINK_H_

#include <cstdint>
#include <functional>

#include "shared_state.h"

namespace fakecuda {

enum class Direction : int { kHostToDevice = 0, kDeviceToHost = 1 };

// CLOCK_MONOTONIC in nanoseconds (the clock the link state is kept in, the same in all processes).
uint64_t MonotonicNowNs();
// Sleeps until CLOCK_MONOTONIC reaches `deadline_ns`.
void SleepUntilNs(uint64_t deadline_ns);

class PcieLink {
 public:
  // bytes_per_us <= 0 turns the model off: Transfer just copies.
  PcieLink(SharedState* shared, double bytes_per_us);

  // Runs `copy` as an n-byte transfer on the queue of (device, direction); returns after the
  // transfer's interval has ended.
  void Transfer(int device, Direction direction, uint64_t bytes,
                const std::function<void()>& copy) const;

  uint64_t BusyUntilNs(int device, Direction direction) const;

 private:
  SharedState* shared_;
  double bytes_per_us_;
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_PCIE_LINK_H_
