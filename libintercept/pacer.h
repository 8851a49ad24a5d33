// The shim's end of one GPU's pacing regions (common/pacing_region.h), opened by that GPU's
// SessionGpu (session_gpu.h) once per daemon session. A pacer maps the GPU's directory
// read-only, its own lanes page read-write (and seals it against every other writer), and, for a
// BE tenant, the other tenants' published lanes pages read-only, fetched from the daemon as the
// directory's entries change (PeerOpener).
//
// Every GPU work item of the program (a kernel launch of any kind, a graph launch, a memset, a
// copy) passes through Begin and End around the real driver call (pacing_hooks.h):
// - LS tenant: Begin marks the item submitted on its stream's lane (a store in shared memory),
//   End enqueues after it, on the same stream, a cuStreamWriteValue64 of the item's sequence
//   number into the lane's `completed` word: the GPU itself reports the item done, with no
//   thread and no daemon in between. Nothing is ever held. The write comes after the last item
//   before the program waits for its work (a synchronising call, or a synchronous item), after
//   every kLsMarkEvery-th item, and after every item on a per-thread default stream; an LS that
//   lets its work go idle without a wait the shim sees writes after every item for a while
//   (Begin, "Which items an LS writes" in docs/pacing.md).
// - BE tenant: Begin holds the calling thread while an LS tenant of the GPU is busy
//   (pacing::LsBusyTracker), while the BE's own work in flight is at the window's limit
//   (pacing::InflightWindow: a count and a predicted duration, learned per kernel and launch
//   shape by pacing::DurationPredictor), or while another BE tenant is behind its weighted share;
//   then it marks the item like an LS tenant does, so the window sees it finish.
// Only the calling thread waits; nothing of a BE tenant ever waits on the GPU for a host flag.
// Stream order is untouched (items are only delayed, in their submitting thread, never
// reordered), and streams being captured into a graph are left alone (pacing_hooks.h).
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_PACER_H_
#define MISSILE_LIBINTERCEPT_PACER_H_

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "driver_api.h"
#include "session_client.h"
#include "tpc_mask.h"
#include "missile/common/pacing_region.h"
#include "missile/common/shm_region.h"
#include "missile/pacing/budget.h"
#include "missile/pacing/pacing.h"
#include "spdlog/logger.h"

namespace missile::shim {

class SessionClient;
class SessionManager;

class Pacer {
 public:
  // Another tenant's lanes page: a read-only descriptor of the page published in `slot` with
  // `epoch` (SessionClient::OpenPeerLanes).
  using PeerOpener = std::function<absl::StatusOr<int>(uint32_t slot, uint64_t epoch)>;

  // Maps the directory from `directory_fd` and this session's lanes page from `lanes_fd` (both
  // taken; closed on failure too), finds this session's entry, registers the lanes page with
  // the driver so the GPU can write its lanes, and seals it. Needs a current context.
  // `session` (may be null; must outlive the pacer) is the daemon session the regions belong
  // to: once it has ended (the daemon went away) the pacer paces nothing and lets any held
  // thread go, since no daemon clears the directory's entries any more. `open_peer` fetches
  // the other tenants' pages (a BE tenant's only).
  static absl::StatusOr<std::unique_ptr<Pacer>> Open(int directory_fd, int lanes_fd,
                                                     uint64_t session_id,
                                                     const SessionClient* session,
                                                     PeerOpener open_peer, const DriverApi& api,
                                                     spdlog::logger* log);
  ~Pacer();

  // The daemon's policy says pace; the slot is still this session's.
  bool enabled() const;
  // Whether this tenant's work items go through Begin and End at all: enabled, and a BE tenant
  // on a GPU that has an LS tenant or another BE tenant, or an LS tenant on a GPU that has a BE
  // tenant to tell, except while missiled lets the LS tenants rest (then neither they nor the
  // GPU's one BE tenant are tracked). Checked before anything that costs a driver call.
  bool Paces() const;
  // Whether `stream` is being captured into a graph (or the driver cannot say): then its work
  // is not run, and nothing may be added to it.
  bool Capturing(CUstream stream, bool ptsz) const;
  bool best_effort() const;
  // Whether an LS tenant has joined this GPU's pacing domain.
  bool LsTenantsPresent() const {
    return dir().policy.ls_tenants.load(std::memory_order_relaxed) != 0;
  }
  // Whether every LS tenant of this GPU has taken its latency budget's last step (missiled
  // publishes pacing::kUnheldSharePpm for it): the BE is then paced by none of them
  // (pacing::LsObservation::released), and its copies go as they would without an LS.
  bool ReleasedByLs() const;

  // One work item between Begin and End; holds its lane (so the sequence numbers of a lane
  // reach the GPU in order).
  class Ticket {
   public:
    Ticket() = default;
    Ticket(Ticket&&) = default;
    Ticket& operator=(Ticket&&) = default;

   private:
    friend class Pacer;
    std::unique_lock<std::mutex> lane_lock;
    uint32_t lane = 0;
    uint64_t seq = 0;
    bool be = false;
    bool alone = false;  // reported done by itself (InflightWindow::Add)
    bool beside_ls = false;  // went beside a busy LS, on its budget
    bool host_waits = false;  // a synchronous item: the program waits for it
    uint32_t mark_every = 1;  // its lane's completion write cadence (Admission::mark_every)
  };

  // `stream` as the entry point was given it (`ptsz`: the per-thread flavour), `key`: what the
  // item is (for the duration predictor), `host_waits`: a synchronous entry point (the call
  // returns once the item ran). BE: may wait.
  Ticket Begin(CUstream stream, bool ptsz, uint64_t key, bool host_waits = false);
  // After the real call returned `result`.
  void End(Ticket& t, CUresult result);

  // Around a synchronising call: before it, every lane's last items get their completion write
  // (so what the call waits for is reported: to a BE's window, and for an LS to the BE tenants
  // and missiled, which see its work end when it does); after it (a BE's only), the window
  // retires what finished, timed by the call's return.
  void BeforeSync();
  void AfterSync();
  // Before a query (cuStreamQuery, cuEventQuery) of an LS: a program that polls for its work
  // instead of waiting has its last items written at the first poll after them. Nothing to
  // write (every later poll): one atomic load.
  void BeforeQuery() {
    if (TakeLsUnwritten()) FlushMarkers(pacingreg::kLanes);
  }
  // Whether any pacer of this process has LS items left unwritten since its last flush: a
  // query where none has (every BE's, every LS's once it was written) resolves nothing more.
  static bool AnyLsUnwritten() {
    return ls_unwritten_pacers_.load(std::memory_order_relaxed) != 0;
  }

  // An LS writes its lane's completion at least every this many items (between its waits).
  static constexpr uint32_t kLsMarkEvery = 32;
  // An LS writes after every item (MISSILE_LS_MARKS=every). Called before the pacer is shared.
  void MarkEveryLsItem() { ls_every_until_ns_.store(UINT64_MAX, std::memory_order_relaxed); }
  // Whether an LS writes after every item now: told to, or for kEveryItemAfterIdleNs after its
  // work went idle without a wait the shim sees (LsMarkEvery).
  bool marks_every_ls_item() const {
    return pacingreg::NowNs() < ls_every_until_ns_.load(std::memory_order_relaxed);
  }
  static constexpr uint64_t kEveryItemAfterIdleNs = 10'000'000'000;
  void SetEveryItemAfterIdleForTesting(uint64_t ns) { every_item_after_idle_ns_ = ns; }

  // What the duration predictor has learned of item `key` (nullopt: nothing yet).
  std::optional<uint64_t> Learned(uint64_t key);
  // The policy's bound on a BE's predicted work in flight, and its guess for unseen work.
  uint64_t window_ns() const;
  uint64_t unknown_ns() const;

  // The caller's GPU is `device`: asks once whether this process is an MPS client there
  // (CU_DEVICE_ATTRIBUTE_MPS_ENABLED), for the LS reserve and, in the lanes page, for missilectl
  // (what missiled learns of an LS alone is then the LS alone on MPS). The LS reserve of TPCs on
  // MPS (tpc_mask.h) uses `masker`; null (the default): no reserve. Called once, before the
  // pacer is shared.
  void AttachMasker(TpcMasker* masker, CUdevice device);
  // BE: the TPC mask its launches carry now, or nullopt: a reserve is asked for
  // ([compute] ls_reserve_tpcs), an LS tenant is on the GPU, the tenants run on MPS and the
  // driver's masks work (probed at the first call that needs it; the outcome is published in
  // the lanes page for missilectl and kept). Independent of `pacing`: the mask alone is a mode.
  std::optional<pacing::TpcMask> BeMask();
  // For the exit report: the reserve's state (pacingreg::ReserveState) and TPCs kept now.
  uint32_t reserve_state() const { return reserve_state_.load(std::memory_order_acquire); }
  uint32_t reserve_tpcs() const { return slot_->reserve_tpcs.load(std::memory_order_relaxed); }
  std::string reserve_note() const ABSL_LOCKS_EXCLUDED(reserve_mu_);

  // Lane of a stream (tests and diagnostics).
  uint32_t LaneOf(CUstream stream, bool ptsz);

  // For the exit report: items marked, and of those held at all, and the time held.
  uint64_t marked() const { return marked_.load(std::memory_order_relaxed); }
  uint64_t held() const { return held_.load(std::memory_order_relaxed); }
  uint64_t held_ns() const { return held_ns_.load(std::memory_order_relaxed); }
  // Time held, by the verdict that held a submission last (kWaitLs, kWaitWindow, kWaitShare).
  static constexpr size_t kReasons = static_cast<size_t>(pacing::Verdict::kWaitShare) + 1;
  uint64_t held_by_ns(pacing::Verdict reason) const {
    return held_by_ns_[static_cast<size_t>(reason)].load(std::memory_order_relaxed);
  }

 private:
  Pacer() = default;
  uint32_t LaneFor(uint64_t stream_key);
  // Maps the pages of tenants that joined the GPU since the last look, and forgets those of
  // tenants that left (at most once per kPeerRefreshNs while a fetch keeps failing).
  void RefreshPeers(uint64_t now) ABSL_LOCKS_EXCLUDED(peers_mu_);
  // The bounded view of the lanes page in `slot`, if this pacer has the page the directory
  // publishes there now.
  std::optional<pacingreg::LanesView> PeerView(uint32_t slot, uint64_t now) const
      ABSL_SHARED_LOCKS_REQUIRED(peers_mu_);
  const pacingreg::Directory& dir() const { return *dir_; }
  const pacingreg::Entry& entry() const { return dir_->entries[slot_index_]; }
  // BE: waits until item `key` may go (the caller holds `own_lane`): its predicted duration, and
  // whether it goes beside a busy LS on the LS's budget (its duration is then not its own).
  struct Admission {
    uint64_t predicted_ns = 0;
    bool beside_ls = false;
    // The bound on predicted work in flight that the item went under: the window widened by the
    // LS tenants' budgets, UINT64_MAX once they released the BE (what "long" is measured by).
    uint64_t window_ns = 0;
    // Its lane writes its completion once this many items have none (the window's items in
    // force, kMaxItems once released: pacing::InflightWindow::MarkEvery).
    uint32_t mark_every = pacing::InflightWindow::kMinMarkEvery;
  };
  Admission Admit(uint64_t key, uint32_t own_lane);
  // The policy's BE window, widened by the LS tenants' budgets (pacing/budget.h) `scale` times.
  pacing::InflightWindow::Limits ScaledWindow(uint32_t scale) const;
  pacing::LsObservation ObserveLs(uint64_t now) const;
  // Whether the LS tenants seen in `ls_seen` hold an item predicted to run `predicted_ns` now:
  // an LS is busy and its budget's share gives no credit (taken here when it does and
  // `window_admits`; the credit is capped at `window_ns`, the window in force). `beside_ls`: an
  // LS is busy (the item, if it goes, shares the GPU with LS work).
  bool LsHoldsLocked(uint64_t now, const pacing::LsObservation& ls_seen, uint64_t predicted_ns,
                     uint64_t window_ns, bool window_admits, bool* beside_ls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::vector<pacing::ShareEntry> ActivePeers(uint64_t now) const;
  void RetireLocked(uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // `since_last_check_ns`: how late the retire times may be (0: exact).
  void RetireTimed(uint64_t now, uint64_t since_last_check_ns) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Enqueues the completion write of `lane`'s last item on its stream (the lane's lock held).
  void WriteMarker(uint32_t lane);
  // Before a BE thread waits on its window, or any thread synchronises: every lane whose last
  // items have no completion write gets one, so the window (missiled, the BE tenants) sees them
  // finish. `own`: the lane the caller holds. An LS lane that another thread holds is asked to
  // write at that thread's End (flush_wanted_).
  void FlushMarkers(uint32_t own);
  // LS, in End after the lane's lock is let go: a flush that found the lane held is served.
  void ServeFlush(uint32_t lane);
  void SetActiveLocked(bool active, uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Accounts a hold that began at `since` and ended now, last held by `reason`.
  void HoldEndedLocked(uint64_t since, pacing::Verdict reason) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  CUdeviceptr DeviceAddress(const void* word) const {
    return lanes_dev_ + static_cast<CUdeviceptr>(static_cast<const char*>(word) -
                                                 reinterpret_cast<const char*>(slot_));
  }

  const DriverApi* api_ = nullptr;
  spdlog::logger* log_ = nullptr;
  shm::ShmRegion directory_;
  shm::ShmRegion lanes_;
  const pacingreg::Directory* dir_ = nullptr;
  bool registered_ = false;
  CUdeviceptr lanes_dev_ = 0;
  uint64_t session_ = 0;
  const SessionClient* client_ = nullptr;
  PeerOpener open_peer_;
  uint32_t slot_index_ = 0;
  pacingreg::LanesPage* slot_ = nullptr;  // this tenant's own lanes page

  // The other tenants' lanes pages this pacer has mapped, by slot, with the epoch each was
  // published with; the directory says which are current.
  struct PeerPage {
    uint64_t epoch = 0;
    shm::ShmRegion page;
  };
  mutable absl::Mutex peers_mu_;
  std::array<PeerPage, pacingreg::kSlots> peers_ ABSL_GUARDED_BY(peers_mu_);
  // The directory's `members` count when the peers were last brought up to date, and when a
  // refresh last failed to fetch a page (so it is not retried on every launch).
  std::atomic<uint64_t> peers_seen_{0};
  std::atomic<uint64_t> peers_failed_ns_{0};

  // Lanes: stream key -> lane, assigned on first use; when every lane is taken, an idle one is
  // reassigned (or, with more busy streams than lanes, two streams share one).
  absl::Mutex table_mu_;
  absl::flat_hash_map<uint64_t, uint32_t> lane_of_ ABSL_GUARDED_BY(table_mu_);
  uint64_t lane_owner_[pacingreg::kLanes] ABSL_GUARDED_BY(table_mu_) = {};
  std::mutex lane_mu_[pacingreg::kLanes];
  // Per lane, under its lane_mu_: the stream of its last item and the last sequence number a
  // completion write was enqueued for. A BE lane writes only every MarkEvery-th item (and
  // before it waits), since a write costs about as much as a launch; the items in between count
  // as done when a later write lands.
  struct LaneState {
    CUstream stream = nullptr;
    bool ptsz = false;
    uint64_t key = 0;  // StreamKey of the stream: a per-thread default stream's names its thread
    uint64_t marked = 0;
    uint64_t last_end_ns = 0;  // when its last item's call returned (LS)
  };
  LaneState lane_state_[pacingreg::kLanes];
  // LS: a flush (FlushMarkers) found the lane held by another thread, whose End writes.
  std::atomic<bool> flush_wanted_[pacingreg::kLanes] = {};
  // LS: an End left its item unwritten since the last flush (BeforeQuery); cleared before the
  // flush that covers it, so an item left after the clear sets it again. Set and cleared only
  // through these two, which keep ls_unwritten_pacers_ the count of pacers with it set.
  std::atomic<bool> ls_unwritten_{false};
  inline static std::atomic<int> ls_unwritten_pacers_{0};
  void SetLsUnwritten() {
    if (!ls_unwritten_.load(std::memory_order_relaxed) &&
        !ls_unwritten_.exchange(true, std::memory_order_relaxed)) {
      ls_unwritten_pacers_.fetch_add(1, std::memory_order_relaxed);
    }
  }
  bool TakeLsUnwritten() {
    if (!ls_unwritten_.load(std::memory_order_relaxed) ||
        !ls_unwritten_.exchange(false, std::memory_order_relaxed)) {
      return false;
    }
    ls_unwritten_pacers_.fetch_sub(1, std::memory_order_relaxed);
    return true;
  }
  // LS: until when it writes after every item (UINT64_MAX: told to).
  std::atomic<uint64_t> ls_every_until_ns_{0};
  uint64_t every_item_after_idle_ns_ = kEveryItemAfterIdleNs;
  std::atomic<bool> unseen_idle_logged_{false};
  // An LS item's completion write cadence (Ticket::mark_every) on a lane whose stream is
  // `stream_key` (the lane's lock held); 0: the lane's unwritten items went idle unseen, and
  // every item is written for a while.
  uint32_t LsMarkEvery(const LaneState& st, uint64_t stream_key, uint64_t now, uint64_t submitted);

  // The LS reserve: decided once (reserve_mu_), then read without a lock. masks_[r] leaves r
  // TPCs free (r < live TPCs); published by the release store of reserve_state_ (kReserveOff:
  // not decided yet), which is also written to the lanes page for the daemon.
  pacingreg::ReserveState ProbeReserve() ABSL_LOCKS_EXCLUDED(reserve_mu_);
  TpcMasker* masker_ = nullptr;
  CUdevice device_ = 0;
  bool mps_client_ = false;  // set by AttachMasker, before the pacer is shared
  std::atomic<uint32_t> reserve_state_{pacingreg::kReserveOff};
  mutable absl::Mutex reserve_mu_;
  std::vector<pacing::TpcMask> masks_;
  std::string reserve_note_ ABSL_GUARDED_BY(reserve_mu_);

  // BE state.
  absl::Mutex mu_;
  pacing::InflightWindow window_ ABSL_GUARDED_BY(mu_);
  pacing::DurationPredictor predictor_ ABSL_GUARDED_BY(mu_);
  pacing::LsBusyTracker ls_ ABSL_GUARDED_BY(mu_);
  pacing::BusyCredit credit_ ABSL_GUARDED_BY(mu_);
  uint64_t last_check_ns_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t gpu_ns_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t running_until_ns_ ABSL_GUARDED_BY(mu_) = 0;  // predicted end of the work in flight
  // The last check that saw an LS tenant's work in flight or another BE tenant's running: items
  // that could start before it teach the predictor nothing.
  uint64_t interfered_ns_ ABSL_GUARDED_BY(mu_) = 0;
  int waiters_ ABSL_GUARDED_BY(mu_) = 0;
  int holding_ ABSL_GUARDED_BY(mu_) = 0;  // threads held now
  bool active_ ABSL_GUARDED_BY(mu_) = false;
  std::vector<pacing::DurationSample> samples_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> write_failure_logged_{false};
  std::atomic<uint64_t> marked_{0};
  std::atomic<uint64_t> held_{0};
  std::atomic<uint64_t> held_ns_{0};
  std::atomic<uint64_t> held_by_ns_[kReasons] = {};
};

// For the exit report, over the pacer of every GPU in every session (session_gpu.h): "N work
// items marked, M held for X ms in all (...)".
std::string PacingSummary(const SessionManager& sessions);
// For the exit report: the LS reserve per GPU where a BE tenant looked at it, from the newest
// session that opened a pacer on it ("" if nowhere); `masker` (may be null) adds its counts.
std::string ReserveSummary(const SessionManager& sessions, const TpcMasker* masker);

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_PACER_H_
