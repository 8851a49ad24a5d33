// Pacing best-effort (BE) GPU work next to latency-sensitive (LS) work: the decisions, as pure
// functions and small classes over plain numbers (nanoseconds of CLOCK_MONOTONIC, counts). The
// shim (libintercept/pacer.h) feeds them what it reads from the GPU's pacing region
// (common/pacing_region.h) and does what they say.
//
// The model, measured on the H200 (docs/hardware/h200.md): the GPU time-slices the contexts of
// different processes, so whatever BE work is queued when an LS request arrives delays it, up to
// a time slice. Missile therefore keeps BE work off the GPU while an LS tenant is busy (and for
// a short hysteresis after, since an eager LS leaves CPU gaps between its kernels), and while
// the LS is idle keeps the BE's work in flight small (a count and a predicted duration), so an
// arriving LS request waits at most for the residue of what is already running.
// Thread-safety: none of these classes lock; their owner serialises access.
#ifndef MISSILE_PACING_PACING_H_
#define MISSILE_PACING_PACING_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace missile::pacing {

// --- LS activity --------------------------------------------------------------------------

// What a BE reader saw of the LS tenants of its GPU at one moment.
struct LsObservation {
  bool in_flight = false;        // some LS lane had submitted != completed (and was not stale)
  uint64_t newest_submit_ns = 0;  // the latest LS submission of any non-stale LS tenant
  // The share of their busy time the busy LS tenants let BE work use (budget.h): the least of
  // theirs, or of every LS tenant's when none is busy now (parts per million).
  uint32_t share_ppm = 0;
  // The BE's in-flight window, times this (budget.h, kMaxWindowScale): the least of every LS
  // tenant's, busy or not. The window bounds what an LS that becomes busy finds ahead of it, so
  // an idle strict LS keeps it narrow beside a busy lax one.
  uint32_t window_scale = 1;
  // Every LS tenant of the GPU has taken its budget's last step (kUnheldSharePpm): nothing
  // paces the BE beside them, neither their busy time nor the window nor host-paced copies.
  bool released = false;
};

// Whether one LS tenant counts: a lane in flight counts only while the tenant's last submission
// is younger than `stale_ns` (and not in the future), so a hung, dead or lying LS cannot hold
// the BE tenants for ever.
bool LsInFlightCounts(bool lanes_in_flight, uint64_t last_submit_ns, uint64_t now,
                      uint64_t stale_ns);

// The LS busy state with hysteresis: busy while LS work is in flight, and for `idle_ns` after
// the last moment it was seen in flight or submitted (whichever is later).
class LsBusyTracker {
 public:
  bool Busy(const LsObservation& seen, uint64_t now, uint64_t idle_ns);
  // The moment the current quiet period began (for "resume idle_ns after"); 0 if never busy.
  uint64_t last_busy_ns() const { return last_busy_ns_; }

 private:
  uint64_t last_busy_ns_ = 0;
};

// --- The BE in-flight window --------------------------------------------------------------

// A duration sample for the predictor: how long item `key` ran, as observed.
struct DurationSample {
  uint64_t key;
  uint64_t ns;
  uint64_t start_ns;  // when the item could start (its batch's start)
};

// The BE's own items in flight on the GPU, on its lanes (one per stream, FIFO). An item is
// done once its lane's completed sequence number reaches the item's. Every paced BE launch asks
// the window, on the program's own thread, and a widened window holds up to kMaxItems: its cost
// per launch does not grow with the items in flight, only with the lanes that have some (each
// lane keeps its items in order, with the sums that RemainingNs needs kept as they come and go).
// A lane's items come in order of sequence number and of time (the pacer adds them under the
// lane's lock, stamped with the monotonic clock); lanes are few (pacing_region.h, kLanes).
class InflightWindow {
 public:
  struct Limits {
    uint32_t items = 8;          // in flight at most (at least one is always admitted)
    uint64_t predicted_ns = 0;   // predicted work in flight at most
    uint64_t refill_ns = 0;      // an item goes once less than this is left (0: never)
  };

  // `alone`: the item is reported done by itself (its lane's earlier items are reported before
  // it is submitted, and it is reported right after): its sample is its own, and the items
  // behind it on its lane cannot start before it ends, so until it is seen done they count in
  // full, however long it outlasts its prediction.
  // `teach`: the item's duration may be sampled (false for an item that goes while an LS tenant
  // is busy, under a budget: it shares the GPU with the LS's work, and its time is not its own).
  void Add(uint32_t lane, uint64_t seq, uint64_t key, uint64_t predicted_ns, uint64_t now,
           bool alone = false, bool teach = true);

  // Retires every item whose lane has completed it (`completed(lane)` gives the lane's
  // completed sequence number; asked once per lane with items in flight). `since_last_check_ns`:
  // how long ago the caller last looked, so how late a retire time may be; a duration sample is
  // appended when that lateness is small against the sample (at most 20 us, or an eighth of
  // it) and the items retired with it on its lane are kMaxSampleItems at most, in the order
  // the items were added. An item's duration counts from when it could start, the later of its
  // submission and the end of the item before it on its lane.
  template <typename Completed>
  void Retire(const Completed& completed, uint64_t now, uint64_t since_last_check_ns,
              std::vector<DurationSample>* samples);

  // Whether an item predicted to run `predicted_ns` may go now: with nothing in flight always;
  // else if the count allows and either the predicted work still to run (RemainingNs) plus the
  // new item fits in the limit, or what is left is under `refill_ns`. The second clause keeps
  // the GPU fed across the host's refill latency behind a long item: the residue an arriving LS
  // request meets is then at most refill_ns plus the new item, which has to run some time.
  bool Admits(uint64_t predicted_ns, const Limits& limits, uint64_t now) const;
  // The limits widened by an LS budget (budget.h): each times `scale` (at least 1), the items
  // at most kMaxItems.
  static constexpr uint32_t kMaxItems = 1024;
  static Limits Scaled(const Limits& limits, uint32_t scale);
  // How often a lane asks the GPU to report its items done under `limits` (a completion write
  // after every this many items): a quarter of the window's items, at least every
  // kMinMarkEvery-th and at most every kMaxMarkEvery-th. A write is a stream operation that
  // costs the BE GPU time; the window needs only a few per window's worth of items to see them
  // finish, so a window a budget widened (or the kMaxItems of a released BE) writes rarely.
  static constexpr uint32_t kMinMarkEvery = 4;
  static constexpr uint32_t kMaxMarkEvery = kMaxItems / 4;
  static uint32_t MarkEvery(const Limits& limits) {
    return std::clamp(limits.items / 4, kMinMarkEvery, kMaxMarkEvery);
  }
  // Items that retire together share their time (Retire); past this many, their mean says too
  // little of each to teach the predictor.
  static constexpr uint64_t kMaxSampleItems = 16;
  // Predicted work in flight not yet done: per lane, the predicted time of its items up to its
  // first `alone` one less the time since the first of them could start (never below 0), plus
  // the predicted time of the items behind that `alone` one in full.
  uint64_t RemainingNs(uint64_t now) const;
  size_t count() const { return count_; }
  uint64_t predicted_in_flight_ns() const { return predicted_sum_; }
  // Submission time of the oldest item in flight; 0 if none.
  uint64_t oldest_issued_ns() const;

 private:
  struct Item {
    uint64_t seq;
    uint64_t key;
    uint64_t predicted_ns;
    uint64_t issued_ns;
    uint64_t order;  // its place among all the items added (samples come out in this order)
    bool alone;
    bool teach;
  };
  // One lane's items in flight, oldest first. RemainingNs counts down the first `head` of them
  // (up to and including its first `alone` one; all of them if none is) and the rest in full:
  // their predicted sums are kept as items come and go, each item moving from the rest into the
  // head once at most.
  struct Lane {
    uint32_t id = 0;
    std::deque<Item> items;
    uint64_t last_done_ns = 0;  // when the lane was last seen to complete an item
    size_t head = 0;
    uint64_t head_ns = 0;
    uint64_t queued_ns = 0;
    bool blocked = false;  // the head ends at an `alone` item
    size_t busy_at = 0;    // its place in busy_, while it has items
  };
  struct Retired {
    uint64_t order;
    uint64_t key;
    uint64_t start;  // when the first of its lane's retired items could start
    uint64_t count;  // how many of its lane's items retired with it
    bool teach;
  };
  // The lane's front item is done: drop it, and count what it held back.
  void PopFront(size_t index);
  std::vector<Lane> lanes_;                        // every lane seen, in order of first use
  absl::flat_hash_map<uint32_t, size_t> lane_at_;  // lane id -> index in lanes_
  std::vector<size_t> busy_;                       // the lanes with items in flight
  std::vector<Retired> retired_;                   // Retire's scratch, kept to spare allocations
  size_t count_ = 0;
  uint64_t predicted_sum_ = 0;
  uint64_t next_order_ = 0;
};

template <typename Completed>
void InflightWindow::Retire(const Completed& completed, uint64_t now,
                            uint64_t since_last_check_ns, std::vector<DurationSample>* samples) {
  retired_.clear();
  // Backwards: PopFront may take the lane out of busy_ (its place then holds the last one,
  // already seen).
  for (size_t b = busy_.size(); b-- > 0;) {
    const size_t index = busy_[b];
    Lane& l = lanes_[index];
    const uint64_t upto = completed(l.id);
    if (l.items.front().seq > upto) continue;
    // Items of one lane that finish together (a lane may report only every few items) share
    // the time since the lane could start the first of them.
    const uint64_t start = std::max(l.items.front().issued_ns, l.last_done_ns);
    const size_t first = retired_.size();
    while (!l.items.empty() && l.items.front().seq <= upto) {
      const Item& it = l.items.front();
      retired_.push_back({it.order, it.key, start, 0, it.teach});
      PopFront(index);
    }
    for (size_t i = first; i < retired_.size(); ++i) retired_[i].count = retired_.size() - first;
    lanes_[index].last_done_ns = now;
  }
  if (samples == nullptr || retired_.empty()) return;
  std::sort(retired_.begin(), retired_.end(),
            [](const Retired& a, const Retired& b) { return a.order < b.order; });
  for (const Retired& r : retired_) {
    if (!r.teach || now <= r.start || r.count > kMaxSampleItems) continue;
    const uint64_t each = (now - r.start) / r.count;
    const uint64_t lateness = since_last_check_ns / r.count;
    if (lateness <= 20'000 || lateness <= each / 8) samples->push_back({r.key, each, r.start});
  }
}

// --- Duration prediction ------------------------------------------------------------------

// Learns how long each kind of work runs (a kernel and its launch shape, a graph, a copy size
// class), online: an exponentially weighted mean of the observed durations. Bounded in size:
// past `capacity` keys it forgets everything and starts again.
class DurationPredictor {
 public:
  // A BE's split graphs add a key per piece (a ResNet-152 graph 175-285, new keys at each of up
  // to 4 rebuilds; bench/results/2026-12-02-residue-h200), and serving engines capture dozens of
  // graphs: room for all of them before the table is cleared.
  explicit DurationPredictor(size_t capacity = 65536) : capacity_(capacity) {}
  // The prediction for `key`, or `unknown_ns` for work never observed.
  uint64_t Predict(uint64_t key, uint64_t unknown_ns) const;
  void Observe(uint64_t key, uint64_t ns);
  size_t size() const { return table_.size(); }

 private:
  struct Estimate {
    uint64_t mean_ns = 0;
    uint32_t samples = 0;
  };
  size_t capacity_;
  absl::flat_hash_map<uint64_t, Estimate> table_;
};

// --- Weighted share between BE tenants ----------------------------------------------------

struct ShareEntry {
  uint64_t gpu_ns = 0;   // GPU time accounted so far
  uint32_t weight = 1;   // > 0
  bool running = false;  // has predicted work in flight now
  uint64_t last_submit_ns = 0;  // its latest submission
};

// Whether a BE tenant may submit now, given the active other BE tenants of its GPU: it may
// unless its weighted GPU time (gpu_ns / weight) is ahead of the least of theirs by more than
// `slack_ns` of its own time, or another one has work running and this one is not the least.
// The second rule keeps the BE tenants' work from overlapping on the GPU: each accounts the
// wall time its work is in flight, which is its GPU time only while it runs alone (two that
// overlap would both count the whole time while the GPU time-slices them). With no other active
// BE tenant it always may.
bool ShareAllows(const ShareEntry& self, const std::vector<ShareEntry>& active_peers,
                 uint64_t slack_ns);

// A BE tenant that becomes active after a pause starts from the least weighted time of the
// active peers (less its slack), like CFS: it neither gets a burst for its idle time nor falls
// behind for good. Returns the gpu_ns it should continue from.
uint64_t CatchUp(const ShareEntry& self, const std::vector<ShareEntry>& active_peers,
                 uint64_t slack_ns);

// --- The verdict --------------------------------------------------------------------------

enum class Verdict {
  kGo,           // submit now
  kWaitLs,       // an LS tenant is busy
  kWaitWindow,   // the BE's own work in flight is at its limit
  kWaitShare,    // another BE tenant is behind its weighted share
};

struct AdmissionInput {
  bool ls_busy = false;
  bool window_admits = true;
  bool share_allows = true;
  size_t in_flight = 0;          // the BE's items in flight
  uint64_t now = 0;
  uint64_t waiting_since = 0;    // when this submission started waiting
  uint64_t max_hold_ns = 0;      // 0: no bound
  uint64_t oldest_in_flight_ns = 0;  // submission time of the oldest item in flight
  uint64_t stall_ns = 0;         // an item in flight this long no longer counts (0: never)
  // missiled's quiet time (budget.h): nothing goes, max_hold or not (it lasts at most a fraction
  // of a second, and the BE's earlier work is not waited for, so no deadlock).
  bool quiet = false;
};

// What to do with one BE submission. LS busy and the share hold it; the window holds it while
// it is full. Bounds: a submission held for `max_hold_ns` goes ahead once nothing of the BE is
// in flight (a minimum share for the BE however busy the LS tenants are), and a window whose
// oldest item has been in flight for `stall_ns` admits (the BE's own earlier work may be waiting
// for something this very thread does next: never deadlock the program).
Verdict Decide(const AdmissionInput& in);

}  // namespace missile::pacing

#endif  // MISSILE_PACING_PACING_H_
