#include "pacer.h"

#include <sched.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <string>

#include "session_manager.h"
#include "missile/common/copy_channel.h"

namespace missile::shim {
namespace {

using pacingreg::kLanes;
using pacingreg::kSlots;
using pacingreg::NowNs;

// A window whose oldest item has been in flight this long admits anyway: the BE's own earlier
// work may be waiting for something the held thread would do next (a host flag it sets, an
// event it records), and pacing must never deadlock the program.
constexpr uint64_t kStallNs = 100'000'000;
// A BE with nothing in flight stays active in the share this long after its last submission.
constexpr uint64_t kIdleGraceNs = 10'000'000;
// A held thread spins this long before it yields the CPU between checks.
constexpr uint64_t kSpinNs = 20'000;
// A BE item predicted to run at least 1/kAloneShare of the window is reported by itself.
constexpr uint64_t kAloneShare = 4;
// A quiet time published further ahead than this is not obeyed (missiled asks for tens of
// milliseconds at a time; a stale or wrong word must not stop the BE tenants).
constexpr uint64_t kMaxQuietNs = 200'000'000;
// A rest longer than [compute] ls_rest_ms can be is not one.
constexpr uint64_t kMaxRestNs = 61'000'000'000;

uint64_t StreamKey(CUstream stream, bool ptsz) {
  const auto v = reinterpret_cast<uintptr_t>(stream);
  const bool per_thread = (ptsz && v == 0) || stream == CU_STREAM_PER_THREAD;
  if (per_thread) {
    static thread_local const uint64_t tid = static_cast<uint64_t>(syscall(SYS_gettid));
    return (uint64_t{1} << 63) | tid;
  }
  if (v == 0 || stream == CU_STREAM_LEGACY) return 1;  // the context's legacy stream
  return static_cast<uint64_t>(v);
}

// How long a new pacer waits for missiled to publish its sealed page (its sampler looks every
// millisecond), so that the first item it marks is already visible to the BE tenants.
constexpr uint64_t kPublishWaitNs = 50'000'000;

// Whether missiled lets the LS tenants of this GPU rest ([compute] ls_rest_ms): published only
// while every LS tenant's budget released the BE with room to spare.
bool RestInForce(const pacingreg::Policy& pol) {
  const uint64_t rest_until = pol.rest_until_ns.load(std::memory_order_relaxed);
  if (rest_until == 0) return false;
  const uint64_t now = NowNs();
  return now < rest_until && rest_until - now <= kMaxRestNs;
}

}  // namespace

absl::StatusOr<std::unique_ptr<Pacer>> Pacer::Open(int directory_fd, int lanes_fd,
                                                   uint64_t session_id,
                                                   const SessionClient* session,
                                                   PeerOpener open_peer, const DriverApi& api,
                                                   spdlog::logger* log) {
  std::unique_ptr<Pacer> p(new Pacer());
  p->client_ = session;
  p->api_ = &api;
  p->log_ = log;
  p->session_ = session_id;
  p->open_peer_ = std::move(open_peer);
  absl::StatusOr<shm::ShmRegion> dir = shm::ShmRegion::Attach(
      directory_fd, sizeof(pacingreg::Directory), shm::Access::kReadOnly);
  if (!dir.ok()) {
    close(lanes_fd);
    return dir.status();
  }
  p->directory_ = *std::move(dir);
  p->dir_ = static_cast<const pacingreg::Directory*>(p->directory_.data());
  absl::StatusOr<shm::ShmRegion> lanes = shm::ShmRegion::Attach(
      lanes_fd, sizeof(pacingreg::LanesPage), shm::Access::kReadWrite);
  if (!lanes.ok()) return lanes.status();
  p->lanes_ = *std::move(lanes);
  p->slot_ = static_cast<pacingreg::LanesPage*>(p->lanes_.data());
  const pacingreg::Directory& d = *p->dir_;
  if (d.magic != pacingreg::kMagic || d.version != pacingreg::kVersion || d.slots != kSlots ||
      d.lanes != kLanes) {
    return absl::FailedPreconditionError("pacing region: unknown format (daemon too old or new)");
  }
  bool found = false;
  for (uint32_t i = 0; i < kSlots && !found; ++i) {
    if (d.entries[i].session.load(std::memory_order_acquire) == session_id) {
      p->slot_index_ = i;
      found = true;
    }
  }
  if (!found) return absl::NotFoundError("pacing region: no slot for this session");
  pacingreg::InitLanes(p->slot_);
  if (api.MemHostRegister == nullptr || api.MemHostGetDevicePointer == nullptr ||
      api.StreamWriteValue64 == nullptr || api.StreamWriteValue64Ptsz == nullptr) {
    return absl::UnimplementedError("the driver lacks host registration or 64-bit stream writes");
  }
  CUresult r = api.MemHostRegister(p->slot_, sizeof(pacingreg::LanesPage),
                                   CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
  if (r != CUDA_SUCCESS) {
    return absl::InternalError("cuMemHostRegister of the pacing lanes failed (" +
                               std::to_string(static_cast<int>(r)) + ")");
  }
  p->registered_ = true;
  CUdeviceptr dev = 0;
  if (api.MemHostGetDevicePointer(&dev, p->slot_, 0) != CUDA_SUCCESS) {
    return absl::InternalError("cuMemHostGetDevicePointer for the pacing lanes failed");
  }
  p->lanes_dev_ = dev;
  // This mapping (and the GPU's, through it) stays the only writable one: the daemon publishes
  // the page to the other tenants only once it is sealed.
  if (absl::Status s = p->lanes_.SealWrites(); !s.ok()) return s;
  // Once, at the first work item on this GPU: an LS's first request would otherwise go
  // unseen by a BE that looked before the page was published.
  const uint64_t until = NowNs() + kPublishWaitNs;
  while (p->entry().lanes_epoch.load(std::memory_order_acquire) == 0 && NowNs() < until &&
         (session == nullptr || session->connected())) {
    usleep(100);
  }
  return p;
}

Pacer::~Pacer() {
  TakeLsUnwritten();
  if (registered_ && api_->MemHostUnregister != nullptr) api_->MemHostUnregister(slot_);
}

bool Pacer::enabled() const {
  return dir().policy.pacing.load(std::memory_order_relaxed) != 0 &&
         entry().session.load(std::memory_order_relaxed) == session_ &&
         (client_ == nullptr || client_->connected());
}

bool Pacer::Capturing(CUstream stream, bool ptsz) const {
  auto query = ptsz ? api_->StreamIsCapturingPtsz : api_->StreamIsCapturing;
  CUstreamCaptureStatus status = CU_STREAM_CAPTURE_STATUS_NONE;
  if (query == nullptr || query(stream, &status) != CUDA_SUCCESS) return true;
  return status != CU_STREAM_CAPTURE_STATUS_NONE;
}

bool Pacer::Paces() const {
  if (!enabled()) return false;
  const pacingreg::Policy& pol = dir().policy;
  const uint32_t ls_tenants = pol.ls_tenants.load(std::memory_order_relaxed);
  const uint32_t be_tenants = pol.be_tenants.load(std::memory_order_relaxed);
  // A BE tenant alone on its GPU (no LS tenant to protect, no other BE tenant to share with)
  // is not paced: its window would only turn the program's CPU hiccups into GPU bubbles (the
  // pacer cost a lone ResNet-152 BE 6.6-8.4 % on the H200, docs/results.md). Its next item
  // after an LS or another BE tenant joins the GPU is paced; what it queued before runs out.
  // Nor is the GPU's one BE tenant while the LS tenants rest: the LS holds it not at all then,
  // no quiet time comes, and nobody measures, so its tracking would only cost it GPU time (the
  // released BE's tracking is what separates it from pacing off). Its tracked items in flight
  // are written at its next synchronising call or after its next tracked items; what it queues
  // untracked is ahead of the LS's check after the rest, which sees it in the LS's periods.
  // Several BE tenants share the GPU by weight through their tracking, rest or not.
  if (best_effort()) {
    if (ls_tenants == 0) return be_tenants > 1;
    return be_tenants > 1 || !RestInForce(pol);
  }
  // An LS tenant marks its work for the BE tenants of its GPU; with none there is no one to tell,
  // nor while missiled lets the LS tenants rest (every LS tenant's budget released the BE with
  // room to spare). What it left unwritten when a rest began is written at its next
  // synchronising call (BeforeSync, paced or not), and the next item after the rest is marked
  // again.
  return be_tenants != 0 && !RestInForce(pol);
}

bool Pacer::best_effort() const {
  return entry().cls.load(std::memory_order_relaxed) == pacingreg::kBe;
}

uint32_t Pacer::LaneOf(CUstream stream, bool ptsz) { return LaneFor(StreamKey(stream, ptsz)); }

uint32_t Pacer::LaneFor(uint64_t key) {
  absl::MutexLock lock(&table_mu_);
  if (auto it = lane_of_.find(key); it != lane_of_.end()) return it->second;
  const uint32_t used = slot_->lanes_used.load(std::memory_order_relaxed);
  uint32_t lane = 0;
  if (used < kLanes) {
    lane = used;
    slot_->lanes_used.store(used + 1, std::memory_order_release);
  } else {
    // Every lane has had a stream: take over one with nothing in flight (its stream is idle,
    // and if it comes back it gets a lane again); with none idle, share one.
    lane = static_cast<uint32_t>(key % kLanes);
    for (uint32_t l = 0; l < kLanes; ++l) {
      if (slot_->lanes[l].submitted.load(std::memory_order_acquire) ==
          slot_->lanes[l].completed.load(std::memory_order_acquire)) {
        lane = l;
        break;
      }
    }
    lane_of_.erase(lane_owner_[lane]);
  }
  lane_owner_[lane] = key;
  lane_of_[key] = lane;
  slot_->lanes[lane].stream.store(key, std::memory_order_relaxed);
  return lane;
}

void Pacer::RetireLocked(uint64_t now) {
  RetireTimed(now, last_check_ns_ == 0 ? UINT64_MAX / 2 : now - last_check_ns_);
}

void Pacer::RetireTimed(uint64_t now, uint64_t since_last) {
  // GPU time: the part of the time since the last check during which the predicted work in
  // flight then was still running (checks come at launches and while held, which may be far
  // apart; work past its prediction whose completion is not reported yet does not count).
  if (last_check_ns_ != 0 && running_until_ns_ > last_check_ns_) {
    gpu_ns_ += std::min(now, running_until_ns_) - last_check_ns_;
    slot_->gpu_ns.store(gpu_ns_, std::memory_order_relaxed);
  }
  last_check_ns_ = now;
  samples_.clear();
  window_.Retire(
      [this](uint32_t lane) {
        return slot_->lanes[lane].completed.load(std::memory_order_acquire);
      },
      now, since_last, &samples_);
  // Only what ran alone teaches a duration: an item in flight while an LS tenant was busy, or
  // while another BE tenant's work was on the GPU, waited behind theirs (the GPU time-slices
  // processes), and its stretched time would be charged to this tenant's share as its own.
  // A check sees only what runs at that moment, so neither does an item that another BE tenant
  // submitted work beside after it started (on the test double that work took the engine from
  // it, and with its samples the lighter of two BE tenants weighted 1:3 learned 330 us for a
  // 50 us kernel against the other's 150 us, and got 1:4.6 of the kernels instead of 1:3).
  uint64_t peers_submitted = 0;
  if (!samples_.empty()) {
    for (const pacing::ShareEntry& p : ActivePeers(now)) {
      peers_submitted = std::max(peers_submitted, p.last_submit_ns);
    }
  }
  for (const pacing::DurationSample& s : samples_) {
    if (interfered_ns_ < s.start_ns && peers_submitted < s.start_ns) {
      predictor_.Observe(s.key, s.ns);
    }
  }
  running_until_ns_ = now + window_.RemainingNs(now);
  slot_->running_until_ns.store(running_until_ns_, std::memory_order_relaxed);
  slot_->inflight.store(window_.count(), std::memory_order_relaxed);
  // Inactive only after a pause: a BE that synchronises between bursts keeps its place in the
  // share (becoming active again would catch it up to the others, less the slack, every time).
  const uint64_t last = slot_->last_submit_ns.load(std::memory_order_relaxed);
  if (waiters_ == 0 && window_.count() == 0 && now > last && now - last > kIdleGraceNs) {
    SetActiveLocked(false, now);
  }
}

void Pacer::SetActiveLocked(bool active, uint64_t now) {
  if (active == active_) return;
  active_ = active;
  if (active) {
    // Back after a pause: continue from the other BE tenants' weighted time, like CFS.
    const pacing::ShareEntry self{gpu_ns_,
                                  std::max<uint32_t>(entry().weight.load(std::memory_order_relaxed), 1)};
    const uint64_t slack = dir().policy.share_slack_ns.load(std::memory_order_relaxed);
    gpu_ns_ = pacing::CatchUp(self, ActivePeers(now), slack);
    slot_->gpu_ns.store(gpu_ns_, std::memory_order_relaxed);
  }
  slot_->active.store(active ? 1 : 0, std::memory_order_relaxed);
}

std::optional<uint64_t> Pacer::Learned(uint64_t key) {
  constexpr uint64_t kNone = ~uint64_t{0};
  absl::MutexLock lock(&mu_);
  const uint64_t ns = predictor_.Predict(key, kNone);
  if (ns == kNone) return std::nullopt;
  return ns;
}

uint64_t Pacer::window_ns() const {
  return dir().policy.window_ns.load(std::memory_order_relaxed);
}

uint64_t Pacer::unknown_ns() const {
  return dir().policy.unknown_ns.load(std::memory_order_relaxed);
}

pacing::InflightWindow::Limits Pacer::ScaledWindow(uint32_t scale) const {
  const pacingreg::Policy& pol = dir().policy;
  return pacing::InflightWindow::Scaled({pol.window_items.load(std::memory_order_relaxed),
                                         pol.window_ns.load(std::memory_order_relaxed),
                                         pol.refill_ns.load(std::memory_order_relaxed)},
                                        scale);
}

Pacer::Admission Pacer::Admit(uint64_t key, uint32_t own_lane) {
  const pacingreg::Policy& pol = dir().policy;
  const uint64_t since = NowNs();
  bool held = false;
  bool flushed = false;
  pacing::Verdict reason = pacing::Verdict::kGo;
  RefreshPeers(since);
  absl::MutexLock lock(&mu_);
  const uint64_t predicted_ns =
      predictor_.Predict(key, pol.unknown_ns.load(std::memory_order_relaxed));
  ++waiters_;
  bool beside_ls = false;
  uint64_t in_force_ns = 0;
  uint32_t mark_every = pacing::InflightWindow::kMinMarkEvery;
  for (;;) {
    const uint64_t now = NowNs();
    RetireLocked(now);
    SetActiveLocked(true, now);
    pacing::AdmissionInput in;
    const pacing::LsObservation ls_seen = ObserveLs(now);
    const pacing::InflightWindow::Limits limits = ScaledWindow(ls_seen.window_scale);
    in.window_admits = ls_seen.released || window_.Admits(predicted_ns, limits, now);
    // Released: no window, so nothing is long, and the writes come at the widest cadence.
    in_force_ns = ls_seen.released ? UINT64_MAX : limits.predicted_ns;
    mark_every = pacing::InflightWindow::MarkEvery(
        {ls_seen.released ? pacing::InflightWindow::kMaxItems : limits.items});
    // The LS first: the one that matters.
    const bool ls_busy = LsHoldsLocked(now, ls_seen, predicted_ns, limits.predicted_ns,
                                       in.window_admits, &beside_ls);
    in.ls_busy = ls_busy;
    // missiled relearning the LS tenants' alone durations: no BE work at all, for a moment.
    const uint64_t quiet_until = pol.quiet_until_ns.load(std::memory_order_relaxed);
    in.quiet = now < quiet_until && quiet_until - now <= kMaxQuietNs;
    if (!ls_busy && in.window_admits) {
      const pacing::ShareEntry self{
          gpu_ns_, std::max<uint32_t>(entry().weight.load(std::memory_order_relaxed), 1)};
      const std::vector<pacing::ShareEntry> peers = ActivePeers(now);
      for (const pacing::ShareEntry& p : peers) {
        if (p.running) interfered_ns_ = now;
      }
      in.share_allows = pacing::ShareAllows(
          self, peers, pol.share_slack_ns.load(std::memory_order_relaxed));
    }
    in.in_flight = window_.count();
    in.now = now;
    in.waiting_since = since;
    in.max_hold_ns = pol.max_hold_ns.load(std::memory_order_relaxed);
    in.oldest_in_flight_ns = window_.oldest_issued_ns();
    in.stall_ns = kStallNs;
    const pacing::Verdict verdict = pacing::Decide(in);
    // Pacing turned off, or the daemon went away (nobody clears a dead LS's marks now; the
    // program's next work paces in the new session, once there is one).
    if (verdict == pacing::Verdict::kGo || !enabled()) break;
    if (!held) {
      held = true;
      // A hold going on is visible to the daemon at once, not only when it ends.
      if (holding_++ == 0) slot_->hold_since_ns.store(since, std::memory_order_relaxed);
    }
    reason = verdict;
    // Wait outside the lock, so other threads' checks (and retires) go on.
    mu_.Unlock();
    RefreshPeers(now);
    // Whatever holds it, the window must see the BE's earlier items finish: the max_hold bound
    // waits for nothing of the BE in flight, and the share counts GPU time while items are.
    if (!flushed) {
      FlushMarkers(own_lane);
      flushed = true;
    }
    if (now - since < kSpinNs) {
      for (int i = 0; i < 64; ++i) copych::CpuRelax();
    } else {
      sched_yield();
    }
    mu_.Lock();
  }
  --waiters_;
  if (held) HoldEndedLocked(since, reason);
  return {predicted_ns, beside_ls, in_force_ns, mark_every};
}

bool Pacer::LsHoldsLocked(uint64_t now, const pacing::LsObservation& ls_seen,
                          uint64_t predicted_ns, uint64_t window_ns, bool window_admits,
                          bool* beside_ls) {
  const pacingreg::Policy& pol = dir().policy;
  bool busy = ls_.Busy(ls_seen, now, pol.ls_idle_ns.load(std::memory_order_relaxed));
  if (ls_seen.in_flight) interfered_ns_ = now;
  // Whatever lets it go, an item that goes while an LS tenant is busy shares the GPU with the
  // LS's work: its time is not its own.
  *beside_ls = busy;
  // An LS latency budget (pacing/budget.h): while an LS tenant is busy, BE work may use the
  // share of its busy time that missiled's controller publishes, item by item.
  const uint32_t share = ls_seen.share_ppm;
  credit_.Advance(now, busy, share, window_ns);
  if (busy && credit_.Lets(share, predicted_ns, window_admits)) busy = false;
  return busy;
}

void Pacer::HoldEndedLocked(uint64_t since, pacing::Verdict reason) {
  const uint64_t end = NowNs();
  const uint64_t waited = end - since;
  // Ended holds are in held_ns from here on; another thread's that goes on counts from now.
  slot_->hold_since_ns.store(--holding_ == 0 ? 0 : end, std::memory_order_relaxed);
  slot_->held_ns.fetch_add(waited, std::memory_order_relaxed);
  slot_->held_count.fetch_add(1, std::memory_order_relaxed);
  held_ns_.fetch_add(waited, std::memory_order_relaxed);
  held_.fetch_add(1, std::memory_order_relaxed);
  held_by_ns_[static_cast<size_t>(reason)].fetch_add(waited, std::memory_order_relaxed);
}

Pacer::Ticket Pacer::Begin(CUstream stream, bool ptsz, uint64_t key, bool host_waits) {
  Ticket t;
  const bool be = best_effort();
  t.be = be;
  t.host_waits = host_waits;
  const uint64_t stream_key = StreamKey(stream, ptsz);
  t.lane = LaneFor(stream_key);
  t.lane_lock = std::unique_lock<std::mutex>(lane_mu_[t.lane]);
  const Admission admitted = be ? Admit(key, t.lane) : Admission();
  const uint64_t predicted = admitted.predicted_ns;
  t.beside_ls = admitted.beside_ls;
  // A long BE item (a quarter of the window in force or more: a copy, a long kernel, a graph
  // piece, work never seen) is reported by itself: its lane's earlier items get their
  // completion write first (on the stream they were on), it gets one right after it. The
  // window then knows when it ended, and times it alone. Against a window that a budget
  // widened, fewer items are long, and none once the BE is released: each write is a stream
  // operation that costs the BE GPU time (docs/pacing.md, "What a BE's pacing costs it").
  t.alone = be && predicted * kAloneShare >= admitted.window_ns;
  LaneState& st = lane_state_[t.lane];
  pacingreg::Lane& lane = slot_->lanes[t.lane];
  uint64_t now = NowNs();
  if (be) {
    // A per-thread default stream is written after every item: no other thread can write on
    // it (WriteMarker), and its thread may end without synchronising.
    t.mark_every = (stream_key >> 63) != 0 ? 1 : admitted.mark_every;
  } else {
    t.mark_every = LsMarkEvery(st, stream_key, now, lane.submitted.load(std::memory_order_relaxed));
  }
  // 0: the lane's unwritten items went idle unseen (LsMarkEvery); they are written first.
  const bool went_idle = t.mark_every == 0;
  if (went_idle) t.mark_every = 1;
  // A lane that another stream had (more busy streams than lanes) gets that stream's unwritten
  // items written on it first: a write on this stream would not wait for them.
  if (t.alone || went_idle || st.key != stream_key) {
    WriteMarker(t.lane);
    now = NowNs();  // the item is submitted after the write enqueued before it
  }
  st.stream = stream;
  st.ptsz = ptsz;
  st.key = stream_key;
  t.seq = lane.submitted.load(std::memory_order_relaxed) + 1;
  // Busy from here on, for every reader: before the item can reach the GPU.
  lane.submitted.store(t.seq, std::memory_order_release);
  slot_->last_submit_ns.store(now, std::memory_order_release);
  slot_->work_sum.fetch_add(key, std::memory_order_relaxed);
  slot_->submissions.fetch_add(1, std::memory_order_relaxed);
  marked_.fetch_add(1, std::memory_order_relaxed);
  if (be) {
    absl::MutexLock lock(&mu_);
    window_.Add(t.lane, t.seq, key, predicted, now, t.alone, /*teach=*/!t.beside_ls);
    slot_->inflight.store(window_.count(), std::memory_order_relaxed);
    running_until_ns_ = std::max(running_until_ns_, now + window_.RemainingNs(now));
    slot_->running_until_ns.store(running_until_ns_, std::memory_order_relaxed);
  }
  return t;
}

uint32_t Pacer::LsMarkEvery(const LaneState& st, uint64_t stream_key, uint64_t now,
                            uint64_t submitted) {
  // Which items an LS writes (docs/pacing.md): each write is a driver call on the program's own
  // thread, and an LS bound by its CPU that launches hundreds of kernels a request paid it at
  // every one. What the BE tenants and missiled need is the time its work ends, so the write
  // comes after the last item before the program waits (BeforeSync, a synchronous item), and
  // every kLsMarkEvery items in between. A per-thread default stream is written after every
  // item: no other thread can write on it, and its thread may end without synchronising.
  if ((stream_key >> 63) != 0 || now < ls_every_until_ns_.load(std::memory_order_relaxed)) {
    return 1;
  }
  // The lane's last items are unwritten and the program launched nothing on it for longer than
  // missiled waits before it ends a busy period (counted from the last launch call's return, so
  // a launch that loads its module is no gap): it may have let its work go idle without a wait
  // or poll the shim sees (it waits on another process), and the BE tenants and missiled saw
  // it busy meanwhile. Its earlier items are written now (Begin), and every item for the next
  // kEveryItemAfterIdleNs: such a program is caught at one request in that many seconds, and
  // one that only paused mid-request (a slow allocation, a collector) pays the writes for that
  // long.
  const uint64_t idle_ns = dir().policy.ls_idle_ns.load(std::memory_order_relaxed);
  if (st.key == stream_key && st.marked < submitted && now - st.last_end_ns > idle_ns) {
    ls_every_until_ns_.store(now + every_item_after_idle_ns_, std::memory_order_relaxed);
    if (!unseen_idle_logged_.exchange(true, std::memory_order_relaxed)) {
      log_->info("pacing: this LS tenant's work went idle for {} us without a synchronising call "
                 "the shim sees; it writes its completion after every item for {} s whenever "
                 "that happens (MISSILE_LS_MARKS=every: always)",
                 (now - st.last_end_ns) / 1000, every_item_after_idle_ns_ / 1'000'000'000);
    }
    return 0;
  }
  return kLsMarkEvery;
}

void Pacer::WriteMarker(uint32_t l) {
  LaneState& st = lane_state_[l];
  pacingreg::Lane& lane = slot_->lanes[l];
  const uint64_t seq = lane.submitted.load(std::memory_order_relaxed);
  if (st.marked >= seq) return;
  // Another thread's per-thread default stream has no handle here (the per-thread handle means
  // the caller's own): only that thread can write on it. It writes after every item, so only a
  // write a capture put off is left for its next item.
  if ((st.key >> 63) != 0 && st.key != StreamKey(st.stream, st.ptsz)) return;
  // A stream that began a capture since its last item must not get the write (it would join the
  // graph); the write comes with its next item after the capture.
  if (Capturing(st.stream, st.ptsz)) return;
  auto write = st.ptsz ? api_->StreamWriteValue64Ptsz : api_->StreamWriteValue64;
  // The write lands after whatever the lane's stream had before, so the lane's count stays in
  // order, also after a failed call.
  CUresult w = write(st.stream, DeviceAddress(&lane.completed), seq, CU_STREAM_WRITE_VALUE_DEFAULT);
  st.marked = seq;
  if (w != CUDA_SUCCESS) {
    // No way to have the GPU say it (a stream the driver refuses, e.g. a destroyed one): the
    // items count as done now, so nothing waits for them.
    lane.completed.store(seq, std::memory_order_release);
    if (!write_failure_logged_.exchange(true)) {
      log_->warn("pacing: the completion write after a work item failed ({}); such items count "
                 "as done when submitted", static_cast<int>(w));
    }
  }
}

void Pacer::BeforeSync() {
  TakeLsUnwritten();
  FlushMarkers(kLanes);
}

void Pacer::AfterSync() {
  absl::MutexLock lock(&mu_);
  const uint64_t now = NowNs();
  // The call returned as its work finished: retire times are completion times.
  last_check_ns_ = std::min(last_check_ns_, now);
  RetireTimed(now, /*since_last_check_ns=*/0);
}

void Pacer::FlushMarkers(uint32_t own) {
  const uint32_t used = std::min(slot_->lanes_used.load(std::memory_order_acquire), kLanes);
  const bool ls = !best_effort();
  for (uint32_t l = 0; l < used; ++l) {
    if (l == own) {
      WriteMarker(l);
      continue;
    }
    // A lane another thread holds is being marked by that thread: a BE's at its cadence, an
    // LS's at its End, asked here first. Asked before the lock is tried and served after the
    // holder lets it go (ServeFlush), with a fence on both sides, the write is never lost:
    // either the holder sees the flag or the lock is found free here.
    if (ls) {
      flush_wanted_[l].store(true, std::memory_order_relaxed);
      std::atomic_thread_fence(std::memory_order_seq_cst);
    }
    std::unique_lock<std::mutex> lock(lane_mu_[l], std::try_to_lock);
    if (lock.owns_lock()) {
      if (ls) flush_wanted_[l].store(false, std::memory_order_relaxed);
      WriteMarker(l);
    }
  }
}

void Pacer::ServeFlush(uint32_t l) {
  std::atomic_thread_fence(std::memory_order_seq_cst);
  if (!flush_wanted_[l].load(std::memory_order_relaxed) ||
      !flush_wanted_[l].exchange(false, std::memory_order_relaxed)) {
    return;
  }
  std::lock_guard<std::mutex> lock(lane_mu_[l]);
  WriteMarker(l);
}

void Pacer::End(Ticket& t, CUresult result) {
  (void)result;  // a failed call's completion write still keeps the lane's count in order
  // LS: the last item before the program waits, and every LsMarkEvery-th (LsMarkEvery). BE:
  // every long one, and once the lane has mark_every items since its last write
  // (pacing::InflightWindow::MarkEvery).
  LaneState& st = lane_state_[t.lane];
  if (t.alone || t.host_waits || t.seq - st.marked >= t.mark_every) WriteMarker(t.lane);
  if (!t.be) {
    st.last_end_ns = NowNs();
    if (st.marked < t.seq) SetLsUnwritten();
  }
  t.lane_lock = {};
  if (!t.be) ServeFlush(t.lane);
}

}  // namespace missile::shim
