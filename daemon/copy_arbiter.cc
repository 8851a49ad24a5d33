#include "copy_arbiter.h"

#include <sys/eventfd.h>
#include <sys/mman.h>
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <chrono>
#include <cstring>

#include "absl/container/flat_hash_set.h"
#include "spdlog/spdlog.h"

namespace missile::daemon {
namespace {

using copych::kRingSlots;
using copych::Region;
using copych::Ring;

constexpr uint64_t kMaxCopyBytes = uint64_t{1} << 40;
// A chunk takes tens of microseconds on the link (2 MiB at 55 GB/s: 38 us, shared/device/H200.md);
// a grant outstanding this long belongs to a tenant that is stopped or stuck. It stops counting
// against the in-flight limit, so one tenant cannot hold the link for everyone.
constexpr uint64_t kGrantTimeoutNs = 500'000'000;

uint64_t NowNs() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(
             std::chrono::steady_clock::now().time_since_epoch())
      .count();
}

pcie::TenantClass Cls(bool ls) {
  return ls ? pcie::TenantClass::kLatencySensitive : pcie::TenantClass::kBestEffort;
}

}  // namespace

struct CopyArbiter::Channel {
  uint64_t session = 0;
  int memfd = -1;
  Region* region = nullptr;
  // What the daemon has consumed of the tenant's rings (private: the tenant cannot move them).
  uint64_t request_tail[2] = {0, 0};
  uint64_t completion_tail[2] = {0, 0};
  uint64_t grant_head[2] = {0, 0};
  // Scheduler request id -> the tenant's request id, and the grants in flight.
  absl::flat_hash_map<pcie::RequestId, uint64_t> requests[2];
  absl::flat_hash_map<pcie::GrantId, uint64_t> inflight[2];  // grant -> when granted
  absl::flat_hash_set<pcie::GrantId> expired[2];             // timed out; completion optional
  uint64_t outstanding[2] = {0, 0};  // requests not yet done
  uint64_t bytes[2] = {0, 0};

  ~Channel() {
    if (region != nullptr) munmap(region, copych::kRegionBytes);
    if (memfd >= 0) close(memfd);
  }
};

absl::StatusOr<std::unique_ptr<CopyArbiter>> CopyArbiter::Create(
    const pcie::FairScheduler::Config& config) {
  std::unique_ptr<CopyArbiter> a(new CopyArbiter());
  a->config_ = config;
  for (int d = 0; d < 2; ++d) {
    auto s = pcie::FairScheduler::Create(config);
    if (!s.ok()) return s.status();
    absl::MutexLock lock(&a->mu_);
    a->sched_[d] = std::make_unique<pcie::FairScheduler>(std::move(*s));
  }
  a->doorbell_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (a->doorbell_ < 0) return absl::InternalError("eventfd failed");
  CopyArbiter* raw = a.get();
  a->thread_ = std::thread([raw] { raw->Run(); });
  return a;
}

CopyArbiter::~CopyArbiter() {
  stop_ = true;
  uint64_t one = 1;
  if (doorbell_ >= 0) (void)!write(doorbell_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  if (doorbell_ >= 0) close(doorbell_);
}

absl::StatusOr<std::pair<int, int>> CopyArbiter::OpenChannel(uint64_t session,
                                                             bool latency_sensitive,
                                                             uint32_t weight) {
  absl::MutexLock lock(&mu_);
  if (channels_.contains(session)) {
    return absl::AlreadyExistsError("session " + std::to_string(session) +
                                    " already has a copy channel on this GPU");
  }
  auto c = std::make_unique<Channel>();
  c->session = session;
  c->memfd = memfd_create("missile-copy-channel", MFD_CLOEXEC);
  if (c->memfd < 0 || ftruncate(c->memfd, copych::kRegionBytes) != 0) {
    return absl::InternalError(std::string("copy channel memory: ") + strerror(errno));
  }
  void* p = mmap(nullptr, copych::kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, c->memfd, 0);
  if (p == MAP_FAILED) return absl::InternalError("mapping the copy channel failed");
  c->region = new (p) Region();  // zero-filled by ftruncate; construct the atomics in place
  c->region->magic = copych::kMagic;
  c->region->version = copych::kVersion;
  c->region->chunk_bytes = config_.chunk_bytes;
  c->region->bypass_bytes = config_.min_bypass_bytes;
  for (int d = 0; d < 2; ++d) {
    if (absl::Status s = sched_[d]->AddTenant(session, Cls(latency_sensitive), weight); !s.ok()) {
      for (int u = 0; u < d; ++u) sched_[u]->RemoveTenant(session).IgnoreError();
      return s;
    }
  }
  int mem = fcntl(c->memfd, F_DUPFD_CLOEXEC, 0);
  int bell = fcntl(doorbell_, F_DUPFD_CLOEXEC, 0);
  channels_[session] = std::move(c);
  return std::make_pair(mem, bell);
}

void CopyArbiter::DropLocked(uint64_t session, const char* why) {
  auto it = channels_.find(session);
  if (it == channels_.end()) return;
  for (int d = 0; d < 2; ++d) sched_[d]->RemoveTenant(session).IgnoreError();
  it->second->region->closed.store(1, std::memory_order_release);
  for (int d = 0; d < 2; ++d) {
    it->second->region->ring[d].grant_futex.fetch_add(1);
    copych::FutexWakeAll(&it->second->region->ring[d].grant_futex);
  }
  if (std::string(why) != "session ended") {
    spdlog::warn("copy channel of session {} dropped: {}", session, why);
  }
  channels_.erase(it);
}

void CopyArbiter::CloseChannel(uint64_t session) {
  absl::MutexLock lock(&mu_);
  DropLocked(session, "session ended");
}

void CopyArbiter::SetPolicy(uint64_t session, bool latency_sensitive, uint32_t weight) {
  absl::MutexLock lock(&mu_);
  if (!channels_.contains(session)) return;
  for (int d = 0; d < 2; ++d) {
    sched_[d]->SetClass(session, Cls(latency_sensitive)).IgnoreError();
    sched_[d]->SetWeight(session, weight).IgnoreError();
  }
}

std::vector<PcieUse> CopyArbiter::Usage() {
  absl::MutexLock lock(&mu_);
  uint64_t now = NowNs();
  absl::flat_hash_map<uint64_t, PcieUse> by_session;
  for (int d = 0; d < 2; ++d) {
    for (const pcie::TenantStats& t : sched_[d]->Snapshot(now).tenants) {
      PcieUse& u = by_session[t.id];
      u.session = t.id;
      u.bytes[d] = t.bytes_granted;
      u.share[d] = t.share;
    }
  }
  std::vector<PcieUse> out;
  for (auto& [id, u] : by_session) out.push_back(u);
  return out;
}

bool CopyArbiter::Poll() {
  uint64_t now = NowNs();
  bool moved = false;
  std::vector<uint64_t> bad;
  for (auto& [session, cp] : channels_) {
    Channel& c = *cp;
    for (int d = 0; d < 2; ++d) {
      Ring& r = c.region->ring[d];
      uint64_t head = r.request_head.load(std::memory_order_acquire);
      if (head - c.request_tail[d] > kRingSlots) {
        bad.push_back(session);
        break;
      }
      for (; c.request_tail[d] < head; ++c.request_tail[d]) {
        copych::RequestEntry e = r.requests[c.request_tail[d] % kRingSlots];
        if (e.id == 0 || e.bytes == 0 || e.bytes > kMaxCopyBytes || c.outstanding[d] >= kRingSlots) {
          bad.push_back(session);
          break;
        }
        auto id = sched_[d]->Submit(session, e.bytes, now);
        if (!id.ok()) {
          bad.push_back(session);
          break;
        }
        c.requests[d][*id] = e.id;
        ++c.outstanding[d];
        moved = true;
      }
      head = r.completion_head.load(std::memory_order_acquire);
      for (; c.completion_tail[d] < head; ++c.completion_tail[d]) {
        uint64_t g = r.completions[c.completion_tail[d] % kRingSlots];
        if (c.expired[d].erase(g)) continue;  // already written off: a late completion
        if (!c.inflight[d].erase(g)) {
          bad.push_back(session);
          break;
        }
        auto done = sched_[d]->Complete(g, now);
        if (done.ok() && done->has_value()) {
          c.requests[d].erase((*done)->request);
          --c.outstanding[d];
        }
        moved = true;
      }
    }
  }
  for (uint64_t s : bad) DropLocked(s, "malformed entry in its rings");
  // Write off grants that have been out far too long.
  for (auto& [session, cp] : channels_) {
    for (int d = 0; d < 2; ++d) {
      for (auto it = cp->inflight[d].begin(); it != cp->inflight[d].end();) {
        if (now - it->second < kGrantTimeoutNs) {
          ++it;
          continue;
        }
        spdlog::warn("session {}: grant {} not completed after {} ms; no longer waiting for it",
                     session, it->first, kGrantTimeoutNs / 1000000);
        auto done = sched_[d]->Complete(it->first, now);
        if (done.ok() && done->has_value()) {
          cp->requests[d].erase((*done)->request);
          --cp->outstanding[d];
        }
        cp->expired[d].insert(it->first);
        cp->inflight[d].erase(it++);
        moved = true;
      }
    }
  }
  // Hand out what the schedulers decide, and wake the tenants that got something.
  std::vector<Channel*> woken;
  for (int d = 0; d < 2; ++d) {
    while (std::optional<pcie::Grant> g = sched_[d]->NextGrant(now)) {
      auto it = channels_.find(g->tenant);
      if (it == channels_.end()) continue;
      Channel& c = *it->second;
      Ring& r = c.region->ring[d];
      copych::GrantEntry& e = r.grants[c.grant_head[d] % kRingSlots];
      e.request = c.requests[d][g->request];
      e.offset = g->offset;
      e.length = g->length;
      e.grant = g->id;
      r.grant_head.store(++c.grant_head[d], std::memory_order_release);
      c.inflight[d][g->id] = now;
      c.bytes[d] += g->length;
      woken.push_back(&c);
      moved = true;
    }
  }
  for (Channel* c : woken) {
    for (int d = 0; d < 2; ++d) {
      c->region->ring[d].grant_futex.fetch_add(1, std::memory_order_release);
      copych::FutexWakeAll(&c->region->ring[d].grant_futex);
    }
  }
  return moved;
}

void CopyArbiter::Run() {
  // Tenants ring the doorbell after every request and completion, so the thread can sleep on
  // it even while chunks are in flight: a completion wakes it within microseconds. The timeout
  // is a safety net for a tenant that wrote its ring and died before ringing.
  while (!stop_) {
    bool moved;
    {
      absl::MutexLock lock(&mu_);
      moved = Poll();
    }
    if (moved) continue;
    pollfd p{doorbell_, POLLIN, 0};
    timespec timeout{0, 10 * 1000 * 1000};
    if (ppoll(&p, 1, &timeout, nullptr) > 0) {
      uint64_t v;
      (void)!read(doorbell_, &v, sizeof(v));
    }
  }
}

}  // namespace missile::daemon
