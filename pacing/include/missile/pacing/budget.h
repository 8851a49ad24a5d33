// An LS latency budget: how much longer than alone an LS tenant's work may take beside BE work
// (docs/pacing.md, "The LS latency budget"). Pure logic over plain numbers (nanoseconds of
// CLOCK_MONOTONIC, counts), in three parts:
//   BusyPeriodTracker  turns polls of one LS tenant's lanes page into its busy periods: how long
//                      each took, what work it held (a signature), and whether any BE work was on
//                      the GPU meanwhile.
//   AloneDurations     learns, per signature, how long a period takes with no BE work on the
//                      GPU, and so gives each other period its stretch (duration over alone).
//   BudgetController   spends the budget: from the stretches it sets the share of the LS's busy
//                      time in which BE work may run, raising it while the stretch stays within
//                      the budget and halving it when it does not; a budget it cannot meet even
//                      with no share it reports as unmet.
// and, on the BE's side, BusyCredit: the GPU time a BE tenant may use while an LS tenant is busy,
// accrued at the published share.
// The daemon owns the first three (daemon/pacing_domain.h: it polls the LS lanes pages and
// publishes the share in the directory, which no tenant can write); each BE shim owns a
// BusyCredit. Thread-safety: none of these classes lock; their owner serialises access.
#ifndef MISSILE_PACING_BUDGET_H_
#define MISSILE_PACING_BUDGET_H_

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/container/flat_hash_map.h"

namespace missile::pacing {

// A budget in percent of the alone time: 100 is "LS first, always" (no BE work while an LS is
// busy); 125 lets the LS's work take up to 1.25x its alone time.
inline constexpr uint32_t kNoBudgetPct = 100;
// The share of an LS tenant's busy time that BE work may use, in parts per million: the BE's
// GPU time over the LS's busy time. On MPS the two run side by side, so a share may pass the
// whole busy time; kMaxSharePpm bounds it (a BE then goes about as it would with no budget).
inline constexpr uint32_t kFullSharePpm = 1'000'000;
inline constexpr uint32_t kMaxSharePpm = 8 * kFullSharePpm;
// Past kMaxSharePpm, what holds a BE back on MPS is its in-flight window (pacing.h): at most
// `window_items` items and `window_us` of predicted work, so the GPU runs dry of BE work between
// the BE's refills. A budget with room left at that share widens the window, doubling at each
// decision (the items, the predicted work and the refill threshold, times the scale), up to
// kMaxWindowScale; over the budget, the window narrows before the share does. The bound takes
// the default window (8 items, 100 us) to InflightWindow::kMaxItems and 12.8 ms of predicted
// work. On the H200 the decoder LS of docs/results.md left the BE short of MPS with priorities
// at the same LS p99 at 16 (80.7 % against 87.1 %) and at 128 alike (81.1-81.7 % against
// 87.6 %): the window is not what holds the BE there.
inline constexpr uint32_t kMaxWindowScale = 128;
// The window doubles only while the room left is at least this much of the budget's (one
// doubling can take more of it than a share step).
inline constexpr double kWindowRoom = 0.2;
// The last step, with the share at kMaxSharePpm, the window at kMaxWindowScale and that much
// room still left: the LS's busy time holds the BE not at all. Once every LS tenant of the GPU
// is at this step, the BE goes as with pacing off: no window, and its copies are not host-paced
// (LsObservation::released). Over the budget, this step is the first taken back. Published as
// this share; the credit of a share this large never runs out.
inline constexpr uint32_t kUnheldSharePpm = UINT32_MAX;

// --- Busy periods -------------------------------------------------------------------------

// One poll of an LS tenant's lanes page, with what the poller saw of the BE tenants.
struct LsPoll {
  uint64_t now = 0;
  bool in_flight = false;    // some lane of the LS had submitted != completed
  uint64_t submissions = 0;  // the LS's items marked so far (a counter)
  uint64_t work_sum = 0;     // the sum of the keys of those items (wraps)
  bool be_in_flight = false;  // some BE tenant of the GPU had work in flight
};

struct BusyPeriod {
  uint64_t signature = 0;  // the items the period held: their count and the sum of their keys
  uint64_t items = 0;      // how many
  uint64_t ns = 0;         // from the poll before its first work to the first poll that saw it over
  bool alone = false;      // no poll of it saw BE work in flight
};

// The busy periods of one LS tenant, from polls at a short period (tens of microseconds): a
// period begins at the first poll that sees work in flight or new submissions, and ends at the
// first poll that sees neither, once `idle_ns` have passed with no new work (an eager LS leaves
// CPU gaps between its kernels; its request is one period). Its duration counts from the poll
// before its first work, so the error is at most one poll period at each end, the same for a
// period alone and one beside BE work. A period is dropped (its duration is not known well
// enough) when the poll that saw it start or end came more than `max_gap_ns` (or a sixteenth
// of the period, if more) after the one before (the poller was late), when any gap between its
// polls was longer than `idle_ns` and `max_inner_gap_ns` (it may hide the end of one period and
// the start of the next), or when it lasted longer than `max_period_ns`.
class BusyPeriodTracker {
 public:
  struct Limits {
    uint64_t idle_ns = 200'000;
    uint64_t max_gap_ns = 200'000;
    uint64_t max_period_ns = 1'000'000'000;
    // A gap between polls inside a period longer than this and than idle_ns may hide the end of
    // one period and the start of another (a late poller on a busy host: a few milliseconds).
    uint64_t max_inner_gap_ns = 2'000'000;
  };
  // Feeds one poll (polls come in time order); returns the period that ended, if one did.
  std::optional<BusyPeriod> Poll(const LsPoll& p, const Limits& limits);
  // Periods dropped so far.
  uint64_t dropped() const { return dropped_; }
  // Forgets the period going on (the count of dropped ones stays).
  void Reset() {
    const uint64_t dropped = dropped_;
    *this = BusyPeriodTracker();
    dropped_ = dropped;
  }

 private:
  bool seen_ = false;  // a poll came before
  uint64_t last_now_ = 0;
  uint64_t last_submissions_ = 0;
  uint64_t last_work_sum_ = 0;
  bool last_be_in_flight_ = false;
  bool open_ = false;
  bool valid_ = true;
  bool alone_ = true;
  uint64_t start_ns_ = 0;
  uint64_t end_ns_ = 0;  // the first poll that saw it over; 0 while work is in flight
  uint64_t base_submissions_ = 0;
  uint64_t base_work_sum_ = 0;
  uint64_t period_submissions_ = 0;
  uint64_t period_work_sum_ = 0;
  uint64_t start_gap_ = 0;  // between the poll it starts from and the first that saw work
  uint64_t end_gap_ = 0;    // between the last poll that saw work and the first that did not
  uint64_t dropped_ = 0;
};

// --- Alone durations ----------------------------------------------------------------------

// Learns how long a period of each signature takes with no BE work on the GPU, what a period's
// stretch is measured against: the least of its last kAloneSamples alone periods. A period's
// measured duration is never shorter than its work took (it counts from the poll before its
// first work to the first poll that saw it done), and what makes an alone period longer, the
// GPU not as it is beside the BE (on the H200 a ResNet-50 graph LS's alone periods before its
// BE's work began took 1.30-1.40 ms, against 1.19-1.20 ms in quiet times), held a mean up for
// tens of seconds. A period whose signature was not seen alone (an eager LS's CPU gaps may cut
// its requests anywhere, so periods of the same work differ) is measured per item instead: its
// duration per item over the mean duration per item of the alone periods (plain over the first
// 8, then the newest weighing 1/8). Bounded: past `capacity` signatures it forgets them all and
// starts again.
class AloneDurations {
 public:
  static constexpr uint32_t kAloneSamples = 8;
  explicit AloneDurations(size_t capacity = 4096) : capacity_(capacity) {}
  void Learn(const BusyPeriod& alone);
  // What the period is measured against: its signature's alone duration, or else its items
  // times the alone periods' duration per item (ns); nullopt while the one used is known from
  // fewer than `min_samples` alone periods. `repeats`: the period's work is the same as the
  // period's before (its signature), so its own alone duration can be learned (a quiet time
  // brings it): until then it has none. Measured per item, a request of a few long items (a
  // graph's) against alone periods of many short ones read 3.4x on the H200, and kept the BE's
  // share at 0 for 12 s.
  std::optional<double> AloneNs(const BusyPeriod& p, uint32_t min_samples = 2,
                                bool repeats = false) const;
  // Whether the period's signature has its own alone duration (from `min_samples` or more).
  bool Knows(const BusyPeriod& p, uint32_t min_samples = 2) const;
  size_t size() const { return table_.size(); }

 private:
  struct Mean {
    double ns = 0;
    uint32_t samples = 0;
  };
  // A signature's last kAloneSamples alone durations (a ring).
  struct Recent {
    double ns[kAloneSamples] = {};
    uint32_t samples = 0;
    double Least() const {
      return *std::min_element(ns, ns + std::min(samples, kAloneSamples));
    }
  };
  size_t capacity_;
  absl::flat_hash_map<uint64_t, Recent> table_;
  Mean per_item_;
};

// --- The controller -----------------------------------------------------------------------

enum class BudgetState {
  kOff,       // the budget is 100 %: BE work waits while the LS is busy, as without a budget
  kLearning,  // no stretch measured yet: no share
  kSpending,  // a share, within the budget as far as measured
  kUnmet,     // the stretch exceeds the budget even with no share: BE work waits, as kOff
};
const char* BudgetStateName(BudgetState s);

struct BudgetStatus {
  BudgetState state = BudgetState::kOff;
  uint32_t share_ppm = 0;      // of the LS's busy time, BE work may use this (kUnheldSharePpm)
  uint32_t window_scale = 1;   // the BE's in-flight window, times this (1..kMaxWindowScale)
  double stretch = 0;          // the stretch the last decision saw (its high quantile); 0: none
  uint64_t periods = 0;        // busy periods measured (with a stretch)
};

// Decides, every `kDecisionEvery` measured periods, from the second highest stretch of the last
// `kWindow` (about their 95th percentile: the budget bounds the LS's p99, and the p90 of eight
// let the p99 pass it). Above the budget, the share halves (under 1 % it is 0) if the newest
// periods brought a stretch above it, and holds if the one above it is older (one slow period
// halves the share once, not at each decision it stays in the window); a widened window halves
// first (and before that, an unheld BE is held again at kMaxSharePpm). Within it, the share
// grows in proportion to the room left, by up to 10 points or a quarter of itself, whichever is
// more, up to kMaxSharePpm; at kMaxSharePpm the window doubles instead, while the room is
// kWindowRoom or more, and at kMaxWindowScale the share becomes kUnheldSharePpm. With no share
// and new stretches above the budget at 3 decisions in a row, the budget is unmet (until a
// decision finds it met). A budget of 100 % (or less) keeps the share at 0 and the window at 1.
class BudgetController {
 public:
  static constexpr size_t kDecisionEvery = 8;
  static constexpr size_t kWindow = 32;
  void set_budget_pct(uint32_t pct);
  uint32_t budget_pct() const { return budget_pct_; }
  // One measured period's stretch.
  void Observe(double stretch);
  const BudgetStatus& status() const { return status_; }

 private:
  void Decide();
  uint32_t budget_pct_ = kNoBudgetPct;
  size_t since_decision_ = 0;   // periods observed since the last decision
  std::vector<double> recent_;  // the last kWindow stretches, oldest first
  int over_at_zero_ = 0;
  BudgetStatus status_;
};

// How long an LS tenant's alone durations serve before missiled holds the BE tenants for a
// quiet time to relearn them (each quiet time costs the BE its work for up to 100 ms:
// PacingDomain::kQuietNs). kRelearnNs while the controller trades a share near the budget,
// where a stale alone duration moves the decision; kRelearnReleasedNs once it released the BE
// (kUnheldSharePpm) with the stretch at most kRelearnRoom of the budget: an alone duration
// would have to shrink by a tenth before the budget is passed, and one that grows (a slower
// GPU) only makes the stretch read high. On the H100 a quiet time every 10 s held a released
// BE 81-100 ms, and the 5 s windows with one gave it 84.6 % of its solo throughput against
// 86.1 % in the window without (docs/pacing.md, "Learning alone").
inline constexpr uint64_t kRelearnNs = 10'000'000'000;
inline constexpr uint64_t kRelearnReleasedNs = 60'000'000'000;
inline constexpr double kRelearnRoom = 0.9;
uint64_t RelearnEveryNs(const BudgetStatus& status, uint32_t budget_pct);
// Whether the controller released the BE (kUnheldSharePpm) with its last decision's stretch at
// most kRelearnRoom of `budget_pct`.
bool ReleasedWithRoom(const BudgetStatus& status, uint32_t budget_pct);
// Fresh periods each LS tenant's controller measures after a rest ([compute] ls_rest_ms) before
// the next one may begin: two decisions' worth.
inline constexpr uint64_t kRestCheckPeriods = 2 * BudgetController::kDecisionEvery;

// --- The BE's side ------------------------------------------------------------------------

// The GPU time a BE tenant may put on the GPU while an LS tenant is busy: credit accrues at
// `share_ppm` of the time the LS is busy (up to `cap_ns`, so a burst is at most that), each item
// that goes takes its predicted duration, and an item may go while the credit is positive. The
// credit starts at 0 with each busy period: BE work never goes at the start of one.
class BusyCredit {
 public:
  // Brings the credit to `now`: accrues while `ls_busy`, and starts from 0 at a busy period.
  void Advance(uint64_t now, bool ls_busy, uint32_t share_ppm, uint64_t cap_ns);
  // Whether the busy LS lets an item predicted to run `predicted_ns` go now: at the last step
  // (kUnheldSharePpm) always, taking nothing; else if `window_admits` (an item that will not go
  // takes no credit) and the credit is positive, taking `predicted_ns`.
  bool Lets(uint32_t share_ppm, uint64_t predicted_ns, bool window_admits);
  // Advance, then Lets while busy (always true while not).
  bool Take(uint64_t now, bool ls_busy, uint32_t share_ppm, uint64_t predicted_ns,
            uint64_t cap_ns) {
    Advance(now, ls_busy, share_ppm, cap_ns);
    return !ls_busy || Lets(share_ppm, predicted_ns, /*window_admits=*/true);
  }
  int64_t credit_ns() const { return credit_ns_; }

 private:
  uint64_t last_ns_ = 0;
  bool was_busy_ = false;
  int64_t credit_ns_ = 0;
};

}  // namespace missile::pacing

#endif  // MISSILE_PACING_BUDGET_H_
