#include "pacing_domain.h"

#include <sys/prctl.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "missile/common/status_macros.h"

namespace missile::daemon {

using pacingreg::kSlots;

namespace {

// A value of `key` out of the table's range is InvalidArgument naming it.
absl::Status CheckRange(const settings::Setting& key, const std::optional<uint64_t>& v) {
  const auto min = static_cast<uint64_t>(key.min);
  const auto max = static_cast<uint64_t>(key.max);
  if (v && (*v < min || *v > max)) {
    return absl::InvalidArgumentError(absl::StrCat(key.key, " must be in [", min, ", ", max,
                                                   "], got ", *v));
  }
  return absl::OkStatus();
}
absl::Status CheckRange(const settings::Setting&, const std::optional<bool>&) {
  return absl::OkStatus();
}

// Every setting of the table can change live (PacingChange holds them all), and the shims read
// each from the Policy field of its name, which stays as it is (a bool as a uint32_t 1 or 0).
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  static_assert(std::is_same_v<decltype(pacingreg::Policy::field)::value_type,                 \
                               std::conditional_t<std::is_same_v<type, bool>, uint32_t, type>>, \
                "pacingreg::Policy::" #field " must hold a " #type);
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  static_assert(live, #key " is not live, but missilectl set and a reload change it");
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING

const char* OnOff(bool b) { return b ? "on" : "off"; }

// What an LS entry publishes of its budget when it spends none: no share, the window as set.
void ClearBudgetOutput(pacingreg::Entry* e) {
  e->be_share_ppm.store(0, std::memory_order_relaxed);
  e->be_window_scale.store(1, std::memory_order_relaxed);
}

}  // namespace

absl::StatusOr<PacingSettings> ApplyPacingChange(const PacingSettings& before,
                                                 const PacingChange& change) {
  const settings::Setting* setting = settings::kComputeSettings;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  MISSILE_RETURN_IF_ERROR(CheckRange(*setting++, change.key));
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  PacingSettings after = before;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  if (change.key) after.field = settings::ToField<type>(*change.key, settings::Unit::unit);
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  return after;
}

std::string DescribePacingChange(const PacingSettings& before, const PacingSettings& after) {
  std::vector<std::string> parts;
  auto describe = [&parts](const char* key, auto from, auto to) {
    if (from == to) return;
    if constexpr (std::is_same_v<decltype(from), bool>) {
      parts.push_back(absl::StrCat(key, " ", OnOff(from), " -> ", OnOff(to)));
    } else {
      parts.push_back(absl::StrCat(key, " ", from, " -> ", to));
    }
  };
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  describe(#key, settings::FromField(before.field, settings::Unit::unit),                \
           settings::FromField(after.field, settings::Unit::unit));
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  return parts.empty() ? "unchanged" : absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::unique_ptr<PacingDomain>> PacingDomain::Create(
    const PacingSettings& settings, bool sampler) {
  std::unique_ptr<PacingDomain> d(new PacingDomain());
  absl::StatusOr<shm::ShmRegion> dir =
      shm::ShmRegion::Create("missile-pacing", sizeof(pacingreg::Directory));
  if (!dir.ok()) return dir.status();
  d->directory_ = *std::move(dir);
  // Zeroed by ftruncate; the atomics are lock-free words, valid as zeros.
  pacingreg::InitDirectory(d->dir());
  {
    absl::MutexLock lock(&d->mu_);
    d->Publish(settings);
  }
  // From here on only the daemon's own mapping can write the directory: every tenant's is
  // read-only, whatever it does with its descriptor.
  if (absl::Status s = d->directory_.SealWrites(); !s.ok()) return s;
  if (sampler) d->sampler_ = std::thread([domain = d.get()] { domain->RunSampler(); });
  return d;
}

PacingDomain::~PacingDomain() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (sampler_.joinable()) sampler_.join();
}

void PacingDomain::Publish(const PacingSettings& s) {
  settings_ = s;
  pacingreg::Policy& p = dir()->policy;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  p.field.store(s.field, std::memory_order_relaxed);
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  p.generation.fetch_add(1, std::memory_order_release);
}

void PacingDomain::CountLs() {
  uint32_t ls = 0, be = 0;
  for (const auto& [session, slot] : slot_of_) {
    const uint32_t cls = dir()->entries[slot].cls.load(std::memory_order_relaxed);
    ls += cls == pacingreg::kLs;
    be += cls == pacingreg::kBe;
  }
  pacingreg::Policy& p = dir()->policy;
  p.ls_tenants.store(ls, std::memory_order_release);
  p.be_tenants.store(be, std::memory_order_release);
  p.members.fetch_add(1, std::memory_order_release);
}

absl::StatusOr<PacingDomain::Descriptors> PacingDomain::Join(uint64_t session, int pid,
                                                             TenantClass cls, uint32_t weight) {
  if (absl::Status s = Assign(session, pid, cls, weight); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return absl::NotFoundError("the session left meanwhile");
  SlotState& st = slots_[it->second];
  // A fresh page on every join: the tenant seals the page it maps, so a second pacer of the
  // same session (its shim registered again after a daemon stall) cannot map the first one
  // writable. The old page is no longer published; whoever still writes it reaches nobody.
  // The daemon only reads the page: its tenant (and the GPU, for the tenant) writes it.
  absl::StatusOr<shm::ShmRegion> lanes = shm::ShmRegion::Create(
      "missile-pacing-lanes", sizeof(pacingreg::LanesPage), shm::Access::kReadOnly);
  if (!lanes.ok()) return lanes.status();
  if (st.epoch != 0) {
    dir()->entries[it->second].lanes_epoch.store(0, std::memory_order_release);
    dir()->policy.members.fetch_add(1, std::memory_order_release);
  }
  st.lanes = *std::move(lanes);
  st.epoch = 0;
  Descriptors out;
  absl::StatusOr<int> dir_fd = directory_.Dup();
  if (!dir_fd.ok()) return dir_fd.status();
  absl::StatusOr<int> lanes_fd = st.lanes.Dup();
  if (!lanes_fd.ok()) {
    close(*dir_fd);
    return lanes_fd.status();
  }
  out.directory = *dir_fd;
  out.lanes = *lanes_fd;
  return out;
}

absl::Status PacingDomain::Assign(uint64_t session, int pid, TenantClass cls, uint32_t weight) {
  if (session == 0) return absl::InvalidArgumentError("no session");
  absl::MutexLock lock(&mu_);
  if (slot_of_.contains(session)) return absl::OkStatus();
  if (cls != TenantClass::kLatencySensitive &&
      dir()->policy.be_tenants.load(std::memory_order_relaxed) >= kSlots - kLsReservedSlots) {
    return absl::ResourceExhaustedError(
        "every pacing slot of this GPU that BE tenants may take is taken (" +
        std::to_string(kSlots - kLsReservedSlots) + "; " + std::to_string(kLsReservedSlots) +
        " are kept for LS tenants)");
  }
  std::optional<uint32_t> free;
  for (uint32_t i = 0; i < kSlots && !free; ++i) {
    if (dir()->entries[i].session.load(std::memory_order_relaxed) == 0) free = i;
  }
  if (!free) {
    return absl::ResourceExhaustedError("every pacing slot of this GPU is taken (" +
                                        std::to_string(kSlots) + " tenants)");
  }
  pacingreg::Entry& e = dir()->entries[*free];
  slots_[*free] = SlotState();  // nothing of the previous session: a new page comes with Join
  e.lanes_epoch.store(0, std::memory_order_relaxed);
  ClearBudgetOutput(&e);  // a budget's share is its LS's alone
  e.pid.store(pid, std::memory_order_relaxed);
  e.weight.store(weight == 0 ? 1 : weight, std::memory_order_relaxed);
  e.cls.store(cls == TenantClass::kLatencySensitive ? pacingreg::kLs : pacingreg::kBe,
              std::memory_order_relaxed);
  e.session.store(session, std::memory_order_release);
  slot_of_.emplace(session, *free);
  CountLs();
  wake_.Signal();  // the sampler sleeps while no slot is taken
  return absl::OkStatus();
}

absl::StatusOr<int> PacingDomain::OpenPeerLanes(uint64_t reader, uint32_t slot, uint64_t epoch) {
  absl::MutexLock lock(&mu_);
  auto me = slot_of_.find(reader);
  if (me == slot_of_.end()) return absl::NotFoundError("the session has no pacing slot here");
  if (dir()->entries[me->second].cls.load(std::memory_order_relaxed) != pacingreg::kBe) {
    return absl::PermissionDeniedError("only best-effort tenants read their peers' lanes");
  }
  if (slot >= kSlots || epoch == 0 || slots_[slot].epoch != epoch) {
    return absl::NotFoundError("no published lanes page in slot " + std::to_string(slot) +
                               " with epoch " + std::to_string(epoch));
  }
  return slots_[slot].lanes.Dup();
}

void PacingDomain::Leave(uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return;
  pacingreg::Entry& e = dir()->entries[it->second];
  // Readers check the epoch before they read a page: from here on nobody reads this one.
  e.lanes_epoch.store(0, std::memory_order_release);
  ClearBudgetOutput(&e);
  e.cls.store(pacingreg::kFree, std::memory_order_release);
  e.session.store(0, std::memory_order_release);
  slots_[it->second] = SlotState();  // unmaps and closes the daemon's side of the page
  slot_of_.erase(it);
  CountLs();
}

void PacingDomain::SetPolicy(uint64_t session, TenantClass cls, uint32_t weight) {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return;
  pacingreg::Entry& e = dir()->entries[it->second];
  e.weight.store(weight == 0 ? 1 : weight, std::memory_order_relaxed);
  const uint32_t to = cls == TenantClass::kLatencySensitive ? pacingreg::kLs : pacingreg::kBe;
  if (e.cls.load(std::memory_order_relaxed) != to) {
    // Another class: its budget (an LS's) starts over, with no share.
    ClearBudgetOutput(&e);
    slots_[it->second].budget = Budget();
  }
  e.cls.store(to, std::memory_order_release);
  CountLs();
}

void PacingDomain::SetBudget(uint64_t session, uint32_t pct) {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it != slot_of_.end()) slots_[it->second].budget_pct = pct;
}

void PacingDomain::Configure(const PacingSettings& settings) {
  absl::MutexLock lock(&mu_);
  Publish(settings);
}

PacingSettings PacingDomain::settings() const {
  absl::MutexLock lock(&mu_);
  return settings_;
}

std::optional<uint32_t> PacingDomain::SlotOf(uint64_t session) const {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return std::nullopt;
  return it->second;
}

void PacingDomain::PublishSealed() {
  absl::MutexLock lock(&mu_);
  PublishSealedLocked();
}

void PacingDomain::PublishSealedLocked() {
  bool any = false;
  for (const auto& [session, slot] : slot_of_) {
    SlotState& st = slots_[slot];
    if (st.epoch != 0 || !st.lanes.valid()) continue;
    // Unsealed, the page's tenant could still hand out writable mappings of it: a BE peer that
    // read it could then be told anything by whoever got one. Its readers wait for the seal.
    if (!shm::ShmRegion::WritesSealed(st.lanes.fd())) continue;
    st.epoch = next_epoch_++;
    dir()->entries[slot].lanes_epoch.store(st.epoch, std::memory_order_release);
    any = true;
  }
  if (any) dir()->policy.members.fetch_add(1, std::memory_order_release);
}

pacingreg::LanesView PacingDomain::View(uint32_t slot, uint64_t now) const {
  const SlotState& st = slots_[slot];
  if (st.epoch == 0) return {};
  return pacingreg::ReadLanes(*static_cast<const pacingreg::LanesPage*>(st.lanes.data()), now);
}

void PacingDomain::RunSampler() {
  // Budgets time LS busy periods of about a millisecond from polls every kObserveNs: the
  // default timer slack (50 us) would blur them.
  prctl(PR_SET_TIMERSLACK, 1000UL, 0, 0, 0);
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    heartbeat_.fetch_add(1, std::memory_order_relaxed);
    if (slot_of_.empty()) {
      // Nothing to sample: sleep until a session joins (Assign signals), and start afresh then;
      // waking now and then all the same, so the watchdog sees the loop alive.
      last_sample_ns_ = 0;
      // No tenant, nothing in flight: the shares would otherwise stay as the last one left them.
      gpu_sample_.ls_busy_share = 0;
      gpu_sample_.be_busy_share = 0;
      ls_resting_->store(false, std::memory_order_relaxed);
      wake_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
      continue;
    }
    const uint64_t now = pacingreg::NowNs();
    const bool budgets = BudgetsTurnLocked(now);
    if (!budgets || last_sample_ns_ == 0 || now - last_sample_ns_ >= kSampleNs) {
      PublishSealedLocked();
      SampleLocked(now);
    }
    // Resting, the LS tenants mark nothing: there are no periods to time.
    const bool observing = budgets && rest_began_ns_ == 0;
    wake_.WaitWithTimeout(&mu_, absl::Nanoseconds(observing ? kObserveNs : kSampleNs));
  }
}

bool PacingDomain::BudgetsTurnLocked(uint64_t now) {
  const bool budgets = BudgetsActiveLocked();
  if (budgets) {
    // Resting ([compute] ls_rest_ms): the LS tenants mark nothing, there is nothing to observe.
    if (rest_began_ns_ != 0 && !RestHoldsLocked(now)) EndRestLocked();
    if (rest_began_ns_ == 0) {
      ObserveBudgetsLocked(now);
      MaybeRestLocked(now);
    }
  } else if (budgets_active_) {
    StopBudgetsLocked();
  }
  budgets_active_ = budgets;
  // From the first rest on, while every LS tenant's budget still releases the BE with room.
  const bool resting_on = budgets && settings_.ls_rest_ns != 0 && AllReleasedWithRoomLocked() &&
                          (rest_began_ns_ != 0 || ls_resting_->load(std::memory_order_relaxed));
  ls_resting_->store(resting_on, std::memory_order_relaxed);
  return budgets;
}

void PacingDomain::ObserveBudgets(uint64_t now) {
  absl::MutexLock lock(&mu_);
  PublishSealedLocked();
  BudgetsTurnLocked(now);
}

void PacingDomain::SetBeShareForTesting(uint64_t session, uint32_t share_ppm,
                                        uint32_t window_scale) {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it != slot_of_.end()) {
    dir()->entries[it->second].be_share_ppm.store(share_ppm, std::memory_order_relaxed);
    dir()->entries[it->second].be_window_scale.store(window_scale, std::memory_order_relaxed);
  }
}

void PacingDomain::SetQuietUntilForTesting(uint64_t until_ns) {
  absl::MutexLock lock(&mu_);
  dir()->policy.quiet_until_ns.store(until_ns, std::memory_order_relaxed);
}

void PacingDomain::SetRestUntilForTesting(uint64_t until_ns) {
  absl::MutexLock lock(&mu_);
  dir()->policy.rest_until_ns.store(until_ns, std::memory_order_relaxed);
}

uint32_t PacingDomain::BudgetOfLocked(uint32_t slot) const {
  const uint32_t own = slots_[slot].budget_pct;
  return own != 0 ? own : settings_.ls_budget_pct;
}

bool PacingDomain::BudgetsActiveLocked() const {
  const pacingreg::Policy& p = directory()->policy;
  if (!settings_.pacing || p.ls_tenants.load(std::memory_order_relaxed) == 0 ||
      p.be_tenants.load(std::memory_order_relaxed) == 0) {
    return false;
  }
  for (const auto& [session, slot] : slot_of_) {
    if (directory()->entries[slot].cls.load(std::memory_order_relaxed) == pacingreg::kLs &&
        BudgetOfLocked(slot) > pacing::kNoBudgetPct) {
      return true;
    }
  }
  return false;
}

void PacingDomain::StopBudgetsLocked() {
  for (const auto& [session, slot] : slot_of_) {
    ClearBudgetOutput(&dir()->entries[slot]);
    Budget& b = slots_[slot].budget;
    b.tracker.Reset();
    b.controller.set_budget_pct(BudgetOfLocked(slot));
  }
  quiet_until_ns_ = 0;
  dir()->policy.quiet_until_ns.store(0, std::memory_order_relaxed);
  rest_began_ns_ = 0;
  dir()->policy.rest_until_ns.store(0, std::memory_order_relaxed);
}

void PacingDomain::SampleLocked(uint64_t now) {
  const uint64_t elapsed =
      last_sample_ns_ == 0 || now <= last_sample_ns_ ? 0 : now - last_sample_ns_;
  if (now > last_sample_ns_) last_sample_ns_ = now;
  // Exponential decay: what happened kShareWindowNs ago weighs 1/e of what happens now. What a
  // sample sees is taken to have lasted since the previous one, so a late wake-up (a loaded
  // machine) weighs as much as the time it missed.
  const double keep = std::exp(-static_cast<double>(elapsed) / kShareWindowNs);
  bool ls_busy = false, be_busy = false;
  for (const auto& [session, slot] : slot_of_) {
    const pacingreg::LanesView v = View(slot, now);
    Sample& x = slots_[slot].sample;
    const bool ls = directory()->entries[slot].cls.load(std::memory_order_relaxed) ==
                    pacingreg::kLs;
    (ls ? ls_busy : be_busy) |= v.in_flight;
    if (v.in_flight) x.busy_ns += elapsed;
    // Held time (ended holds and the one going on) is spread over the following samples, at
    // most the elapsed time each (so the share never passes 1), and at most a window's worth is
    // owed (several threads held at once, or a tenant's lie).
    if (v.held_ns >= x.last_held_ns) {
      x.owed_held_ns = std::min(x.owed_held_ns + (v.held_ns - x.last_held_ns), kShareWindowNs);
    }
    x.last_held_ns = v.held_ns;  // a value that went back (the tenant's own writes) starts afresh
    if (elapsed == 0) continue;
    const uint64_t counted = std::min(x.owed_held_ns, elapsed);
    x.owed_held_ns -= counted;
    const double held_fraction = static_cast<double>(counted) / static_cast<double>(elapsed);
    const double busy_fraction = v.in_flight ? 1.0 : 0.0;
    x.busy_share = x.busy_share * keep + busy_fraction * (1 - keep);
    x.held_share = x.held_share * keep + held_fraction * (1 - keep);
  }
  if (elapsed == 0) return;
  GpuSample& g = gpu_sample_;
  if (ls_busy) g.ls_busy_ns += elapsed;
  if (be_busy) g.be_busy_ns += elapsed;
  g.ls_busy_share = g.ls_busy_share * keep + (ls_busy ? 1 - keep : 0);
  g.be_busy_share = g.be_busy_share * keep + (be_busy ? 1 - keep : 0);
}

std::optional<PacingStats> PacingDomain::Stats(uint64_t session) const {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return std::nullopt;
  const uint32_t slot = it->second;
  const pacingreg::LanesView v = View(slot, pacingreg::NowNs());
  const Sample& x = slots_[slot].sample;
  PacingStats st;
  st.ls = directory()->entries[slot].cls.load(std::memory_order_relaxed) == pacingreg::kLs;
  st.lanes = slots_[slot].epoch != 0;
  st.submissions = v.submissions;
  st.held_ns = v.held_ns;
  st.held_count = v.held_count;
  st.inflight = v.inflight;
  st.gpu_ns = v.gpu_ns;
  st.busy = v.in_flight;
  st.busy_share = st.ls ? std::clamp(x.busy_share, 0.0, 1.0) : 0;
  st.held_share = st.ls ? 0 : std::clamp(x.held_share, 0.0, 1.0);
  st.busy_ns = x.busy_ns;
  st.reserve_state = v.reserve_state;
  st.reserve_tpcs = v.reserve_tpcs;
  st.mps_client = v.mps_client;
  if (st.ls) {
    const Budget& b = slots_[slot].budget;
    const pacing::BudgetStatus& bs = b.controller.status();
    st.budget_pct = BudgetOfLocked(slot);
    st.budget_state = budgets_active_ ? bs.state
                      : st.budget_pct > pacing::kNoBudgetPct
                          ? pacing::BudgetState::kLearning
                          : pacing::BudgetState::kOff;
    const bool spending = budgets_active_ && bs.state == pacing::BudgetState::kSpending;
    st.be_share = !spending                                  ? 0
                  : bs.share_ppm == pacing::kUnheldSharePpm ? HUGE_VAL
                                                            : static_cast<double>(bs.share_ppm) /
                                                                  pacing::kFullSharePpm;
    st.be_window_scale = spending ? bs.window_scale : 1;
    st.stretch = bs.stretch;
    st.period_ns = b.measured_ns;
    st.alone_ns = b.measured_alone_ns;
    st.periods = bs.periods;
    st.alone_periods = b.alone_periods;
    st.dropped_periods = b.tracker.dropped();
    st.resting = rest_began_ns_ != 0;
  }
  return st;
}

PacingSummary PacingDomain::Summary() const {
  absl::MutexLock lock(&mu_);
  const uint64_t now = pacingreg::NowNs();
  PacingSummary sum;
  sum.ls_busy_ns = gpu_sample_.ls_busy_ns;
  sum.be_busy_ns = gpu_sample_.be_busy_ns;
  sum.ls_busy_share = std::clamp(gpu_sample_.ls_busy_share, 0.0, 1.0);
  sum.be_busy_share = std::clamp(gpu_sample_.be_busy_share, 0.0, 1.0);
  for (const auto& [session, slot] : slot_of_) {
    const uint32_t cls = directory()->entries[slot].cls.load(std::memory_order_relaxed);
    sum.be_tenants += cls == pacingreg::kBe;
    if (cls != pacingreg::kLs) continue;
    ++sum.ls_tenants;
    if (!sum.ls_busy) sum.ls_busy = View(slot, now).in_flight;
  }
  return sum;
}

}  // namespace missile::daemon
