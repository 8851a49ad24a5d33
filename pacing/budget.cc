#include "missile/pacing/budget.h"

#include <algorithm>

namespace missile::pacing {

namespace {

// What a period held, as one number: its item count and the sum of its items' keys, mixed
// (splitmix64's finaliser) so that nearby sums do not make nearby signatures.
uint64_t Signature(uint64_t items, uint64_t key_sum) {
  uint64_t x = key_sum ^ (items * 0x9e3779b97f4a7c15ull);
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

}  // namespace

std::optional<BusyPeriod> BusyPeriodTracker::Poll(const LsPoll& p, const Limits& limits) {
  if (!seen_) {
    seen_ = true;
    // Work already in flight at the first look began at an unknown time: its period is dropped.
    if (p.in_flight) {
      open_ = true;
      valid_ = false;
      end_ns_ = 0;
    }
    last_now_ = p.now;
    last_submissions_ = p.submissions;
    last_work_sum_ = p.work_sum;
    last_be_in_flight_ = p.be_in_flight;
    return std::nullopt;
  }
  const uint64_t gap = p.now > last_now_ ? p.now - last_now_ : 0;
  const bool work = p.in_flight || p.submissions != last_submissions_;
  std::optional<BusyPeriod> ended;
  if (open_ && end_ns_ != 0 && p.now - end_ns_ >= limits.idle_ns) {
    // Over: nothing new for idle_ns since the first poll that saw it done. Unless this poll,
    // the first past that time, sees new work: it may have come within idle_ns (the poll before
    // came earlier), and the period go on; where it ends is not known.
    const bool maybe_on = work && last_now_ - end_ns_ < limits.idle_ns;
    const uint64_t ns = end_ns_ - start_ns_;
    // Timed to within a sixteenth of its length, or max_gap_ns, at each end.
    const uint64_t tolerance = std::max(limits.max_gap_ns, ns / 16);
    if (valid_ && !maybe_on && ns <= limits.max_period_ns && start_gap_ <= tolerance &&
        end_gap_ <= tolerance) {
      ended = BusyPeriod{Signature(period_submissions_, period_work_sum_), period_submissions_, ns,
                         alone_};
    } else {
      ++dropped_;
    }
    open_ = false;
  }
  if (open_) {
    // A gap longer than the idle time may hide the end of this period and the start of
    // another; a shorter one matters only where the period ends (its end is that uncertain).
    if (gap > std::max(limits.idle_ns, limits.max_inner_gap_ns)) valid_ = false;
    if (work) {
      end_ns_ = 0;
      if (p.be_in_flight) alone_ = false;
      period_submissions_ = p.submissions - base_submissions_;
      period_work_sum_ = p.work_sum - base_work_sum_;
    } else if (end_ns_ == 0) {
      end_ns_ = p.now;
      end_gap_ = gap;
      // What ran until this poll may have been delayed by BE work seen now.
      if (p.be_in_flight) alone_ = false;
    }
  } else if (work) {
    open_ = true;
    valid_ = true;
    start_gap_ = gap;
    // BE work seen at the poll before may have been running when the LS's work arrived.
    alone_ = !p.be_in_flight && !last_be_in_flight_;
    start_ns_ = last_now_;
    end_ns_ = 0;
    base_submissions_ = last_submissions_;
    base_work_sum_ = last_work_sum_;
    period_submissions_ = p.submissions - base_submissions_;
    period_work_sum_ = p.work_sum - base_work_sum_;
  }
  last_now_ = std::max(last_now_, p.now);
  last_submissions_ = p.submissions;
  last_work_sum_ = p.work_sum;
  last_be_in_flight_ = p.be_in_flight;
  return ended;
}

namespace {

// The plain mean of the first 8 samples, then the newest weighs 1/8: the first alone period
// (perhaps the LS's first request, on a cold GPU) does not set the mean for long. For the
// duration per item.
void Update(double v, double* mean, uint32_t* samples) {
  if (*samples < UINT32_MAX) ++*samples;
  *mean += (v - *mean) / std::min<uint32_t>(*samples, 8);
}

}  // namespace

void AloneDurations::Learn(const BusyPeriod& alone) {
  if (table_.size() >= capacity_ && !table_.contains(alone.signature)) table_.clear();
  Recent& r = table_[alone.signature];
  r.ns[r.samples % kAloneSamples] = static_cast<double>(alone.ns);
  if (r.samples < UINT32_MAX) ++r.samples;
  if (alone.items > 0) {
    Update(static_cast<double>(alone.ns) / static_cast<double>(alone.items), &per_item_.ns,
           &per_item_.samples);
  }
}

bool AloneDurations::Knows(const BusyPeriod& p, uint32_t min_samples) const {
  auto it = table_.find(p.signature);
  return it != table_.end() && it->second.samples >= std::max<uint32_t>(min_samples, 1) &&
         it->second.Least() > 0;
}

std::optional<double> AloneDurations::AloneNs(const BusyPeriod& p, uint32_t min_samples,
                                              bool repeats) const {
  const uint32_t enough = std::max<uint32_t>(min_samples, 1);
  if (Knows(p, min_samples)) return table_.find(p.signature)->second.Least();
  if (repeats || p.items == 0 || per_item_.samples < enough || per_item_.ns <= 0) {
    return std::nullopt;
  }
  return per_item_.ns * static_cast<double>(p.items);
}

const char* BudgetStateName(BudgetState s) {
  switch (s) {
    case BudgetState::kOff:
      return "off";
    case BudgetState::kLearning:
      return "learning";
    case BudgetState::kSpending:
      return "spending";
    case BudgetState::kUnmet:
      return "unmet";
  }
  return "?";
}

void BudgetController::set_budget_pct(uint32_t pct) {
  if (pct == budget_pct_) return;
  budget_pct_ = pct;
  since_decision_ = 0;
  recent_.clear();
  over_at_zero_ = 0;
  const uint64_t periods = status_.periods;
  status_ = BudgetStatus();
  status_.periods = periods;
  status_.state = pct <= kNoBudgetPct ? BudgetState::kOff : BudgetState::kLearning;
}

void BudgetController::Observe(double stretch) {
  ++status_.periods;
  recent_.push_back(stretch);
  if (recent_.size() > kWindow) recent_.erase(recent_.begin());
  if (++since_decision_ == kDecisionEvery) Decide();
}

void BudgetController::Decide() {
  const double budget = budget_pct_ / 100.0;
  // The periods since the last decision are the newest kDecisionEvery of recent_.
  const bool fresh_over = std::any_of(recent_.end() - static_cast<ptrdiff_t>(kDecisionEvery),
                                      recent_.end(), [&](double v) { return v > budget; });
  since_decision_ = 0;
  std::vector<double> sorted = recent_;
  std::sort(sorted.begin(), sorted.end());
  const double high = sorted[sorted.size() - 2];
  status_.stretch = high;
  if (budget_pct_ <= kNoBudgetPct) {
    status_.state = BudgetState::kOff;
    status_.share_ppm = 0;
    status_.window_scale = 1;
    return;
  }
  if (high > budget) {
    if (!fresh_over) {
      // The period above it is older: it was answered when it came.
    } else if (status_.share_ppm == kUnheldSharePpm) {
      status_.share_ppm = kMaxSharePpm;
    } else if (status_.window_scale > 1) {
      status_.window_scale /= 2;
    } else if (status_.share_ppm == 0) {
      ++over_at_zero_;
    } else {
      status_.share_ppm /= 2;
      if (status_.share_ppm < kFullSharePpm / 100) status_.share_ppm = 0;
    }
    if (over_at_zero_ >= 3) {
      status_.state = BudgetState::kUnmet;
    } else if (status_.state != BudgetState::kUnmet) {
      status_.state = BudgetState::kSpending;
    }
    return;
  }
  over_at_zero_ = 0;
  const double room = std::clamp((budget - high) / (budget - 1.0), 0.0, 1.0);
  status_.state = BudgetState::kSpending;
  if (status_.share_ppm >= kMaxSharePpm) {
    // The share gives no more: the window next, then no hold at all.
    if (room < kWindowRoom) return;
    if (status_.window_scale < kMaxWindowScale) {
      status_.window_scale = std::min(status_.window_scale * 2, kMaxWindowScale);
    } else {
      status_.share_ppm = kUnheldSharePpm;
    }
    return;
  }
  const double base = std::max<double>(kFullSharePpm / 10.0, status_.share_ppm / 4.0);
  const double grown = status_.share_ppm + room * base;
  status_.share_ppm = static_cast<uint32_t>(std::min<double>(kMaxSharePpm, grown));
}

void BusyCredit::Advance(uint64_t now, bool ls_busy, uint32_t share_ppm, uint64_t cap_ns) {
  if (!ls_busy) {
    was_busy_ = false;
    credit_ns_ = 0;
  } else if (!was_busy_) {
    was_busy_ = true;
    credit_ns_ = 0;
  } else if (now > last_ns_) {
    const auto earned = static_cast<int64_t>(
        static_cast<unsigned __int128>(now - last_ns_) * std::min(share_ppm, kMaxSharePpm) /
        kFullSharePpm);
    credit_ns_ = std::min(credit_ns_ + earned, static_cast<int64_t>(cap_ns));
  }
  last_ns_ = std::max(last_ns_, now);
}

bool BusyCredit::Lets(uint32_t share_ppm, uint64_t predicted_ns, bool window_admits) {
  if (share_ppm == kUnheldSharePpm) return true;
  if (share_ppm == 0 || !window_admits || credit_ns_ <= 0) return false;
  credit_ns_ -= static_cast<int64_t>(std::min<uint64_t>(predicted_ns, INT64_MAX / 2));
  return true;
}

bool ReleasedWithRoom(const BudgetStatus& status, uint32_t budget_pct) {
  const bool released = status.state == BudgetState::kSpending &&
                        status.share_ppm == kUnheldSharePpm && status.stretch > 0;
  return released && status.stretch <= kRelearnRoom * static_cast<double>(budget_pct) / 100.0;
}

uint64_t RelearnEveryNs(const BudgetStatus& status, uint32_t budget_pct) {
  return ReleasedWithRoom(status, budget_pct) ? kRelearnReleasedNs : kRelearnNs;
}

}  // namespace missile::pacing
