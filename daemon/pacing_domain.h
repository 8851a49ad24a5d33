// The pacing domain of one GPU: the daemon's side of the pacing region
// (common/pacing_region.h). It creates the region, gives each tenant session a slot and the
// region's descriptor (on the side channel), publishes the [compute] policy every shim reads,
// clears a session's slot when the session ends (so a dead LS never holds the BE tenants), and
// reads the tenants' pacing figures for missilectl. No CUDA.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_DAEMON_PACING_DOMAIN_H_
#define MISSILE_DAEMON_PACING_DOMAIN_H_

#include <cstdint>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/pacing_region.h"

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
  bool operator==(const PacingSettings&) const = default;
};

struct PacingStats {
  bool ls = false;
  uint64_t submissions = 0;  // work items the tenant marked
  uint64_t held_ns = 0;      // BE: time its submissions were held
  uint64_t held_count = 0;   // BE: submissions held at all
  uint64_t inflight = 0;     // BE: items in flight now
  uint64_t gpu_ns = 0;       // BE: GPU time accounted for its weighted share
  bool busy = false;         // LS: work in flight now
};

class PacingDomain {
 public:
  static absl::StatusOr<std::unique_ptr<PacingDomain>> Create(const PacingSettings& settings);
  ~PacingDomain();
  PacingDomain(const PacingDomain&) = delete;
  PacingDomain& operator=(const PacingDomain&) = delete;

  // Gives `session` a slot (keeps the one it has). RESOURCE_EXHAUSTED when every slot is taken.
  absl::Status Assign(uint64_t session, int pid, bool ls, uint32_t weight);
  // Assign, then a new descriptor of the region for the tenant (the caller sends and closes it).
  absl::StatusOr<int> Join(uint64_t session, int pid, bool ls, uint32_t weight);
  // Frees the session's slot: its lanes read as idle at once. No-op for an unknown session.
  void Leave(uint64_t session);
  void SetPolicy(uint64_t session, bool ls, uint32_t weight);
  void Configure(const PacingSettings& settings);
  PacingSettings settings() const;
  std::optional<PacingStats> Stats(uint64_t session) const;
  // The slot index of a session (tests).
  std::optional<uint32_t> SlotOf(uint64_t session) const;
  // The region as the daemon maps it (tests).
  pacingreg::Region* region() const { return region_; }

 private:
  PacingDomain() = default;
  void Publish(const PacingSettings& s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Publishes how many LS and BE tenants the GPU has.
  void CountLs() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  int memfd_ = -1;
  pacingreg::Region* region_ = nullptr;
  mutable absl::Mutex mu_;
  PacingSettings settings_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, uint32_t> slot_of_ ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_PACING_DOMAIN_H_
