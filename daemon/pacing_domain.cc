#include "pacing_domain.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <cmath>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/time/time.h"

namespace missile::daemon {

using pacingreg::kLanes;
using pacingreg::kSlots;

namespace {

constexpr uint64_t kUs = 1000;
constexpr uint64_t kMs = 1000 * 1000;

absl::Status CheckRange(const char* field, const std::optional<uint64_t>& v, uint64_t min,
                        uint64_t max) {
  if (v && (*v < min || *v > max)) {
    return absl::InvalidArgumentError(absl::StrCat(field, " must be in [", min, ", ", max,
                                                   "], got ", *v));
  }
  return absl::OkStatus();
}

const char* OnOff(bool b) { return b ? "on" : "off"; }

}  // namespace

absl::StatusOr<PacingSettings> ApplyPacingChange(const PacingSettings& before,
                                                 const PacingChange& change) {
  // The ranges of [compute] (daemon/config.cc).
  for (absl::Status s : {CheckRange("window_items", change.window_items, 1, 1024),
                         CheckRange("window_us", change.window_us, 0, 1'000'000),
                         CheckRange("ls_idle_us", change.ls_idle_us, 0, 1'000'000),
                         CheckRange("ls_stale_ms", change.ls_stale_ms, 1, 600'000),
                         CheckRange("max_hold_ms", change.max_hold_ms, 0, 600'000),
                         CheckRange("unknown_us", change.unknown_us, 0, 1'000'000),
                         CheckRange("share_slack_us", change.share_slack_us, 0, 1'000'000),
                         CheckRange("refill_us", change.refill_us, 0, 1'000'000)}) {
    if (!s.ok()) return s;
  }
  PacingSettings after = before;
  if (change.pacing) after.pacing = *change.pacing;
  if (change.window_items) after.window_items = static_cast<uint32_t>(*change.window_items);
  if (change.window_us) after.window_ns = *change.window_us * kUs;
  if (change.ls_idle_us) after.ls_idle_ns = *change.ls_idle_us * kUs;
  if (change.ls_stale_ms) after.ls_stale_ns = *change.ls_stale_ms * kMs;
  if (change.max_hold_ms) after.max_hold_ns = *change.max_hold_ms * kMs;
  if (change.unknown_us) after.unknown_ns = *change.unknown_us * kUs;
  if (change.share_slack_us) after.share_slack_ns = *change.share_slack_us * kUs;
  if (change.refill_us) after.refill_ns = *change.refill_us * kUs;
  return after;
}

std::string DescribePacingChange(const PacingSettings& before, const PacingSettings& after) {
  std::vector<std::string> parts;
  if (before.pacing != after.pacing) {
    parts.push_back(absl::StrCat("pacing ", OnOff(before.pacing), " -> ", OnOff(after.pacing)));
  }
  auto number = [&parts](const char* field, uint64_t from, uint64_t to) {
    if (from != to) parts.push_back(absl::StrCat(field, " ", from, " -> ", to));
  };
  number("window_items", before.window_items, after.window_items);
  number("window_us", before.window_ns / kUs, after.window_ns / kUs);
  number("ls_idle_us", before.ls_idle_ns / kUs, after.ls_idle_ns / kUs);
  number("ls_stale_ms", before.ls_stale_ns / kMs, after.ls_stale_ns / kMs);
  number("max_hold_ms", before.max_hold_ns / kMs, after.max_hold_ns / kMs);
  number("unknown_us", before.unknown_ns / kUs, after.unknown_ns / kUs);
  number("share_slack_us", before.share_slack_ns / kUs, after.share_slack_ns / kUs);
  number("refill_us", before.refill_ns / kUs, after.refill_ns / kUs);
  return parts.empty() ? "unchanged" : absl::StrJoin(parts, ", ");
}

absl::StatusOr<std::unique_ptr<PacingDomain>> PacingDomain::Create(
    const PacingSettings& settings) {
  std::unique_ptr<PacingDomain> d(new PacingDomain());
  d->memfd_ = memfd_create("missile-pacing", MFD_CLOEXEC);
  if (d->memfd_ < 0) return absl::InternalError("memfd_create for the pacing region failed");
  if (ftruncate(d->memfd_, static_cast<off_t>(pacingreg::kRegionBytes)) != 0) {
    return absl::InternalError("sizing the pacing region failed");
  }
  void* p = mmap(nullptr, pacingreg::kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED,
                 d->memfd_, 0);
  if (p == MAP_FAILED) return absl::InternalError("mapping the pacing region failed");
  d->region_ = static_cast<pacingreg::Region*>(p);  // zeroed by ftruncate
  pacingreg::InitRegion(d->region_);
  {
    absl::MutexLock lock(&d->mu_);
    d->Publish(settings);
  }
  d->sampler_ = std::thread([domain = d.get()] { domain->RunSampler(); });
  return d;
}

PacingDomain::~PacingDomain() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    wake_.Signal();
  }
  if (sampler_.joinable()) sampler_.join();
  if (region_ != nullptr) munmap(region_, pacingreg::kRegionBytes);
  if (memfd_ >= 0) close(memfd_);
}

void PacingDomain::Publish(const PacingSettings& s) {
  settings_ = s;
  pacingreg::Policy& p = region_->header.policy;
  p.window_items.store(s.window_items, std::memory_order_relaxed);
  p.window_ns.store(s.window_ns, std::memory_order_relaxed);
  p.ls_idle_ns.store(s.ls_idle_ns, std::memory_order_relaxed);
  p.ls_stale_ns.store(s.ls_stale_ns, std::memory_order_relaxed);
  p.max_hold_ns.store(s.max_hold_ns, std::memory_order_relaxed);
  p.unknown_ns.store(s.unknown_ns, std::memory_order_relaxed);
  p.share_slack_ns.store(s.share_slack_ns, std::memory_order_relaxed);
  p.refill_ns.store(s.refill_ns, std::memory_order_relaxed);
  p.pacing.store(s.pacing ? 1 : 0, std::memory_order_relaxed);
  p.generation.fetch_add(1, std::memory_order_release);
}

void PacingDomain::CountLs() {
  uint32_t ls = 0, be = 0;
  for (const auto& [session, slot] : slot_of_) {
    const uint32_t cls = region_->slots[slot].cls.load(std::memory_order_relaxed);
    ls += cls == pacingreg::kLs;
    be += cls == pacingreg::kBe;
  }
  region_->header.policy.ls_tenants.store(ls, std::memory_order_release);
  region_->header.policy.be_tenants.store(be, std::memory_order_release);
}

absl::StatusOr<int> PacingDomain::Join(uint64_t session, int pid, TenantClass cls,
                                       uint32_t weight) {
  if (absl::Status s = Assign(session, pid, cls, weight); !s.ok()) return s;
  int fd = fcntl(memfd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("duplicating the pacing region's descriptor failed");
  return fd;
}

absl::Status PacingDomain::Assign(uint64_t session, int pid, TenantClass cls, uint32_t weight) {
  if (session == 0) return absl::InvalidArgumentError("no session");
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) {
    std::optional<uint32_t> free;
    for (uint32_t i = 0; i < kSlots && !free; ++i) {
      if (region_->slots[i].session.load(std::memory_order_relaxed) == 0) free = i;
    }
    if (!free) {
      return absl::ResourceExhaustedError("every pacing slot of this GPU is taken (" +
                                          std::to_string(kSlots) + " tenants)");
    }
    pacingreg::Slot& s = region_->slots[*free];
    // Start clean: a slot holds nothing of its previous session.
    for (uint32_t l = 0; l < kLanes; ++l) {
      s.lanes[l].submitted.store(0, std::memory_order_relaxed);
      s.lanes[l].completed.store(0, std::memory_order_relaxed);
      s.lanes[l].stream.store(0, std::memory_order_relaxed);
    }
    s.last_submit_ns.store(0, std::memory_order_relaxed);
    s.held_ns.store(0, std::memory_order_relaxed);
    s.held_count.store(0, std::memory_order_relaxed);
    s.inflight.store(0, std::memory_order_relaxed);
    s.gpu_ns.store(0, std::memory_order_relaxed);
    s.active.store(0, std::memory_order_relaxed);
    s.lanes_used.store(0, std::memory_order_relaxed);
    s.submissions.store(0, std::memory_order_relaxed);
    s.pid.store(pid, std::memory_order_relaxed);
    s.weight.store(weight == 0 ? 1 : weight, std::memory_order_relaxed);
    s.cls.store(cls == TenantClass::kLatencySensitive ? pacingreg::kLs : pacingreg::kBe, std::memory_order_relaxed);
    s.session.store(session, std::memory_order_release);
    samples_[*free] = Sample();
    slot_of_.emplace(session, *free);
    CountLs();
    wake_.Signal();  // the sampler sleeps while no slot is taken
  }
  return absl::OkStatus();
}

void PacingDomain::Leave(uint64_t session) {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return;
  pacingreg::Slot& s = region_->slots[it->second];
  // First make every lane read idle, then free the slot: a reader that still sees the session
  // sees nothing in flight.
  for (uint32_t l = 0; l < kLanes; ++l) {
    s.lanes[l].completed.store(s.lanes[l].submitted.load(std::memory_order_relaxed),
                               std::memory_order_release);
  }
  s.active.store(0, std::memory_order_release);
  s.cls.store(pacingreg::kFree, std::memory_order_release);
  s.session.store(0, std::memory_order_release);
  samples_[it->second] = Sample();
  slot_of_.erase(it);
  CountLs();
}

void PacingDomain::SetPolicy(uint64_t session, TenantClass cls, uint32_t weight) {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return;
  pacingreg::Slot& s = region_->slots[it->second];
  s.weight.store(weight == 0 ? 1 : weight, std::memory_order_relaxed);
  s.cls.store(cls == TenantClass::kLatencySensitive ? pacingreg::kLs : pacingreg::kBe, std::memory_order_release);
  CountLs();
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

bool PacingDomain::LanesBusy(const pacingreg::Slot& s) const {
  const uint32_t used = std::min(s.lanes_used.load(std::memory_order_relaxed), kLanes);
  for (uint32_t l = 0; l < used; ++l) {
    if (s.lanes[l].submitted.load(std::memory_order_relaxed) !=
        s.lanes[l].completed.load(std::memory_order_relaxed)) {
      return true;
    }
  }
  return false;
}

void PacingDomain::RunSampler() {
  absl::MutexLock lock(&mu_);
  while (!stopping_) {
    heartbeat_.fetch_add(1, std::memory_order_relaxed);
    if (slot_of_.empty()) {
      // Nothing to sample: sleep until a session joins (Join signals), and start afresh then;
      // waking now and then all the same, so the watchdog sees the loop alive.
      last_sample_ns_ = 0;
      wake_.WaitWithTimeout(&mu_, absl::Milliseconds(100));
      continue;
    }
    SampleLocked(pacingreg::NowNs());
    wake_.WaitWithTimeout(&mu_, absl::Nanoseconds(kSampleNs));
  }
}

void PacingDomain::SampleLocked(uint64_t now) {
  const uint64_t elapsed =
      last_sample_ns_ == 0 || now <= last_sample_ns_ ? 0 : now - last_sample_ns_;
  if (now > last_sample_ns_) last_sample_ns_ = now;
  // Exponential decay: what happened kShareWindowNs ago weighs 1/e of what happens now. What a
  // sample sees is taken to have lasted since the previous one, so a late wake-up (a loaded
  // machine) weighs as much as the time it missed.
  const double keep = std::exp(-static_cast<double>(elapsed) / kShareWindowNs);
  for (const auto& [session, slot] : slot_of_) {
    const pacingreg::Slot& s = region_->slots[slot];
    Sample& x = samples_[slot];
    // The tenant adds a hold's time when the hold ends: the growth is spread over the following
    // samples, at most the elapsed time each (so the share never passes 1), and at most a
    // window's worth is owed (several threads held at once).
    const uint64_t held = s.held_ns.load(std::memory_order_relaxed);
    if (held >= x.last_held_ns) {
      x.owed_held_ns = std::min(x.owed_held_ns + (held - x.last_held_ns), kShareWindowNs);
    }
    x.last_held_ns = held;  // a value that went back (the tenant's own writes) starts afresh
    if (elapsed == 0) continue;
    const uint64_t counted = std::min(x.owed_held_ns, elapsed);
    x.owed_held_ns -= counted;
    const double held_fraction = static_cast<double>(counted) / static_cast<double>(elapsed);
    const double busy_fraction = LanesBusy(s) ? 1.0 : 0.0;
    x.busy_share = x.busy_share * keep + busy_fraction * (1 - keep);
    x.held_share = x.held_share * keep + held_fraction * (1 - keep);
  }
}

std::optional<PacingStats> PacingDomain::Stats(uint64_t session) const {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return std::nullopt;
  const pacingreg::Slot& s = region_->slots[it->second];
  const Sample& x = samples_[it->second];
  PacingStats st;
  st.ls = s.cls.load(std::memory_order_relaxed) == pacingreg::kLs;
  st.submissions = s.submissions.load(std::memory_order_relaxed);
  st.held_ns = s.held_ns.load(std::memory_order_relaxed);
  st.held_count = s.held_count.load(std::memory_order_relaxed);
  st.inflight = s.inflight.load(std::memory_order_relaxed);
  st.gpu_ns = s.gpu_ns.load(std::memory_order_relaxed);
  st.busy = LanesBusy(s);
  st.busy_share = st.ls ? std::clamp(x.busy_share, 0.0, 1.0) : 0;
  st.held_share = st.ls ? 0 : std::clamp(x.held_share, 0.0, 1.0);
  return st;
}

}  // namespace missile::daemon
