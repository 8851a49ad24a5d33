#include "copy_arbiter.h"

#include <fcntl.h>
#include <poll.h>
#include <sched.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstring>
#include <string>

#include "logger.h"

namespace missile::daemon {
namespace {

using copych::kGates;
using copych::Region;
using copych::Ring;

constexpr uint64_t kMaxCopyBytes = uint64_t{1} << 40;
// A chunk takes tens of microseconds on the link (2 MiB at 55 GB/s: 38 us,
// docs/hardware/h200.md, "PCIe"); a grant outstanding this long belongs to a tenant that is
// stopped or stuck. It stops counting against the in-flight limit, so one tenant cannot hold
// the link for everyone.
constexpr uint64_t kGrantTimeoutNs = 500'000'000;
// Polling steps once the spin window has passed: while requests are outstanding (a copy
// waiting behind a kernel for its stream to reach it), and when nothing is.
constexpr long kBusyNapNs = 20'000;
constexpr long kIdleSleepNs = 10'000'000;

}  // namespace

struct CopyArbiter::Channel {
  uint64_t session = 0;
  int bell = -1;    // the daemon's end of the doorbell socket pair
  bool ls = false;  // its class now
  // When the channel was last offered the BE chunk size (0: never): requests in that size are
  // accepted until the arbiter has run for Options::large_chunk_grace_ns after (measured to its
  // previous pass, so a daemon that was not scheduled for a while refuses nothing), so that a
  // tenant cannot keep using it while LS tenants copy, but a request posted just before the
  // offer changed is not refused.
  uint64_t large_offered_ns = 0;
  uint64_t rest_offered_ns = 0;  // the same for the rest chunk size
  shm::ShmRegion memory;
  Region* region = nullptr;  // in `memory`
  struct Request {
    uint32_t first = 0;  // the gate of its first chunk
    uint64_t chunk = 0;  // how it is cut
    uint64_t queued_ns = 0;  // when it joined the scheduler
    bool granted = false;    // its first grant is counted in `waits`
  };
  struct Flight {
    uint64_t since_ns = 0;
    uint32_t gate = 0;
  };
  // What the daemon knows of one direction (private: the tenant cannot change it).
  struct Direction {
    uint64_t request_tail = 0;
    std::vector<copych::RequestEntry> waiting;  // read, not yet at the head of their streams
    absl::flat_hash_map<pcie::RequestId, Request> queued;  // with the scheduler
    absl::flat_hash_map<pcie::GrantId, Flight> inflight;
    std::vector<uint32_t> expired;  // gates of written-off grants, counted when they finish
    uint64_t outstanding_chunks = 0;  // gates of read requests not yet counted back
    GrantWaits waits;
    // The grant lent ahead (copy_channel.h, head_start): none, lent (the word may still be 1)
    // or taken (found 0 when the daemon took it back; its request has not been read yet, and
    // it holds an in-flight slot until then).
    enum class HeadStart { kNone, kLent, kTaken } head_start = HeadStart::kNone;
    uint64_t taken_ns = 0;        // when it was found taken
    bool no_head_starts = false;  // one was taken and its request never came: none again
    uint64_t last_request_ns = 0;
  } dir[2];

  // `bell` is closed by the arbiter's thread (retired_bells_): it may be polling it now.
};

absl::StatusOr<std::unique_ptr<CopyArbiter>> CopyArbiter::Create(const Options& options) {
  std::unique_ptr<CopyArbiter> a(new CopyArbiter());
  a->options_ = options;
  for (int d = 0; d < 2; ++d) {
    auto s = pcie::FairScheduler::Create(options.scheduler);
    if (!s.ok()) return s.status();
    absl::MutexLock lock(&a->mu_);
    a->sched_[d] = std::make_unique<pcie::FairScheduler>(std::move(*s));
  }
  a->wake_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (a->wake_ < 0) return absl::InternalError("eventfd failed");
  if (options.start_thread) {
    CopyArbiter* raw = a.get();
    a->thread_ = std::thread([raw] { raw->Run(); });
  }
  return a;
}

CopyArbiter::~CopyArbiter() {
  stop_ = true;
  uint64_t one = 1;
  if (wake_ >= 0) (void)!write(wake_, &one, sizeof(one));
  if (thread_.joinable()) thread_.join();
  {
    absl::MutexLock lock(&mu_);
    while (!channels_.empty()) DropLocked(channels_.begin()->first, "session ended");
    for (int fd : retired_bells_) close(fd);
    retired_bells_.clear();
  }
  if (wake_ >= 0) close(wake_);
}

absl::StatusOr<std::pair<int, int>> CopyArbiter::OpenChannel(uint64_t session,
                                                             TenantClass cls,
                                                             uint32_t weight) {
  absl::MutexLock lock(&mu_);
  if (channels_.contains(session)) {
    return absl::AlreadyExistsError("session " + std::to_string(session) +
                                    " already has a copy channel on this GPU");
  }
  auto c = std::make_unique<Channel>();
  c->session = session;
  c->ls = cls == TenantClass::kLatencySensitive;
  // Sealed at its size: a tenant that could shrink the file would make the daemon's next read
  // of its region fault (SIGBUS) and take every tenant's scheduling down with it. Both sides
  // write it; the seals are frozen so.
  absl::StatusOr<shm::ShmRegion> memory =
      shm::ShmRegion::Create("missile-copy-channel", copych::kRegionBytes);
  if (!memory.ok()) return memory.status();
  if (absl::Status s = memory->FreezeSeals(); !s.ok()) return s;
  c->memory = *std::move(memory);
  // Zero-filled by ftruncate; construct the atomics in place.
  c->region = new (c->memory.data()) Region();
  c->region->magic = copych::kMagic;
  c->region->version = copych::kVersion;
  Offer(*c, copych::MonotonicNs());
  c->region->bypass_bytes = options_.scheduler.min_bypass_bytes;
  for (int d = 0; d < 2; ++d) {
    if (absl::Status s = sched_[d]->AddTenant(session, cls, weight); !s.ok()) {
      for (int u = 0; u < d; ++u) sched_[u]->RemoveTenant(session).IgnoreError();
      return s;
    }
  }
  // A socket pair rather than a pipe: the tenant sends with MSG_NOSIGNAL, so a daemon that is
  // gone cannot kill it with SIGPIPE, and each end is its own open file, so neither side can
  // make the other's end blocking.
  int bell[2];
  if (socketpair(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0, bell) != 0) {
    for (int d = 0; d < 2; ++d) sched_[d]->RemoveTenant(session).IgnoreError();
    return absl::InternalError(std::string("copy channel doorbell: ") + strerror(errno));
  }
  absl::StatusOr<int> mem = c->memory.Dup();
  if (!mem.ok()) {
    close(bell[0]);
    close(bell[1]);
    for (int d = 0; d < 2; ++d) sched_[d]->RemoveTenant(session).IgnoreError();
    return mem.status();
  }
  c->bell = bell[0];
  channels_[session] = std::move(c);
  uint64_t one = 1;
  (void)!write(wake_, &one, sizeof(one));  // the thread polls the new doorbell from now on
  return std::make_pair(*mem, bell[1]);
}

uint64_t CopyArbiter::OfferedChunk(bool latency_sensitive, uint64_t now) const {
  const pcie::FairScheduler::Config& c = options_.scheduler;
  if (latency_sensitive) return c.chunk_bytes;
  const bool ls_copying = last_ls_request_ns_ != 0 && now - last_ls_request_ns_ < options_.ls_quiet_ns;
  const bool resting = c.be_rest_chunk_bytes != 0 && options_.ls_resting != nullptr &&
                       options_.ls_resting->load(std::memory_order_relaxed);
  // While the LS tenants rest, every budget released the BE with room, and the checks between
  // rests measure what the BE costs them: an LS copy then waits behind at most one chunk of the
  // BE size, not of the small size that costs the BE a chunk boundary every 2 MiB.
  if (ls_copying) return resting ? c.ChunkFor(pcie::TenantClass::kBestEffort) : c.chunk_bytes;
  if (resting) return c.be_rest_chunk_bytes;
  return c.ChunkFor(pcie::TenantClass::kBestEffort);
}

void CopyArbiter::Offer(Channel& c, uint64_t now) {
  const pcie::FairScheduler::Config& sc = options_.scheduler;
  const uint64_t offered = OfferedChunk(c.ls, now);
  // The BE size stays accepted while the rest size is offered (it is never larger): a copy
  // posted in it just before a rest began goes on in it.
  if (offered != sc.chunk_bytes) c.large_offered_ns = now;
  if (offered == sc.be_rest_chunk_bytes && offered != sc.chunk_bytes) c.rest_offered_ns = now;
  if (c.region->chunk_bytes.load(std::memory_order_relaxed) != offered) {
    c.region->chunk_bytes.store(offered, std::memory_order_relaxed);
  }
}

void CopyArbiter::DropLocked(uint64_t session, const char* why) {
  auto it = channels_.find(session);
  if (it == channels_.end()) return;
  for (int d = 0; d < 2; ++d) sched_[d]->RemoveTenant(session).IgnoreError();
  it->second->region->closed.store(1, std::memory_order_release);
  copych::FutexWakeAll(&it->second->region->closed);
  if (std::string(why) != "session ended") {
    GetLogger(kCopyLog)->warn("copy channel of session {} dropped: {}", session, why);
  }
  if (it->second->bell >= 0) retired_bells_.push_back(it->second->bell);
  channels_.erase(it);
}

void CopyArbiter::CloseChannel(uint64_t session) {
  absl::MutexLock lock(&mu_);
  DropLocked(session, "session ended");
}

void CopyArbiter::SetPolicy(uint64_t session, TenantClass cls, uint32_t weight) {
  absl::MutexLock lock(&mu_);
  auto it = channels_.find(session);
  if (it == channels_.end()) return;
  it->second->ls = cls == TenantClass::kLatencySensitive;
  Offer(*it->second, copych::MonotonicNs());
  for (int d = 0; d < 2; ++d) {
    sched_[d]->SetClass(session, cls).IgnoreError();
    sched_[d]->SetWeight(session, weight).IgnoreError();
  }
}

std::vector<PcieUse> CopyArbiter::Usage() {
  absl::MutexLock lock(&mu_);
  uint64_t now = copych::MonotonicNs();
  absl::flat_hash_map<uint64_t, PcieUse> by_session;
  for (int d = 0; d < 2; ++d) {
    for (const pcie::TenantStats& t : sched_[d]->Snapshot(now).tenants) {
      PcieUse& u = by_session[t.id];
      u.session = t.id;
      u.bytes[d] = t.bytes_granted;
      u.share[d] = t.share;
    }
  }
  for (const auto& [session, c] : channels_) {
    PcieUse& u = by_session[session];
    u.session = session;
    for (int d = 0; d < 2; ++d) u.waits[d] = c->dir[d].waits;
  }
  std::vector<PcieUse> out;
  for (auto& [id, u] : by_session) out.push_back(u);
  return out;
}

bool CopyArbiter::ReadRequests(Channel& c, int d, uint64_t now, uint64_t offers_seen,
                               PassResult* pass) {
  Ring& r = c.region->ring[d];
  Channel::Direction& cd = c.dir[d];
  uint64_t head = r.request_head.load(std::memory_order_acquire);
  if (head - cd.request_tail > kGates) return false;
  const auto offered_lately = [&](uint64_t offered_ns) {
    return offered_ns != 0 && offers_seen < offered_ns + options_.large_chunk_grace_ns;
  };
  const pcie::FairScheduler::Config& sc = options_.scheduler;
  for (; cd.request_tail < head; ++cd.request_tail) {
    copych::RequestEntry e = r.requests[cd.request_tail % kGates];
    if (e.flags != 0) {
      // Marked as started on a lent grant: there must be one, and the tenant must have taken it.
      if (e.flags != copych::kRequestStarted ||
          cd.head_start == Channel::Direction::HeadStart::kNone ||
          r.head_start.load(std::memory_order_acquire) != 0) {
        return false;
      }
      cd.head_start = Channel::Direction::HeadStart::kNone;
    }
    const bool chunk_ok =
        e.chunk_bytes == sc.chunk_bytes ||
        (e.chunk_bytes == sc.ChunkFor(pcie::TenantClass::kBestEffort) &&
         offered_lately(c.large_offered_ns)) ||
        (e.chunk_bytes == sc.be_rest_chunk_bytes && offered_lately(c.rest_offered_ns));
    uint64_t chunks = e.bytes == 0 || !chunk_ok ? 0 : (e.bytes + e.chunk_bytes - 1) / e.chunk_bytes;
    if (e.bytes == 0 || e.bytes > kMaxCopyBytes || !chunk_ok || e.first >= kGates ||
        cd.outstanding_chunks + chunks > kGates) {
      return false;
    }
    cd.outstanding_chunks += chunks;
    cd.waiting.push_back(e);
    cd.last_request_ns = now;
    pass->moved = true;
    if (c.ls) {
      pass->ls_posted = true;
      last_ls_request_ns_ = now;
    }
  }
  return true;
}

bool CopyArbiter::SubmitArrived(Channel& c, int d, uint64_t now, PassResult* pass) {
  copych::Gates& gates = c.region->ring[d].gates;
  Channel::Direction& cd = c.dir[d];
  for (size_t i = 0; i < cd.waiting.size();) {
    const copych::RequestEntry& e = cd.waiting[i];
    if (e.flags == copych::kRequestStarted) {
      // Its first chunk is on the link already (the tenant opened its gate): it counts as
      // granted from now, in the slot kept for it.
      auto g = sched_[d]->SubmitStarted(c.session, e.bytes, now, e.chunk_bytes);
      if (!g.ok()) return false;
      cd.queued[g->request] = {e.first, e.chunk_bytes, now, true};
      cd.waits.Observe(0);
      cd.inflight[g->id] = {now, e.first};
      cd.waiting.erase(cd.waiting.begin() + static_cast<ptrdiff_t>(i));
      pass->moved = true;
      continue;
    }
    if (gates.arrived[e.first].load(std::memory_order_acquire) == 0) {
      ++i;
      continue;
    }
    auto id = sched_[d]->Submit(c.session, e.bytes, now, e.chunk_bytes);
    if (!id.ok()) return false;
    cd.queued[*id] = {e.first, e.chunk_bytes, now, false};
    cd.waiting.erase(cd.waiting.begin() + static_cast<ptrdiff_t>(i));
    pass->moved = true;
  }
  return true;
}

void CopyArbiter::CountFinished(Channel& c, int d, uint64_t now, PassResult* pass) {
  copych::Gates& gates = c.region->ring[d].gates;
  Channel::Direction& cd = c.dir[d];
  for (auto it = cd.inflight.begin(); it != cd.inflight.end();) {
    uint32_t gate = it->second.gate;
    if (gates.done[gate].load(std::memory_order_acquire) != copych::kDoneCopied) {
      if (now - it->second.since_ns < kGrantTimeoutNs) {
        ++it;
        continue;
      }
      GetLogger(kCopyLog)->warn("session {}: chunk not finished after {} ms; no longer waiting for it",
                                c.session, kGrantTimeoutNs / 1000000);
      cd.expired.push_back(gate);
    } else {
      gates.done[gate].store(copych::kDoneCounted, std::memory_order_release);
      --cd.outstanding_chunks;  // the tenant may reuse this gate now
    }
    auto done = sched_[d]->Complete(it->first, now);
    if (done.ok() && done->has_value()) cd.queued.erase((*done)->request);
    cd.inflight.erase(it++);
    pass->moved = true;
  }
  // Written-off grants the GPU has finished since: their gates count back now.
  for (size_t i = 0; i < cd.expired.size();) {
    uint32_t gate = cd.expired[i];
    if (gates.done[gate].load(std::memory_order_acquire) == copych::kDoneCopied) {
      gates.done[gate].store(copych::kDoneCounted, std::memory_order_release);
      --cd.outstanding_chunks;
      cd.expired[i] = cd.expired.back();
      cd.expired.pop_back();
    } else {
      ++i;
    }
  }
}

uint32_t CopyArbiter::ReclaimHeadStarts(int d, uint64_t now) {
  using HS = Channel::Direction::HeadStart;
  const bool to_grant = sched_[d]->has_pending();
  uint32_t held = 0;
  for (auto& [session, c] : channels_) {
    Channel::Direction& cd = c->dir[d];
    if (cd.head_start == HS::kLent && to_grant) {
      if (c->region->ring[d].head_start.exchange(0, std::memory_order_acq_rel) == 1) {
        cd.head_start = HS::kNone;
      } else {
        cd.head_start = HS::kTaken;  // its request is on the way
        cd.taken_ns = now;
      }
    }
    if (cd.head_start == HS::kTaken && now - cd.taken_ns >= kGrantTimeoutNs) {
      GetLogger(kCopyLog)->warn(
          "session {}: took a grant lent ahead and posted no copy on it within {} ms; it is "
          "lent none again", session, kGrantTimeoutNs / 1000000);
      cd.head_start = HS::kNone;
      cd.no_head_starts = true;
    }
    if (cd.head_start != HS::kNone) ++held;
  }
  return held;
}

void CopyArbiter::LendHeadStarts() {
  using HS = Channel::Direction::HeadStart;
  if (!options_.lend_ahead) return;
  const uint32_t slots = options_.scheduler.max_inflight_chunks_total;
  for (int d = 0; d < 2; ++d) {
    if (sched_[d]->inflight_chunks() != 0 || sched_[d]->has_pending()) continue;
    // Once lent, the next passes find the slots taken and stop here, building nothing.
    uint32_t lent = 0;
    for (auto& [session, c] : channels_) {
      const HS h = c->dir[d].head_start;
      if (h == HS::kTaken) lent = slots;  // none more until its request comes
      if (h == HS::kLent) ++lent;
    }
    if (lent >= slots) continue;
    // LS tenants first, then the channels that copied last; at most one per channel.
    std::vector<Channel*> order;
    for (auto& [session, c] : channels_) {
      const Channel::Direction& cd = c->dir[d];
      if (cd.head_start == HS::kNone && !cd.no_head_starts) order.push_back(c.get());
    }
    std::sort(order.begin(), order.end(), [d](const Channel* a, const Channel* b) {
      if (a->ls != b->ls) return a->ls;
      if (a->dir[d].last_request_ns != b->dir[d].last_request_ns) {
        return a->dir[d].last_request_ns > b->dir[d].last_request_ns;
      }
      return a->session < b->session;
    });
    for (Channel* c : order) {
      if (lent >= slots) break;
      c->region->ring[d].head_start.store(1, std::memory_order_release);
      c->dir[d].head_start = HS::kLent;
      ++lent;
    }
  }
}

void CopyArbiter::OpenGrantedGates(uint64_t now, PassResult* pass) {
  const uint32_t slots = options_.scheduler.max_inflight_chunks_total;
  for (int d = 0; d < 2; ++d) {
    const uint32_t held = ReclaimHeadStarts(d, now);
    while (sched_[d]->inflight_chunks() + held < slots) {
      std::optional<pcie::Grant> g = sched_[d]->NextGrant(now);
      if (!g.has_value()) break;
      auto it = channels_.find(g->tenant);
      if (it == channels_.end()) continue;
      Channel& c = *it->second;
      Channel::Direction& cd = c.dir[d];
      auto q = cd.queued.find(g->request);
      if (q == cd.queued.end()) continue;  // cannot happen: queued until its last chunk is done
      if (!q->second.granted) {
        q->second.granted = true;
        cd.waits.Observe(now - q->second.queued_ns);
      }
      uint32_t gate = copych::GateOf(q->second.first, g->offset / q->second.chunk);
      Ring& r = c.region->ring[d];
      // seq_cst store then load, against the tenant's increment then load (copy_gate.cc WaitGo):
      // either it sees the gate open or this sees it waiting.
      r.gates.go[gate].store(1, std::memory_order_seq_cst);
      if (r.sync_waiters.load(std::memory_order_seq_cst) != 0) {
        copych::FutexWakeAll(&r.gates.go[gate]);
      }
      cd.inflight[g->id] = {now, gate};
      pass->moved = true;
    }
  }
}

CopyArbiter::PassResult CopyArbiter::Poll() {
  const uint64_t now = copych::MonotonicNs();
  const uint64_t offers_seen = prev_poll_ns_ != 0 ? prev_poll_ns_ : now;
  PassResult pass;
  std::vector<uint64_t> bad;
  for (auto& [session, cp] : channels_) {
    Channel& c = *cp;
    for (int d = 0; d < 2; ++d) {
      if (!ReadRequests(c, d, now, offers_seen, &pass)) {
        bad.push_back(session);
        break;
      }
      // A request the scheduler refuses drops the channel after this pass, but what the GPU
      // finished still counts back first.
      const bool submitted = SubmitArrived(c, d, now, &pass);
      CountFinished(c, d, now, &pass);
      if (!c.dir[d].waiting.empty() || !c.dir[d].queued.empty()) pass.busy = true;
      if (!submitted) {
        bad.push_back(session);
        break;
      }
    }
  }
  for (uint64_t s : bad) DropLocked(s, "malformed request in its ring");
  // What the tenants cut their next copies into: BE chunks shrink while an LS tenant copies.
  for (auto& [session, cp] : channels_) Offer(*cp, now);
  prev_poll_ns_ = now;
  OpenGrantedGates(now, &pass);
  LendHeadStarts();
  return pass;
}

void CopyArbiter::PollOnce() {
  absl::MutexLock lock(&mu_);
  Poll();
}

void CopyArbiter::Run() {
  prctl(PR_SET_TIMERSLACK, 1000UL);  // make the naps below as short as asked
  uint64_t last_moved = copych::MonotonicNs();
  uint64_t last_ls_request = 0;
  while (!stop_) {
    heartbeat_.fetch_add(1, std::memory_order_relaxed);
    PassResult pass;
    {
      absl::MutexLock lock(&mu_);
      pass = Poll();
    }
    uint64_t now = copych::MonotonicNs();
    if (pass.ls_posted) last_ls_request = now;
    if (pass.moved) {
      last_moved = now;
      continue;
    }
    if (now - last_moved < options_.spin_ns ||
        (last_ls_request != 0 && now - last_ls_request < options_.ls_spin_ns)) {
      // Polling, but not at the expense of other runnable threads on this CPU (the tenants'
      // own threads, on a machine with few cores): yield costs a microsecond when none is.
      for (int i = 0; i < 16; ++i) copych::CpuRelax();
      sched_yield();
      continue;
    }
    std::vector<pollfd> fds{{wake_, POLLIN, 0}};
    {
      absl::MutexLock lock(&mu_);
      for (int fd : retired_bells_) close(fd);  // nobody polls them between two passes
      retired_bells_.clear();
      for (auto& [session, c] : channels_) {
        if (c->bell >= 0) fds.push_back({c->bell, POLLIN, 0});
      }
    }
    timespec timeout{0, pass.busy ? kBusyNapNs : kIdleSleepNs};
    if (ppoll(fds.data(), fds.size(), &timeout, nullptr) <= 0) continue;
    uint64_t v;
    if (fds[0].revents != 0) (void)!read(wake_, &v, sizeof(v));
    bool rung = false;
    for (size_t i = 1; i < fds.size(); ++i) {
      if (fds[i].revents == 0) continue;
      char buf[256];
      ssize_t n;
      while ((n = recv(fds[i].fd, buf, sizeof(buf), MSG_DONTWAIT)) > 0) rung = true;
      if (n == 0) {
        // The tenant closed its end (it is exiting): stop polling a pipe that is always readable.
        absl::MutexLock lock(&mu_);
        for (auto& [session, c] : channels_) {
          if (c->bell == fds[i].fd) {
            close(c->bell);
            c->bell = -1;
          }
        }
      }
    }
    if (rung) last_moved = copych::MonotonicNs();  // a tenant posted a request: its copy may arrive any moment
  }
}

}  // namespace missile::daemon
