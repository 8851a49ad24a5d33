#include "pacing_domain.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <string>

namespace missile::daemon {

using pacingreg::kLanes;
using pacingreg::kSlots;

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
  absl::MutexLock lock(&d->mu_);
  d->Publish(settings);
  return d;
}

PacingDomain::~PacingDomain() {
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

absl::StatusOr<int> PacingDomain::Join(uint64_t session, int pid, bool ls, uint32_t weight) {
  if (absl::Status s = Assign(session, pid, ls, weight); !s.ok()) return s;
  int fd = fcntl(memfd_, F_DUPFD_CLOEXEC, 0);
  if (fd < 0) return absl::InternalError("duplicating the pacing region's descriptor failed");
  return fd;
}

absl::Status PacingDomain::Assign(uint64_t session, int pid, bool ls, uint32_t weight) {
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
    s.cls.store(ls ? pacingreg::kLs : pacingreg::kBe, std::memory_order_relaxed);
    s.session.store(session, std::memory_order_release);
    slot_of_.emplace(session, *free);
    CountLs();
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
  slot_of_.erase(it);
  CountLs();
}

void PacingDomain::SetPolicy(uint64_t session, bool ls, uint32_t weight) {
  absl::MutexLock lock(&mu_);
  auto it = slot_of_.find(session);
  if (it == slot_of_.end()) return;
  pacingreg::Slot& s = region_->slots[it->second];
  s.weight.store(weight == 0 ? 1 : weight, std::memory_order_relaxed);
  s.cls.store(ls ? pacingreg::kLs : pacingreg::kBe, std::memory_order_release);
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

std::optional<PacingStats> PacingDomain::Stats(uint64_t session) const {
  std::optional<uint32_t> slot = SlotOf(session);
  if (!slot) return std::nullopt;
  const pacingreg::Slot& s = region_->slots[*slot];
  PacingStats st;
  st.ls = s.cls.load(std::memory_order_relaxed) == pacingreg::kLs;
  st.submissions = s.submissions.load(std::memory_order_relaxed);
  st.held_ns = s.held_ns.load(std::memory_order_relaxed);
  st.held_count = s.held_count.load(std::memory_order_relaxed);
  st.inflight = s.inflight.load(std::memory_order_relaxed);
  st.gpu_ns = s.gpu_ns.load(std::memory_order_relaxed);
  const uint32_t used = std::min(s.lanes_used.load(std::memory_order_relaxed), kLanes);
  for (uint32_t l = 0; l < used && !st.busy; ++l) {
    st.busy = s.lanes[l].submitted.load(std::memory_order_relaxed) !=
              s.lanes[l].completed.load(std::memory_order_relaxed);
  }
  return st;
}

}  // namespace missile::daemon
