// The pacing regions of one GPU: shared memory between missiled and the tenants of that GPU, so
// that a best-effort (BE) tenant's shim can see, without asking anyone, whether a
// latency-sensitive (LS) tenant has work on the GPU, and hold its own submissions while one does.
//
// Why host-side and shared memory: the GPU time-slices the contexts of different processes, and
// any BE work queued on the GPU (a kernel, a copy, even a stream parked on a host flag) makes the
// BE context runnable and costs the LS up to a time slice (docs/hardware/h200.md). So the BE must
// not submit while the LS is busy, and the signal must be as fast as a memory read.
//
// Two kinds of region, so that every tenant can write only what is its own (docs/pacing.md,
// "What a tenant can and cannot write"):
//   Directory  one page per GPU, written by the daemon alone: the policy every shim obeys and
//              one entry per tenant session (session id, class, weight, pid, and the epoch of
//              its lanes page). Sealed read-only for every mapping but the daemon's
//              (shm_region.h), so no tenant can rewrite the policy, claim a class or a slot.
//   LanesPage  one page per (tenant session, GPU), written by that tenant and the GPU alone:
//     lanes     one per stream the tenant submits work on. `submitted` is the lane's sequence
//               number of the last work item, written by the host before the work is
//               enqueued; `completed` is written by the GPU itself (cuStreamWriteValue64 of the
//               item's sequence number, enqueued right after the item on the same stream), so
//               submitted != completed means "work in flight".
//     last_submit_ns  CLOCK_MONOTONIC of the tenant's last submission.
//     figures   BE: time held, items in flight, GPU time accounted (the weighted share).
//   The daemon creates the page sealed at its size and hands the tenant its only writable
//   descriptor; the tenant maps it and seals it against every later writable mapping. Only
//   then does the daemon publish the page's epoch in the directory and give read-only
//   descriptors of it to the BE tenants of the GPU (the only readers besides the daemon).
// A lanes page is its tenant's own report, and its tenant may lie: every reader goes through
// ReadLanes, which bounds each value (a submission in the future is no submission, counts and
// times are clamped), and a busy LS counts only while its last submission is younger than the
// published stale bound, so an LS that hangs or lies cannot stop the BE tenants for longer.
// Thread-safety: every shared word is a std::atomic of a lock-free type (the layout is
// identical in every process of the machine).
#ifndef MISSILE_COMMON_PACING_REGION_H_
#define MISSILE_COMMON_PACING_REGION_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace missile::pacingreg {

inline constexpr uint32_t kMagic = 0x4d504143;  // "MPAC"
inline constexpr uint32_t kVersion = 6;
inline constexpr uint32_t kSlots = 64;   // tenant sessions per GPU
inline constexpr uint32_t kLanes = 96;   // streams per tenant tracked separately
inline constexpr size_t kPage = 4096;

// Values of Entry::cls.
enum SlotClass : uint32_t { kFree = 0, kLs = 1, kBe = 2 };

// Values of LanesPage::reserve_state: what a BE tenant's shim does about the LS reserve of TPCs.
enum ReserveState : uint32_t {
  kReserveOff = 0,          // none asked for, no LS tenant on the GPU, or not tried yet
  kReserveActive = 1,       // its kernels leave reserve_tpcs TPCs free
  kReserveNotMps = 2,       // time-sliced: LS and BE never share the SMs, nothing to reserve
  kReserveUnavailable = 3,  // the driver's TPC masks did not work as verified: no mask
};

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
  std::atomic<uint64_t> generation;      // bumped on every change of the policy
  std::atomic<uint32_t> ls_tenants;      // entries of class kLs (0: nothing to scan)
  std::atomic<uint32_t> be_tenants;      // entries of class kBe (0: LS tenants need not mark)
  std::atomic<uint64_t> members;         // bumped on every change of the entries
  // TPCs a BE tenant's kernels leave free for LS tenants while one is on the GPU, on MPS
  // (libintercept/tpc_mask.h); 0: none.
  std::atomic<uint32_t> ls_reserve_tpcs;
  // The LS latency budget (pacing/budget.h), in percent of the alone time.
  std::atomic<uint32_t> ls_budget_pct;
  // Set by missiled's budget controller, not by the configuration: while it relearns the LS
  // tenants' alone durations, a time until which BE tenants submit nothing at all.
  std::atomic<uint64_t> quiet_until_ns;
  // Released LS tenants rest this long between checks ([compute] ls_rest_ms; 0: never).
  std::atomic<uint64_t> ls_rest_ns;
  // Set by missiled's budget controller: a time until which LS tenants mark nothing (their
  // budgets released the BE with room to spare); 0: none.
  std::atomic<uint64_t> rest_until_ns;
};

// One tenant session of the GPU, written by the daemon.
struct Entry {
  std::atomic<uint64_t> session;      // owning session id, 0 = free
  std::atomic<uint64_t> lanes_epoch;  // its lanes page, once sealed; 0 = none (yet)
  std::atomic<uint32_t> cls;          // SlotClass
  std::atomic<uint32_t> weight;       // the tenant's weight (BE share), > 0
  std::atomic<int32_t> pid;
  // LS: the share of its busy time BE work may use now, set by missiled's budget controller
  // (parts per million; 0: none, the BE waits while this LS is busy).
  std::atomic<uint32_t> be_share_ppm;
  // LS: the BE tenants' in-flight window, times this (1..pacing::kMaxWindowScale; 0 reads as
  // 1), set by the same controller once the share is at its bound.
  std::atomic<uint32_t> be_window_scale;
};

struct alignas(kPage) Directory {
  uint32_t magic;
  uint32_t version;
  uint32_t slots;
  uint32_t lanes;
  Policy policy;
  Entry entries[kSlots];
};

struct alignas(kPage) LanesPage {
  uint32_t magic;    // written by the tenant when it maps the page
  uint32_t version;
  std::atomic<uint64_t> last_submit_ns;
  std::atomic<uint64_t> held_ns;      // BE: total time its submissions were held (ended holds)
  std::atomic<uint64_t> held_count;   // BE: submissions that were held at all
  std::atomic<uint64_t> hold_since_ns;  // BE: start of the oldest hold going on now, 0: none
  std::atomic<uint64_t> inflight;     // BE: items in flight now
  std::atomic<uint64_t> gpu_ns;       // BE: GPU time accounted (for the weighted share)
  std::atomic<uint64_t> submissions;  // every item marked (LS and BE)
  std::atomic<uint64_t> running_until_ns;  // BE: its predicted work in flight ends then
  std::atomic<uint32_t> active;       // BE: 1 while it has work to submit or in flight
  std::atomic<uint32_t> lanes_used;   // lanes [0, lanes_used) have been assigned
  std::atomic<uint32_t> reserve_state;  // BE: ReserveState
  std::atomic<uint32_t> reserve_tpcs;   // BE: TPCs its kernels leave free now (kReserveActive)
  // LS: the sum of the keys of every item marked (wraps): with `submissions`, what work a busy
  // period held, so missiled compares it with the same work alone.
  std::atomic<uint64_t> work_sum;
  // 1: its context on this GPU is an MPS client (CU_DEVICE_ATTRIBUTE_MPS_ENABLED), so what
  // missiled learns of an LS alone is the LS alone on MPS; anything else: not, or not known.
  std::atomic<uint32_t> mps_client;
  alignas(64) Lane lanes[kLanes];
};

static_assert(sizeof(Directory) == kPage);
static_assert(sizeof(LanesPage) == kPage);
static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

// Initialises a zeroed directory's header (the daemon, once).
void InitDirectory(Directory* d);
// Initialises a zeroed lanes page (its tenant, once, before sealing it).
void InitLanes(LanesPage* p);

// CLOCK_MONOTONIC in nanoseconds: the clock every timestamp in the regions uses.
uint64_t NowNs();

// Bounds on what a reader takes from a lanes page.
// A submission time later than the reader's clock by more than this is no submission (one
// process's store can land between another's clock read and its load, so a little is normal).
inline constexpr uint64_t kClockSlackNs = 1'000'000;
// The most predicted work a BE can have in flight ([compute] window_us is at most 1 s).
inline constexpr uint64_t kMaxRunAheadNs = 1'000'000'000;
// GPU time beyond this (2^56 ns, 2.3 years) is a lie; clamped so weighted sums cannot overflow.
inline constexpr uint64_t kMaxGpuNs = uint64_t{1} << 56;
// Items in flight beyond this are a lie ([compute] window_items is at most 1024).
inline constexpr uint64_t kMaxInflight = 1024;

// A lanes page as a reader may use it at `now`: every value bounded.
struct LanesView {
  bool in_flight = false;         // some used lane has submitted != completed
  uint64_t last_submit_ns = 0;    // <= now; 0: none (or one in the future)
  uint64_t gpu_ns = 0;            // <= kMaxGpuNs
  uint64_t running_until_ns = 0;  // <= now + kMaxRunAheadNs
  uint64_t inflight = 0;          // <= kMaxInflight
  uint64_t held_ns = 0;           // ended holds plus the one going on (from hold_since_ns <= now)
  uint64_t held_count = 0;
  uint64_t submissions = 0;
  uint64_t work_sum = 0;
  bool active = false;
  uint32_t reserve_state = kReserveOff;  // a ReserveState (an unknown value reads as off)
  uint32_t reserve_tpcs = 0;             // <= 128, 0 unless kReserveActive
  bool mps_client = false;               // the page says 1 (anything else reads as not)
};

// Reads a lanes page that its tenant may have filled with anything. Pure apart from the loads.
LanesView ReadLanes(const LanesPage& p, uint64_t now);

}  // namespace missile::pacingreg

#endif  // MISSILE_COMMON_PACING_REGION_H_
