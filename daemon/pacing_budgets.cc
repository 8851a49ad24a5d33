// PacingDomain's LS latency budgets (pacing/budget.h): each LS tenant's busy periods timed
// against its alone durations, the quiet times that relearn those, and the rests of the LS
// tenants' marking once every budget released the BE with room ([compute] ls_rest_ms).
#include <bit>
#include <optional>
#include <utility>

#include "missile/pacing/budget.h"
#include "pacing_domain.h"

namespace missile::daemon {

bool PacingDomain::AllReleasedWithRoomLocked() const {
  bool any = false;
  for (const auto& [session, slot] : slot_of_) {
    if (directory()->entries[slot].cls.load(std::memory_order_relaxed) != pacingreg::kLs) continue;
    if (!pacing::ReleasedWithRoom(slots_[slot].budget.controller.status(), BudgetOfLocked(slot))) {
      return false;
    }
    any = true;
  }
  return any;
}

// Against the setting in force: a rest shortened (or turned off) live ends by the new length,
// and one lengthened still at the time published when it began (the LS tenants mark from then).
bool PacingDomain::RestHoldsLocked(uint64_t now) const {
  return now - rest_began_ns_ < settings_.ls_rest_ns &&
         now < directory()->policy.rest_until_ns.load(std::memory_order_relaxed) &&
         directory()->policy.members.load(std::memory_order_relaxed) == rest_members_ &&
         AllReleasedWithRoomLocked();
}

void PacingDomain::MaybeRestLocked(uint64_t now) {
  if (settings_.ls_rest_ns == 0 || quiet_until_ns_ != 0 || alone_wanted_ ||
      !AllReleasedWithRoomLocked()) {
    return;
  }
  for (const auto& [session, slot] : slot_of_) {
    if (dir()->entries[slot].cls.load(std::memory_order_relaxed) != pacingreg::kLs) continue;
    const Budget& b = slots_[slot].budget;
    if (b.controller.status().periods < b.periods_at_check + pacing::kRestCheckPeriods) return;
  }
  rest_began_ns_ = now;
  rest_members_ = dir()->policy.members.load(std::memory_order_relaxed);
  dir()->policy.rest_until_ns.store(now + settings_.ls_rest_ns, std::memory_order_relaxed);
}

void PacingDomain::EndRestLocked() {
  rest_began_ns_ = 0;
  dir()->policy.rest_until_ns.store(0, std::memory_order_relaxed);
  for (const auto& [session, slot] : slot_of_) {
    Budget& b = slots_[slot].budget;
    b.tracker.Reset();
    b.drop_next_period = true;
    b.periods_at_check = b.controller.status().periods;
  }
}

// `be_working`: some BE tenant submitted paced work within the last second. Alone periods count
// only then: before, the GPU is not as it is beside the BE (a ResNet-50 graph LS's alone periods
// before its BE's work began took 1.30-1.40 ms on the H200, its quiet-time ones 1.19-1.20 ms),
// and no quiet time is needed.
void PacingDomain::ObserveBudgetsLocked(uint64_t now) {
  bool be_in_flight = false;
  bool be_working = false;
  for (const auto& [session, slot] : slot_of_) {
    if (dir()->entries[slot].cls.load(std::memory_order_relaxed) == pacingreg::kBe) {
      const pacingreg::LanesView v = View(slot, now);
      be_in_flight = be_in_flight || v.in_flight;
      be_working = be_working || v.in_flight ||
                   (v.last_submit_ns != 0 && now - v.last_submit_ns < kQuietEveryNs);
    }
  }
  const pacing::BusyPeriodTracker::Limits limits{settings_.ls_idle_ns, kMaxPollGapNs,
                                                 settings_.ls_stale_ns};
  bool need_alone = false;
  bool quiet_useful = false;  // an LS tenant with a budget works beside a BE that works
  bool new_work = false;      // one of those needs alone durations for work never timed alone
  uint64_t alone_total = 0;
  for (const auto& [session, slot] : slot_of_) {
    pacingreg::Entry& e = dir()->entries[slot];
    if (e.cls.load(std::memory_order_relaxed) != pacingreg::kLs || slots_[slot].epoch == 0) {
      continue;
    }
    Budget& b = slots_[slot].budget;
    const uint32_t budget_pct = BudgetOfLocked(slot);
    b.controller.set_budget_pct(budget_pct);
    const pacingreg::LanesView v = View(slot, now);
    std::optional<pacing::BusyPeriod> p =
        b.tracker.Poll({now, v.in_flight, v.submissions, v.work_sum, be_in_flight}, limits);
    // The first period after a rest may have begun unmarked: what it measured is not its time.
    if (p && std::exchange(b.drop_next_period, false)) p.reset();
    if (p) {
      b.last_period_ns = now;
      if (p->alone && be_working) {
        b.alone.Learn(*p);
        ++b.alone_periods;
        b.last_alone_ns = now;
        b.unknown = 0;
      }
      // Work that repeats and was never seen alone waits for its own alone duration (no
      // stretch: a quiet time comes, below).
      const bool repeats = p->signature == b.last_signature;
      b.last_signature = p->signature;
      const std::optional<double> alone_ns = b.alone.AloneNs(*p, 2, repeats);
      const std::optional<double> stretch =
          alone_ns ? std::optional<double>(static_cast<double>(p->ns) / *alone_ns) : std::nullopt;
      if (stretch) {
        b.controller.Observe(*stretch);
        b.measured_ns = p->ns;
        b.measured_alone_ns = *alone_ns;
      }
      b.unknown = ((b.unknown << 1) | (stretch || p->alone ? 0u : 1u)) & 0xffu;
    }
    alone_total += b.alone_periods;
    // Alone durations are missing for its recent work, or old, while it and a BE work.
    const bool working = b.last_period_ns != 0 && now - b.last_period_ns < kQuietEveryNs;
    // (An LS tenant of 100 % gives no share: its alone durations are not needed.)
    const bool wanted = working && be_working && budget_pct > pacing::kNoBudgetPct;
    quiet_useful = quiet_useful || wanted;
    // Work never timed alone needs two alone periods (a stretch needs two); a refresh of
    // alone durations that went stale needs one.
    const bool unknown_work = std::popcount(b.unknown) >= 2 || b.alone_periods < 2;
    const uint64_t relearn_ns = pacing::RelearnEveryNs(b.controller.status(), budget_pct);
    if (wanted && (unknown_work || now - b.last_alone_ns > relearn_ns)) {
      need_alone = true;
      new_work = new_work || unknown_work;
    }
    const pacing::BudgetStatus& st = b.controller.status();
    const bool spending = st.state == pacing::BudgetState::kSpending;
    e.be_share_ppm.store(spending ? st.share_ppm : 0, std::memory_order_relaxed);
    e.be_window_scale.store(spending ? st.window_scale : 1, std::memory_order_relaxed);
  }
  alone_wanted_ = need_alone;
  QuietTurnLocked(now, {need_alone, new_work, quiet_useful, alone_total});
}

void PacingDomain::QuietTurnLocked(uint64_t now, const QuietNeeds& needs) {
  pacingreg::Policy& pol = dir()->policy;
  if (quiet_until_ns_ != 0) {
    // Over when its time is up, or once the alone periods it came for were learned (the BE
    // tenants drained and an LS tenant's work ran by itself), or when no LS tenant's budget
    // needs it any more.
    if (now >= quiet_until_ns_ || needs.alone_total >= quiet_alone_mark_ + quiet_needs_ ||
        !needs.useful) {
      quiet_until_ns_ = 0;
      pol.quiet_until_ns.store(0, std::memory_order_relaxed);
      next_quiet_ns_ = now + kQuietEveryNs;
    }
  } else if (needs.alone && now >= next_quiet_ns_) {
    quiet_until_ns_ = now + kQuietNs;
    quiet_alone_mark_ = needs.alone_total;
    quiet_needs_ = needs.new_work ? 2 : 1;
    pol.quiet_until_ns.store(quiet_until_ns_, std::memory_order_relaxed);
  }
}

}  // namespace missile::daemon
