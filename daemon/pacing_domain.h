// The pacing domain of one GPU: the daemon's side of the pacing regions
// (common/pacing_region.h). It owns the GPU's directory (the policy and one entry per tenant
// session, written by the daemon alone and sealed read-only for everyone else), creates each
// session's lanes page and hands the tenant its writable descriptor, publishes a page once its
// tenant has sealed it against other writers, and hands read-only descriptors of published pages
// to the BE tenants of the GPU, which must see their peers' lanes. It clears a session's entry
// when the session ends (so a dead LS never holds the BE tenants), and reads the tenants' pacing
// figures for missilectl, bounded (ReadLanes: they are each tenant's own report). A sampler
// thread (started by Create, stopped by the destructor) reads every occupied slot once a
// millisecond (and sleeps while no slot is taken), publishes newly sealed lanes pages, and keeps,
// per slot, how much of about the last second an LS tenant had work in flight and a BE tenant
// was held. While an LS latency budget is in force, the sampler also times the LS tenants' busy
// periods and runs their budget controllers (pacing/budget.h), publishing each one's BE share in
// its directory entry. No CUDA.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_DAEMON_PACING_DOMAIN_H_
#define MISSILE_DAEMON_PACING_DOMAIN_H_

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <type_traits>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/compute_settings.h"
#include "missile/common/pacing_region.h"
#include "missile/common/shm_region.h"
#include "missile/common/tenant_class.h"
#include "missile/pacing/budget.h"

namespace missile::daemon {

// The policy published to the shims: one field per line of compute_settings.inc ([compute] in
// missiled.toml), in nanoseconds for a time.
struct PacingSettings {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  type field = settings::ToField<type>(def, settings::Unit::unit);
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  bool operator==(const PacingSettings&) const = default;
};

// A change of the policy in force, in the units of [compute] (and of SetPacingRequest): one
// field per line of compute_settings.inc, named by its key; unset fields keep their value.
struct PacingChange {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  std::optional<std::conditional_t<std::is_same_v<type, bool>, bool, uint64_t>> key;
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  bool empty() const {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  if (key) return false;
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
    return true;
  }
};

// `before` with `change` applied. The ranges are those of compute_settings.inc; a value
// out of range is InvalidArgument naming the field ("window_us must be in [0, 1000000], got
// 5000000"), checked for every field before anything is applied. Pure.
absl::StatusOr<PacingSettings> ApplyPacingChange(const PacingSettings& before,
                                                 const PacingChange& change);

// The fields that differ, in [compute] units: "pacing on -> off, window_us 100 -> 300";
// "unchanged" when none does. Pure.
std::string DescribePacingChange(const PacingSettings& before, const PacingSettings& after);

struct PacingStats {
  bool ls = false;
  uint64_t submissions = 0;  // work items the tenant marked
  uint64_t held_ns = 0;      // BE: time its submissions were held
  uint64_t held_count = 0;   // BE: submissions held at all
  uint64_t inflight = 0;     // BE: items in flight now
  uint64_t gpu_ns = 0;       // BE: GPU time accounted for its weighted share
  bool busy = false;         // LS: work in flight now
  bool lanes = false;        // its lanes page is published (sealed by the tenant)
  // From the sampler, decayed over about a second (time constant kShareWindowNs):
  double busy_share = 0;  // LS: fraction of the time it had work in flight (0 for BE)
  double held_share = 0;  // BE: fraction of the time its submissions were held (0 for LS)
  // From the sampler: the time it had work in flight on the GPU (any class), counted at each
  // sample, since the session took its slot. Not GPU time: work in flight includes work that
  // waits for its time slice behind another process's. A tenant marks its work only while it
  // is paced (an LS while a BE shares the GPU, a BE while an LS or another BE does).
  uint64_t busy_ns = 0;
  uint32_t reserve_state = 0;  // BE: pacingreg::ReserveState, as its shim reports it
  uint32_t reserve_tpcs = 0;   // BE: TPCs its kernels leave free (reserve_state active)
  bool mps_client = false;     // its shim says it is an MPS client on this GPU
  // LS: its latency budget (its own, SetBudget, else [compute] ls_budget_pct) and what the controller measured against
  // it (pacing/budget.h): the share of its busy time BE work may use now, the stretch of its
  // busy periods at the last decision (0: none yet), the newest period against its alone
  // duration, the periods measured against their alone duration, and the alone periods learned.
  uint32_t budget_pct = pacing::kNoBudgetPct;
  pacing::BudgetState budget_state = pacing::BudgetState::kOff;
  double be_share = 0;             // +infinity: the BE is not held (pacing::kUnheldSharePpm)
  uint32_t be_window_scale = 1;  // the BE's window, times this (pacing::kMaxWindowScale)
  double stretch = 0;
  // The newest measured period's duration and the alone duration it was measured against (ns;
  // 0 while none was): what the stretch is made of.
  uint64_t period_ns = 0;
  double alone_ns = 0;
  uint64_t periods = 0;
  uint64_t alone_periods = 0;
  uint64_t dropped_periods = 0;  // not timed well enough (the poller was late)
  bool resting = false;          // the LS tenants rest ([compute] ls_rest_ms): nothing measured
};

// The domain at one instant, as the BE shims pace against it (the metrics' per-GPU view).
struct PacingSummary {
  uint32_t ls_tenants = 0;
  uint32_t be_tenants = 0;
  bool ls_busy = false;  // an LS tenant has work in flight now: BE tenants are held
  // From the sampler, since the domain was created: the time any LS (any BE) tenant of the GPU
  // had work in flight, and that fraction of about the last second (the decayed share). As
  // PacingStats::busy_ns: work in flight, not GPU time, and only work that its tenant marked.
  uint64_t ls_busy_ns = 0;
  uint64_t be_busy_ns = 0;
  double ls_busy_share = 0;
  double be_busy_share = 0;
};

class PacingDomain {
 public:
  // The sampler's period and the time constant of its decayed shares.
  static constexpr uint64_t kSampleNs = 1'000'000;
  // While an LS latency budget is in force on the GPU (an LS tenant, a BE tenant, an LS tenant's
  // budget above 100), the sampler polls the LS tenants' lanes this often, to time their busy periods.
  static constexpr uint64_t kObserveNs = 20'000;
  // A busy period with a gap between polls longer than this is not timed.
  static constexpr uint64_t kMaxPollGapNs = 100'000;
  // To learn an LS tenant's alone durations, BE tenants submit nothing for at most kQuietNs (the
  // quiet ends once two alone periods were seen for work never timed alone, one for a
  // refresh), at most once per kQuietEveryNs while an LS tenant's recent busy periods have no
  // alone duration, and at least once per pacing::RelearnEveryNs (10 s; 60 s while the BE is
  // released well within the budget) while a budget is spent (the alone durations follow the
  // GPU's clocks and the LS's inputs).
  static constexpr uint64_t kQuietNs = 100'000'000;
  static constexpr uint64_t kQuietEveryNs = 1'000'000'000;
  static constexpr uint64_t kShareWindowNs = 1'000'000'000;

  // Creates the directory and starts the sampler thread (unless `sampler` is false: tests that
  // drive the budget work with a clock of their own through ObserveBudgets).
  static absl::StatusOr<std::unique_ptr<PacingDomain>> Create(const PacingSettings& settings,
                                                              bool sampler = true);
  // Stops the sampler, then unmaps the regions.
  ~PacingDomain();
  PacingDomain(const PacingDomain&) = delete;
  PacingDomain& operator=(const PacingDomain&) = delete;

  // Advances on every turn of the sampler's loop (at least every 100 ms while it runs), for the
  // watchdog (watchdog.h).
  uint64_t heartbeat() const { return heartbeat_.load(std::memory_order_relaxed); }
  // True from the first rest of the LS tenants on ([compute] ls_rest_ms) while every LS
  // tenant's budget still releases the BE with room, the checks between rests included (so that
  // they measure what it allows): the GPU's copy arbiter then offers BE tenants the rest chunk
  // size (CopyArbiter::Options::ls_resting). Shared, so that it outlives the domain.
  std::shared_ptr<const std::atomic<bool>> ls_resting_signal() const { return ls_resting_; }

  // Slots of a GPU that only LS sessions may take: BE sessions (and sessions that registered
  // and never work, which come as BE by default) cannot leave an LS tenant without one.
  static constexpr uint32_t kLsReservedSlots = 16;

  // Gives `session` a slot (keeps the one it has). RESOURCE_EXHAUSTED when every slot is taken,
  // or, for a BE session, every slot but the LS reserve.
  absl::Status Assign(uint64_t session, int pid, TenantClass cls, uint32_t weight);
  // The descriptors a tenant's shim maps, the caller's to send and close: the directory (sealed:
  // any mapping of it is read-only) and a new lanes page for the session (writable, published
  // once its tenant sealed it; a later Join of the session replaces it).
  struct Descriptors {
    int directory = -1;
    int lanes = -1;
  };
  // Assign, then the descriptors.
  absl::StatusOr<Descriptors> Join(uint64_t session, int pid, TenantClass cls, uint32_t weight);
  // A read-only descriptor of the lanes page in `slot`, for `reader`, a BE session of this GPU
  // (only BE tenants read their peers' lanes). NOT_FOUND unless the slot's page is published
  // with `epoch` (the reader saw it in the directory); PERMISSION_DENIED for an LS reader.
  absl::StatusOr<int> OpenPeerLanes(uint64_t reader, uint32_t slot, uint64_t epoch);
  // Frees the session's slot: its lanes are no longer read by anyone. No-op for an unknown
  // session.
  void Leave(uint64_t session);
  void SetPolicy(uint64_t session, TenantClass cls, uint32_t weight);
  // The session's own latency budget, in percent (100..1000), which it keeps while LS; 0: it
  // follows settings().ls_budget_pct. Reset when the session takes a slot (Assign): the caller
  // sets it again then. No-op for a session without a slot.
  void SetBudget(uint64_t session, uint32_t pct);
  void Configure(const PacingSettings& settings);
  PacingSettings settings() const;
  std::optional<PacingStats> Stats(uint64_t session) const;
  PacingSummary Summary() const;
  // The slot index of a session (tests).
  std::optional<uint32_t> SlotOf(uint64_t session) const;
  // The directory as the daemon maps it (tests).
  const pacingreg::Directory* directory() const {
    return static_cast<const pacingreg::Directory*>(directory_.data());
  }
  // Publishes the lanes pages their tenants have sealed since the sampler's last turn (tests;
  // the sampler does it every turn).
  void PublishSealed();
  // The sampler's budget work for one poll at `now` (tests; the sampler does it every turn).
  void ObserveBudgets(uint64_t now);
  // Publishes an LS session's BE share and window scale as its budget controller would (tests of
  // the BE's side; the sampler overwrites them while a budget is in force).
  void SetBeShareForTesting(uint64_t session, uint32_t share_ppm, uint32_t window_scale = 1);
  // Publishes a quiet time as the budget work would (tests of the BE's side).
  void SetQuietUntilForTesting(uint64_t until_ns);
  // Publishes a rest of the LS tenants as the budget work would (tests of the LS's side).
  void SetRestUntilForTesting(uint64_t until_ns);

 private:
  // The sampler's estimate for one slot, reset when a session takes or leaves it.
  struct Sample {
    uint64_t last_held_ns = 0;  // held_ns at the previous sample
    uint64_t owed_held_ns = 0;  // growth of held_ns not yet counted
    double busy_share = 0;
    double held_share = 0;
    uint64_t busy_ns = 0;  // time with work in flight
  };
  // The sampler's estimate for the whole GPU (PacingSummary).
  struct GpuSample {
    uint64_t ls_busy_ns = 0;
    uint64_t be_busy_ns = 0;
    double ls_busy_share = 0;
    double be_busy_share = 0;
  };
  // An LS tenant's budget: its busy periods, their alone durations, the controller.
  struct Budget {
    pacing::BusyPeriodTracker tracker;
    pacing::AloneDurations alone;
    pacing::BudgetController controller;
    uint64_t alone_periods = 0;
    uint64_t last_alone_ns = 0;   // when an alone period was last learned
    uint64_t last_period_ns = 0;  // when a period last ended
    uint32_t unknown = 0;         // bit per recent period: 1 if it had no alone duration to go by
    // The newest period measured against an alone duration: how long it took, and that alone
    // duration (ns; 0 while none was).
    uint64_t measured_ns = 0;
    double measured_alone_ns = 0;
    uint64_t last_signature = 0;  // of the last period that ended
    uint64_t periods_at_check = 0;   // the controller's periods when the last rest ended
    bool drop_next_period = false;   // a rest just ended
  };
  // What the daemon keeps of one slot besides its directory entry.
  struct SlotState {
    shm::ShmRegion lanes;   // the session's lanes page, once it joined
    uint64_t epoch = 0;     // published as the entry's lanes_epoch; 0 while not sealed
    Sample sample;
    Budget budget;
    uint32_t budget_pct = 0;  // its own budget (SetBudget); 0: settings_.ls_budget_pct
  };

  PacingDomain() = default;
  pacingreg::Directory* dir() { return static_cast<pacingreg::Directory*>(directory_.data()); }
  void Publish(const PacingSettings& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes how many LS and BE tenants the GPU has, and that the entries changed.
  void CountLs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void PublishSealedLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunSampler();
  void SampleLocked(uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The budget of the LS tenant in `slot`: its own, else settings_.ls_budget_pct.
  uint32_t BudgetOfLocked(uint32_t slot) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether an LS latency budget is in force: pacing on, an LS tenant's budget above 100, an LS
  // and a BE tenant on the GPU.
  bool BudgetsActiveLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One poll of the LS tenants' lanes for their budgets: times their busy periods, feeds the
  // controllers, publishes each LS tenant's BE share and, when alone durations are missing, a
  // quiet time for the BE tenants.
  void ObserveBudgetsLocked(uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // What this poll's LS tenants need of a quiet time: alone periods (`alone`), for work never
  // timed alone (`new_work`: two, else one); `useful`: an LS tenant with a budget works beside
  // a BE that works; `alone_total`: the alone periods learned so far.
  struct QuietNeeds {
    bool alone = false;
    bool new_work = false;
    bool useful = false;
    uint64_t alone_total = 0;
  };
  // Rests ([compute] ls_rest_ms): LS tenants mark nothing while every LS tenant's budget has
  // released the BE with room to spare (pacing::ReleasedWithRoom). One begins once each LS
  // tenant's controller measured pacing::kRestCheckPeriods periods since the last one ended, no
  // quiet time is going on or wanted; it ends at its time, or as soon as the setting, the
  // tenants or a budget change.
  bool AllReleasedWithRoomLocked() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool RestHoldsLocked(uint64_t now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void MaybeRestLocked(uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The LS tenants' periods start afresh (the first one is dropped).
  void EndRestLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Begins a quiet time the LS tenants need, or ends the one going on.
  void QuietTurnLocked(uint64_t now, const QuietNeeds& needs) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The budget work of one turn: ObserveBudgetsLocked while a budget is in force,
  // StopBudgetsLocked once none is; returns whether one is.
  bool BudgetsTurnLocked(uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // No budget in force: no share, no quiet time, every LS tenant's periods start afresh.
  void StopBudgetsLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The slot's lanes as the daemon may use them (all idle while the page is not published).
  pacingreg::LanesView View(uint32_t slot, uint64_t now) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  shm::ShmRegion directory_;
  mutable absl::Mutex mu_;
  PacingSettings settings_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint32_t> slot_of_ ABSL_GUARDED_BY(mu_);
  std::array<SlotState, pacingreg::kSlots> slots_ ABSL_GUARDED_BY(mu_);
  uint64_t next_epoch_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t last_sample_ns_ ABSL_GUARDED_BY(mu_) = 0;
  GpuSample gpu_sample_ ABSL_GUARDED_BY(mu_);
  bool budgets_active_ ABSL_GUARDED_BY(mu_) = false;
  uint64_t quiet_until_ns_ ABSL_GUARDED_BY(mu_) = 0;   // 0: no quiet time going on
  uint64_t quiet_alone_mark_ ABSL_GUARDED_BY(mu_) = 0;  // alone periods when it began
  uint64_t quiet_needs_ ABSL_GUARDED_BY(mu_) = 2;       // new alone periods that end it
  uint64_t next_quiet_ns_ ABSL_GUARDED_BY(mu_) = 0;    // no quiet time begins before this
  bool alone_wanted_ ABSL_GUARDED_BY(mu_) = false;     // an LS tenant needs alone periods
  uint64_t rest_began_ns_ ABSL_GUARDED_BY(mu_) = 0;     // 0: no rest going on
  uint64_t rest_members_ ABSL_GUARDED_BY(mu_) = 0;      // the policy's members when it began
  const std::shared_ptr<std::atomic<bool>> ls_resting_ = std::make_shared<std::atomic<bool>>(false);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> heartbeat_{0};
  absl::CondVar wake_;
  std::thread sampler_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_PACING_DOMAIN_H_
