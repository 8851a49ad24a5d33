#include "missile/common/pacing_region.h"

#include <time.h>

#include <algorithm>

namespace missile::pacingreg {

void InitDirectory(Directory* d) {
  d->magic = kMagic;
  d->version = kVersion;
  d->slots = kSlots;
  d->lanes = kLanes;
}

void InitLanes(LanesPage* p) {
  p->magic = kMagic;
  p->version = kVersion;
}

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1'000'000'000ull + static_cast<uint64_t>(ts.tv_nsec);
}

namespace {

// A time stamp the tenant wrote, as a reader at `now` may use it: 0 when it is in the future
// by more than the clock slack, `now` when it is within it.
uint64_t PastTime(uint64_t t, uint64_t now) {
  if (t <= now) return t;
  return t - now <= kClockSlackNs ? now : 0;
}

}  // namespace

LanesView ReadLanes(const LanesPage& p, uint64_t now) {
  LanesView v;
  const uint32_t used = std::min(p.lanes_used.load(std::memory_order_acquire), kLanes);
  for (uint32_t l = 0; l < used && !v.in_flight; ++l) {
    v.in_flight = p.lanes[l].submitted.load(std::memory_order_acquire) !=
                  p.lanes[l].completed.load(std::memory_order_acquire);
  }
  v.last_submit_ns = PastTime(p.last_submit_ns.load(std::memory_order_acquire), now);
  v.gpu_ns = std::min(p.gpu_ns.load(std::memory_order_relaxed), kMaxGpuNs);
  v.running_until_ns =
      std::min(p.running_until_ns.load(std::memory_order_relaxed), now + kMaxRunAheadNs);
  v.inflight = std::min(p.inflight.load(std::memory_order_relaxed), kMaxInflight);
  v.held_ns = std::min(p.held_ns.load(std::memory_order_relaxed), kMaxGpuNs);
  const uint64_t since = PastTime(p.hold_since_ns.load(std::memory_order_relaxed), now);
  if (since != 0) v.held_ns += now - since;
  v.held_count = p.held_count.load(std::memory_order_relaxed);
  v.submissions = p.submissions.load(std::memory_order_relaxed);
  v.work_sum = p.work_sum.load(std::memory_order_relaxed);
  v.active = p.active.load(std::memory_order_relaxed) != 0;
  v.mps_client = p.mps_client.load(std::memory_order_relaxed) == 1;
  const uint32_t state = p.reserve_state.load(std::memory_order_relaxed);
  v.reserve_state = state <= kReserveUnavailable ? state : kReserveOff;
  if (v.reserve_state == kReserveActive) {
    v.reserve_tpcs = std::min(p.reserve_tpcs.load(std::memory_order_relaxed), uint32_t{128});
  }
  return v;
}

}  // namespace missile::pacingreg
