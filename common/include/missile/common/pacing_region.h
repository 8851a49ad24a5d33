// The pacing region: one per GPU, shared by missiled and every tenant of that GPU, so that a
// best-effort (BE) tenant's shim can see, without asking anyone, whether a latency-sensitive
// (LS) tenant has work on the GPU, and hold its own submissions while one does.
//
// Why host-side and shared memory: the GPU time-slices the contexts of different processes, and
// any BE work queued on the GPU (a kernel, a copy, even a stream parked on a host flag) makes the
// BE context runnable and costs the LS up to a time slice (docs/hardware/h200.md). So the BE must
// not submit while the LS is busy, and the signal must be as fast as a memory read.
//
// Layout: a header page (magic, version, the policy the daemon publishes), then kSlots slots of
// one page each. The daemon gives each tenant session one slot (writes `session`, `cls`,
// `weight`, `pid`; clears the slot when the session ends). A tenant writes only its own slot:
//   lanes     one per stream the tenant submits work on (assigned by the tenant). `submitted`
//             is the lane's sequence number of the last work item, written by the host before
//             the work is enqueued; `completed` is written by the GPU itself
//             (cuStreamWriteValue64 of the item's sequence number, enqueued right after the
//             item on the same stream), so submitted != completed means "work in flight".
//   last_submit_ns  CLOCK_MONOTONIC of the tenant's last submission.
//   stats     BE: time held, items in flight, GPU time accounted (for the weighted share);
//             shown by missilectl.
// Readers tolerate any contents: a slot whose lanes say "busy" counts only while its last
// submission is younger than the published stale bound, so an LS that hangs or lies cannot
// stop the BE tenants for longer than that, and the daemon clears the slot of a session that
// ends (the process died, or left).
// Thread-safety: every shared word is a std::atomic of a lock-free type (the layout is
// identical in every process of the machine).
#ifndef MISSILE_COMMON_PACING_REGION_H_
#define MISSILE_COMMON_PACING_REGION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace missile::pacingreg {

inline constexpr uint32_t kMagic = 0x4d504143;  // "MPAC"
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kSlots = 64;   // tenant sessions per GPU
inline constexpr uint32_t kLanes = 96;   // streams per tenant tracked separately
inline constexpr size_t kPage = 4096;

// Values of Slot::cls.
enum SlotClass : uint32_t { kFree = 0, kLs = 1, kBe = 2 };

struct alignas(32) Lane {
  std::atomic<uint64_t> submitted;  // host: sequence number of the last item enqueued
  std::atomic<uint64_t> completed;  // GPU: sequence number of the last item finished
  std::atomic<uint64_t> stream;     // host: which stream (diagnostics only)
  uint64_t reserved;
};

// What the daemon publishes for every tenant of the GPU ([compute] in missiled.toml and
// `missilectl set`). Read by the shims at every decision, so changes apply at once.
struct alignas(64) Policy {
  std::atomic<uint32_t> pacing;          // 1: BE tenants are paced; 0: pass through
  std::atomic<uint32_t> window_items;    // BE items in flight per tenant, at most
  std::atomic<uint64_t> window_ns;       // BE predicted work in flight per tenant, at most
  std::atomic<uint64_t> ls_idle_ns;      // an LS counts as busy this long after its last work
  std::atomic<uint64_t> ls_stale_ns;     // an LS mark older than this is ignored
  std::atomic<uint64_t> max_hold_ns;     // a BE held this long goes ahead with one item
  std::atomic<uint64_t> unknown_ns;      // predicted duration of work never seen before
  std::atomic<uint64_t> share_slack_ns;  // BE tenants' GPU time may differ by this (weighted)
  std::atomic<uint64_t> refill_ns;       // a BE item goes once less than this is left in flight
  std::atomic<uint64_t> generation;      // bumped on every change
  std::atomic<uint32_t> ls_tenants;      // slots of class kLs (0: nothing to scan)
  std::atomic<uint32_t> be_tenants;      // slots of class kBe (0: LS tenants need not mark)
};

struct alignas(kPage) Header {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  uint32_t lanes;
  Policy policy;
};

struct alignas(kPage) Slot {
  std::atomic<uint64_t> session;   // daemon: owning session id, 0 = free
  std::atomic<uint32_t> cls;       // daemon: SlotClass
  std::atomic<uint32_t> weight;    // daemon: the tenant's weight (BE share)
  std::atomic<int32_t> pid;        // daemon
  uint32_t reserved0;
  // Written by the tenant.
  std::atomic<uint64_t> last_submit_ns;
  std::atomic<uint64_t> held_ns;      // BE: total time its submissions were held
  std::atomic<uint64_t> held_count;   // BE: submissions that were held at all
  std::atomic<uint64_t> inflight;     // BE: items in flight now
  std::atomic<uint64_t> gpu_ns;       // BE: GPU time accounted (for the weighted share)
  std::atomic<uint32_t> active;       // BE: 1 while it has work to submit or in flight
  std::atomic<uint32_t> lanes_used;   // lanes [0, lanes_used) have been assigned
  std::atomic<uint64_t> submissions;  // every item marked (LS and BE)
  std::atomic<uint64_t> running_until_ns;  // BE: its predicted work in flight ends then
  alignas(64) Lane lanes[kLanes];
};

struct Region {
  Header header;
  Slot slots[kSlots];
};

inline constexpr size_t kRegionBytes = sizeof(Region);

static_assert(sizeof(Header) == kPage);
static_assert(sizeof(Slot) == kPage);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Initialises a zeroed region's header (the daemon, once).
void InitRegion(Region* r);

// CLOCK_MONOTONIC in nanoseconds: the clock every timestamp in the region uses.
uint64_t NowNs();

}  // namespace missile::pacingreg

#endif  // MISSILE_COMMON_PACING_REGION_H_
