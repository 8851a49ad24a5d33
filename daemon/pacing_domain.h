// The pacing domain of one GPU: the daemon's side of the pacing region
// (common/pacing_region.h). It creates the region, gives each tenant session a slot and the
// region's descriptor (on the side channel), publishes the [compute] policy every shim reads,
// clears a session's slot when the session ends (so a dead LS never holds the BE tenants), and
// reads the tenants' pacing figures for missilectl. A sampler thread (started by Create, stopped
// by the destructor) reads every occupied slot once a millisecond (and sleeps while no slot is
// taken) and keeps, per slot, how much of about the last second an LS tenant had work in flight
// and a BE tenant was held. No CUDA.
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

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/pacing_region.h"
#include "missile/common/tenant_class.h"

namespace missile::daemon {

// The policy published to the shims; see [compute] in deploy/missiled.toml.
struct PacingSettings {
  bool pacing = true;
  uint32_t window_items = 8;
  uint64_t window_ns = 100'000;
  uint64_t ls_idle_ns = 200'000;
  uint64_t ls_stale_ns = 200'000'000;
  uint64_t max_hold_ns = 20'000'000;
  uint64_t unknown_ns = 50'000;
  uint64_t share_slack_ns = 2'000'000;
  uint64_t refill_ns = 25'000;
  bool operator==(const PacingSettings&) const = default;
};

// A change of the policy in force, in the units of [compute] (and of SetPacingRequest); unset
// fields keep their value.
struct PacingChange {
  std::optional<bool> pacing;
  std::optional<uint64_t> window_items;    // 1..1024
  std::optional<uint64_t> window_us;       // 0..1000000
  std::optional<uint64_t> ls_idle_us;      // 0..1000000
  std::optional<uint64_t> ls_stale_ms;     // 1..600000
  std::optional<uint64_t> max_hold_ms;     // 0..600000
  std::optional<uint64_t> unknown_us;      // 0..1000000
  std::optional<uint64_t> share_slack_us;  // 0..1000000
  std::optional<uint64_t> refill_us;       // 0..1000000
  bool empty() const {
    return !pacing && !window_items && !window_us && !ls_idle_us && !ls_stale_ms &&
           !max_hold_ms && !unknown_us && !share_slack_us && !refill_us;
  }
};

// `before` with `change` applied. The ranges are those of [compute] (daemon/config.cc); a value
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
  // From the sampler, decayed over about a second (time constant kShareWindowNs):
  double busy_share = 0;  // LS: fraction of the time it had work in flight (0 for BE)
  double held_share = 0;  // BE: fraction of the time its submissions were held (0 for LS)
};

class PacingDomain {
 public:
  // The sampler's period and the time constant of its decayed shares.
  static constexpr uint64_t kSampleNs = 1'000'000;
  static constexpr uint64_t kShareWindowNs = 1'000'000'000;

  // Creates the region and starts the sampler thread.
  static absl::StatusOr<std::unique_ptr<PacingDomain>> Create(const PacingSettings& settings);
  // Stops the sampler, then unmaps the region.
  ~PacingDomain();
  PacingDomain(const PacingDomain&) = delete;
  PacingDomain& operator=(const PacingDomain&) = delete;

  // Advances on every turn of the sampler's loop (at least every 100 ms while it runs), for the
  // watchdog (watchdog.h).
  uint64_t heartbeat() const { return heartbeat_.load(std::memory_order_relaxed); }

  // Gives `session` a slot (keeps the one it has). RESOURCE_EXHAUSTED when every slot is taken.
  absl::Status Assign(uint64_t session, int pid, TenantClass cls, uint32_t weight);
  // Assign, then a new descriptor of the region for the tenant (the caller sends and closes it).
  absl::StatusOr<int> Join(uint64_t session, int pid, TenantClass cls, uint32_t weight);
  // Frees the session's slot: its lanes read as idle at once. No-op for an unknown session.
  void Leave(uint64_t session);
  void SetPolicy(uint64_t session, TenantClass cls, uint32_t weight);
  void Configure(const PacingSettings& settings);
  PacingSettings settings() const;
  std::optional<PacingStats> Stats(uint64_t session) const;
  // The slot index of a session (tests).
  std::optional<uint32_t> SlotOf(uint64_t session) const;
  // The region as the daemon maps it (tests).
  pacingreg::Region* region() const { return region_; }

 private:
  // The sampler's estimate for one slot, reset when a session takes or leaves it.
  struct Sample {
    uint64_t last_held_ns = 0;  // held_ns at the previous sample
    uint64_t owed_held_ns = 0;  // growth of held_ns not yet counted (a hold is added when it ends)
    double busy_share = 0;
    double held_share = 0;
  };

  PacingDomain() = default;
  void Publish(const PacingSettings& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes how many LS and BE tenants the GPU has.
  void CountLs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void RunSampler();
  void SampleLocked(uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool LanesBusy(const pacingreg::Slot& s) const;

  int memfd_ = -1;
  pacingreg::Region* region_ = nullptr;
  mutable absl::Mutex mu_;
  PacingSettings settings_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint32_t> slot_of_ ABSL_GUARDED_BY(mu_);
  std::array<Sample, pacingreg::kSlots> samples_ ABSL_GUARDED_BY(mu_);
  uint64_t last_sample_ns_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::atomic<uint64_t> heartbeat_{0};
  absl::CondVar wake_;
  std::thread sampler_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_PACING_DOMAIN_H_
