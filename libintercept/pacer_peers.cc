// The pacer's view of the other tenants of its GPU (pacer.h): their lanes pages, mapped as the
// directory's entries change, what the LS tenants' pages and budgets say (ObserveLs,
// ReleasedByLs), and which other BE tenants count for the weighted share (ActivePeers).
#include <algorithm>
#include <utility>

#include "pacer.h"

namespace missile::shim {
namespace {

using pacingreg::kSlots;

// How often a BE pacer tries again to fetch the pages of tenants that joined, at most, while
// fetching fails (the daemon may be busy); when the directory is unchanged a look costs one load.
constexpr uint64_t kPeerRefreshNs = 1'000'000;
// Another BE tenant counts for the weighted share only while it submitted this recently.
constexpr uint64_t kPeerActiveNs = 50'000'000;
// Another BE tenant's work counts as running while the GPU has not reported it done (its lanes),
// but no longer than this past its predicted end: a tenant that stopped launching may leave up
// to InflightWindow::MarkEvery - 1 items whose completion nobody has asked the GPU to report
// yet.
constexpr uint64_t kUnreportedGraceNs = 1'000'000;

}  // namespace

void Pacer::RefreshPeers(uint64_t now) {
  const uint64_t members = dir().policy.members.load(std::memory_order_acquire);
  if (members == peers_seen_.load(std::memory_order_relaxed)) return;
  const uint64_t failed = peers_failed_ns_.load(std::memory_order_relaxed);
  if (failed != 0 && now - failed < kPeerRefreshNs) return;
  // Fetch and map outside the lock (a side-channel round trip each), then swap under it: a
  // reader holds the lock while it reads a page, so none reads a page being unmapped.
  bool complete = true;
  std::array<PeerPage, kSlots> fresh;
  std::array<bool, kSlots> changed{};
  {
    absl::ReaderMutexLock lock(&peers_mu_);
    for (uint32_t i = 0; i < kSlots; ++i) {
      if (i == slot_index_) continue;
      const uint64_t epoch = dir().entries[i].lanes_epoch.load(std::memory_order_acquire);
      if (epoch == peers_[i].epoch) continue;
      changed[i] = true;
      if (epoch == 0 || !open_peer_) continue;  // left (or none yet): forget its page
      absl::StatusOr<int> fd = open_peer_(i, epoch);
      absl::StatusOr<shm::ShmRegion> page =
          fd.ok() ? shm::ShmRegion::Attach(*fd, sizeof(pacingreg::LanesPage),
                                           shm::Access::kReadOnly)
                  : absl::StatusOr<shm::ShmRegion>(fd.status());
      if (!page.ok()) {
        // It left meanwhile (NOT_FOUND), or the daemon cannot answer now: try again later.
        complete = false;
        changed[i] = false;
        continue;
      }
      fresh[i] = {epoch, *std::move(page)};
    }
  }
  {
    absl::MutexLock lock(&peers_mu_);
    for (uint32_t i = 0; i < kSlots; ++i) {
      if (changed[i]) std::swap(peers_[i], fresh[i]);
    }
  }
  // `fresh` now holds the pages replaced: unmapped here, outside the lock.
  if (complete) {
    peers_seen_.store(members, std::memory_order_relaxed);
    peers_failed_ns_.store(0, std::memory_order_relaxed);
  } else {
    peers_failed_ns_.store(now, std::memory_order_relaxed);
  }
}

std::optional<pacingreg::LanesView> Pacer::PeerView(uint32_t slot, uint64_t now) const {
  const PeerPage& p = peers_[slot];
  if (p.epoch == 0 || dir().entries[slot].lanes_epoch.load(std::memory_order_acquire) != p.epoch) {
    return std::nullopt;  // left, or not mapped here yet
  }
  return pacingreg::ReadLanes(*static_cast<const pacingreg::LanesPage*>(p.page.data()), now);
}

pacing::LsObservation Pacer::ObserveLs(uint64_t now) const {
  pacing::LsObservation seen;
  const pacingreg::Policy& pol = dir().policy;
  if (pol.ls_tenants.load(std::memory_order_acquire) == 0) return seen;
  const uint64_t stale = pol.ls_stale_ns.load(std::memory_order_relaxed);
  const uint64_t idle = pol.ls_idle_ns.load(std::memory_order_relaxed);
  uint32_t share_busy = pacing::kUnheldSharePpm, share_any = pacing::kUnheldSharePpm;
  uint32_t scale_any = pacing::kMaxWindowScale;
  bool any_busy = false, any_ls = false;
  absl::ReaderMutexLock lock(&peers_mu_);
  for (uint32_t i = 0; i < kSlots; ++i) {
    const pacingreg::Entry& e = dir().entries[i];
    if (i == slot_index_ || e.cls.load(std::memory_order_acquire) != pacingreg::kLs) continue;
    any_ls = true;
    uint32_t share = e.be_share_ppm.load(std::memory_order_relaxed);
    if (share > pacing::kMaxSharePpm && share != pacing::kUnheldSharePpm) {
      share = pacing::kMaxSharePpm;
    }
    const uint32_t scale = std::clamp<uint32_t>(e.be_window_scale.load(std::memory_order_relaxed),
                                                1, pacing::kMaxWindowScale);
    share_any = std::min(share_any, share);
    scale_any = std::min(scale_any, scale);
    const std::optional<pacingreg::LanesView> v = PeerView(i, now);
    if (!v || v->last_submit_ns == 0 || now - v->last_submit_ns >= stale) continue;
    seen.newest_submit_ns = std::max(seen.newest_submit_ns, v->last_submit_ns);
    const bool counts = pacing::LsInFlightCounts(v->in_flight, v->last_submit_ns, now, stale);
    seen.in_flight = seen.in_flight || counts;
    if (counts || now - v->last_submit_ns < idle) {
      any_busy = true;
      share_busy = std::min(share_busy, share);
    }
  }
  seen.share_ppm = any_busy ? share_busy : share_any;
  seen.window_scale = scale_any;
  // ReleasedByLs's rule, from this loop (the clamp above keeps kUnheldSharePpm).
  seen.released = any_ls && share_any == pacing::kUnheldSharePpm;
  return seen;
}

bool Pacer::ReleasedByLs() const {
  bool any = false;
  for (uint32_t i = 0; i < kSlots; ++i) {
    const pacingreg::Entry& e = dir().entries[i];
    if (i == slot_index_ || e.cls.load(std::memory_order_acquire) != pacingreg::kLs) continue;
    if (e.be_share_ppm.load(std::memory_order_relaxed) != pacing::kUnheldSharePpm) return false;
    any = true;
  }
  return any;
}

std::vector<pacing::ShareEntry> Pacer::ActivePeers(uint64_t now) const {
  std::vector<pacing::ShareEntry> peers;
  // This tenant is the GPU's one BE tenant (a released BE's usual case): nobody to scan for.
  if (dir().policy.be_tenants.load(std::memory_order_relaxed) <= 1) return peers;
  absl::ReaderMutexLock lock(&peers_mu_);
  for (uint32_t i = 0; i < kSlots; ++i) {
    const pacingreg::Entry& e = dir().entries[i];
    if (i == slot_index_ || e.cls.load(std::memory_order_relaxed) != pacingreg::kBe) continue;
    const std::optional<pacingreg::LanesView> v = PeerView(i, now);
    if (!v || !v->active) continue;
    if (v->last_submit_ns == 0 || now - v->last_submit_ns >= kPeerActiveNs) continue;  // quiet
    // Running: what the GPU has not finished yet, not what the prediction says. A tenant's work
    // that waits behind another one's time slice outlasts its prediction, and letting the other
    // one launch more then would keep the first waiting (the GPU time-slices processes).
    peers.push_back({v->gpu_ns, std::max<uint32_t>(e.weight.load(std::memory_order_relaxed), 1),
                     v->in_flight && now < v->running_until_ns + kUnreportedGraceNs,
                     v->last_submit_ns});
  }
  return peers;
}

}  // namespace missile::shim
