#include "missile/pacing/pacing.h"

#include <algorithm>
#include <iterator>

namespace missile::pacing {

bool LsInFlightCounts(bool lanes_in_flight, uint64_t last_submit_ns, uint64_t now,
                      uint64_t stale_ns) {
  // A submission in the future is a lie (readers bound it first: pacing_region.h's ReadLanes);
  // it must not count as busy, or a tenant could hold the BE tenants for as long as it likes.
  if (!lanes_in_flight || last_submit_ns > now) return false;
  return now - last_submit_ns < stale_ns;
}

bool LsBusyTracker::Busy(const LsObservation& seen, uint64_t now, uint64_t idle_ns) {
  if (seen.in_flight) {
    last_busy_ns_ = std::max(last_busy_ns_, now);
    return true;
  }
  const uint64_t last = std::max(last_busy_ns_, seen.newest_submit_ns);
  if (last == 0) return false;
  return now < last || now - last < idle_ns;
}

void InflightWindow::Add(uint32_t lane, uint64_t seq, uint64_t key, uint64_t predicted_ns,
                         uint64_t now, bool alone, bool teach) {
  items_.push_back({lane, seq, key, predicted_ns, now, alone, teach});
  predicted_sum_ += predicted_ns;
}

InflightWindow::Limits InflightWindow::Scaled(const Limits& limits, uint32_t scale) {
  const uint64_t k = std::max<uint32_t>(scale, 1);
  auto times = [k](uint64_t v) { return v > UINT64_MAX / k ? UINT64_MAX : v * k; };
  return {static_cast<uint32_t>(std::min<uint64_t>(uint64_t{limits.items} * k,
                                                   std::max(limits.items, kMaxItems))),
          times(limits.predicted_ns), times(limits.refill_ns)};
}

bool InflightWindow::Admits(uint64_t predicted_ns, const Limits& limits, uint64_t now) const {
  if (items_.empty()) return true;  // at least one item always runs, however long
  if (items_.size() >= limits.items) return false;
  // What is left to run is at most what was predicted for it all: with room for that, the
  // count-down over every item in flight (a widened window holds up to kMaxItems) is not needed.
  if (predicted_ns <= limits.predicted_ns && predicted_sum_ <= limits.predicted_ns - predicted_ns) {
    return true;
  }
  const uint64_t remaining = RemainingNs(now);
  return remaining + predicted_ns <= limits.predicted_ns || remaining < limits.refill_ns;
}

uint64_t InflightWindow::RemainingNs(uint64_t now) const {
  struct LaneWork {
    uint32_t lane;
    uint64_t start;
    uint64_t running;  // predicted time of the items that may have started, counted down
    uint64_t queued;   // predicted time of the items behind an unfinished `alone` item
    bool blocked;      // an `alone` item of the lane is in flight
  };
  // Few items are in flight (a window's worth): a linear list of lanes is enough.
  LaneWork lanes[32];
  size_t n = 0;
  uint64_t overflow = 0;  // items of lanes past the list count in full
  for (const Item& item : items_) {
    size_t i = 0;
    while (i < n && lanes[i].lane != item.lane) ++i;
    if (i == n) {
      if (n == std::size(lanes)) {
        overflow += item.predicted_ns;
        continue;
      }
      auto done = lane_last_done_ns_.find(item.lane);
      const uint64_t last = done == lane_last_done_ns_.end() ? 0 : done->second;
      lanes[n++] = {item.lane, std::max(item.issued_ns, last), 0, 0, false};
    }
    LaneWork& l = lanes[i];
    (l.blocked ? l.queued : l.running) += item.predicted_ns;
    l.blocked = l.blocked || item.alone;
  }
  uint64_t remaining = overflow;
  for (size_t i = 0; i < n; ++i) {
    const uint64_t elapsed = now > lanes[i].start ? now - lanes[i].start : 0;
    remaining += (lanes[i].running > elapsed ? lanes[i].running - elapsed : 0) + lanes[i].queued;
  }
  return remaining;
}

uint64_t InflightWindow::oldest_issued_ns() const {
  uint64_t oldest = 0;
  for (const Item& item : items_) {
    if (oldest == 0 || item.issued_ns < oldest) oldest = item.issued_ns;
  }
  return oldest;
}

uint64_t DurationPredictor::Predict(uint64_t key, uint64_t unknown_ns) const {
  auto it = table_.find(key);
  if (it == table_.end() || it->second.samples == 0) return unknown_ns;
  return it->second.mean_ns;
}

void DurationPredictor::Observe(uint64_t key, uint64_t ns) {
  if (table_.size() >= capacity_ && !table_.contains(key)) table_.clear();
  Estimate& e = table_[key];
  if (e.samples == 0) {
    e.mean_ns = ns;
  } else {
    // Weight 1/4 for the new sample: follows a change within a few launches, and one outlier
    // (a sample stretched by an LS time slice) moves the mean by a quarter of its excess.
    const int64_t delta = static_cast<int64_t>(ns) - static_cast<int64_t>(e.mean_ns);
    e.mean_ns = static_cast<uint64_t>(static_cast<int64_t>(e.mean_ns) + delta / 4);
  }
  if (e.samples < UINT32_MAX) ++e.samples;
}

namespace {

// gpu_ns / weight, scaled to keep precision for small times.
unsigned __int128 Weighted(const ShareEntry& e) {
  return (static_cast<unsigned __int128>(e.gpu_ns) << 16) / std::max<uint32_t>(e.weight, 1);
}

}  // namespace

bool ShareAllows(const ShareEntry& self, const std::vector<ShareEntry>& active_peers,
                 uint64_t slack_ns) {
  if (active_peers.empty()) return true;
  unsigned __int128 least = Weighted(active_peers.front());
  for (const ShareEntry& p : active_peers) least = std::min(least, Weighted(p));
  const unsigned __int128 mine = Weighted(self);
  if (mine <= least) return true;
  for (const ShareEntry& p : active_peers) {
    if (p.running) return false;  // not the least, and another one's work is on the GPU
  }
  const unsigned __int128 slack =
      (static_cast<unsigned __int128>(slack_ns) << 16) / std::max<uint32_t>(self.weight, 1);
  return mine - least <= slack;
}

uint64_t CatchUp(const ShareEntry& self, const std::vector<ShareEntry>& active_peers,
                 uint64_t slack_ns) {
  if (active_peers.empty()) return self.gpu_ns;
  unsigned __int128 least = Weighted(active_peers.front());
  for (const ShareEntry& p : active_peers) least = std::min(least, Weighted(p));
  // The gpu_ns at which this tenant's weighted time equals the least one.
  const unsigned __int128 level = (least * std::max<uint32_t>(self.weight, 1)) >> 16;
  const uint64_t target = level > slack_ns ? static_cast<uint64_t>(level - slack_ns) : 0;
  return std::max(self.gpu_ns, target);
}

Verdict Decide(const AdmissionInput& in) {
  if (in.quiet) return Verdict::kWaitLs;
  const bool window_ok =
      in.window_admits || (in.stall_ns != 0 && in.oldest_in_flight_ns != 0 &&
                           in.now >= in.oldest_in_flight_ns &&
                           in.now - in.oldest_in_flight_ns >= in.stall_ns);
  if (!in.ls_busy && window_ok && in.share_allows) return Verdict::kGo;
  const bool held_long = in.max_hold_ns != 0 && in.now >= in.waiting_since &&
                         in.now - in.waiting_since >= in.max_hold_ns;
  if (held_long && in.in_flight == 0) return Verdict::kGo;
  if (in.ls_busy) return Verdict::kWaitLs;
  if (!window_ok) return Verdict::kWaitWindow;
  return Verdict::kWaitShare;
}

}  // namespace missile::pacing
