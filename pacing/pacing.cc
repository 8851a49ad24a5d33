#include "missile/pacing/pacing.h"

#include <algorithm>

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
  auto [at, fresh] = lane_at_.try_emplace(lane, lanes_.size());
  if (fresh) {
    lanes_.emplace_back();
    lanes_.back().id = lane;
  }
  Lane& l = lanes_[at->second];
  if (l.items.empty()) {
    l.busy_at = busy_.size();
    busy_.push_back(at->second);
  }
  l.items.push_back({seq, key, predicted_ns, now, next_order_++, alone, teach});
  if (l.blocked) {
    l.queued_ns += predicted_ns;
  } else {
    ++l.head;
    l.head_ns += predicted_ns;
    l.blocked = alone;
  }
  ++count_;
  predicted_sum_ += predicted_ns;
}

void InflightWindow::PopFront(size_t index) {
  Lane& l = lanes_[index];
  const Item done = l.items.front();
  l.items.pop_front();
  --count_;
  predicted_sum_ -= done.predicted_ns;
  // The front item is always in the head (the head ends at the first `alone` item, or holds
  // them all).
  --l.head;
  l.head_ns -= done.predicted_ns;
  if (done.alone) {
    // The first `alone` item was the head's last: what waited behind it counts down now, up to
    // the next `alone` one.
    l.blocked = false;
    while (!l.blocked && l.head < l.items.size()) {
      const Item& next = l.items[l.head++];
      l.head_ns += next.predicted_ns;
      l.queued_ns -= next.predicted_ns;
      l.blocked = next.alone;
    }
  }
  if (l.items.empty()) {
    // Out of busy_: the last one takes its place.
    const size_t last = busy_.back();
    busy_[l.busy_at] = last;
    lanes_[last].busy_at = l.busy_at;
    busy_.pop_back();
  }
}

InflightWindow::Limits InflightWindow::Scaled(const Limits& limits, uint32_t scale) {
  const uint64_t k = std::max<uint32_t>(scale, 1);
  auto times = [k](uint64_t v) { return v > UINT64_MAX / k ? UINT64_MAX : v * k; };
  return {static_cast<uint32_t>(std::min<uint64_t>(uint64_t{limits.items} * k,
                                                   std::max(limits.items, kMaxItems))),
          times(limits.predicted_ns), times(limits.refill_ns)};
}

bool InflightWindow::Admits(uint64_t predicted_ns, const Limits& limits, uint64_t now) const {
  if (count_ == 0) return true;  // at least one item always runs, however long
  if (count_ >= limits.items) return false;
  // What is left to run is at most what was predicted for it all: with room for that, the
  // count-down over the lanes is not needed.
  if (predicted_ns <= limits.predicted_ns && predicted_sum_ <= limits.predicted_ns - predicted_ns) {
    return true;
  }
  const uint64_t remaining = RemainingNs(now);
  return remaining + predicted_ns <= limits.predicted_ns || remaining < limits.refill_ns;
}

uint64_t InflightWindow::RemainingNs(uint64_t now) const {
  uint64_t remaining = 0;
  for (const size_t index : busy_) {
    const Lane& l = lanes_[index];
    const uint64_t start = std::max(l.items.front().issued_ns, l.last_done_ns);
    const uint64_t elapsed = now > start ? now - start : 0;
    remaining += (l.head_ns > elapsed ? l.head_ns - elapsed : 0) + l.queued_ns;
  }
  return remaining;
}

uint64_t InflightWindow::oldest_issued_ns() const {
  // A lane's items come in time order: the oldest is one of the lanes' first.
  uint64_t oldest = 0;
  for (const size_t index : busy_) {
    const uint64_t issued = lanes_[index].items.front().issued_ns;
    if (oldest == 0 || issued < oldest) oldest = issued;
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
