// What the FairScheduler tests share: a peer that reaches the scheduler's private state, and
// helpers that build a scheduler and drive it call by call.
#ifndef MISSILE_PCIE_SCHED_TESTING_FAIR_SCHEDULER_TEST_UTIL_H_
#define MISSILE_PCIE_SCHED_TESTING_FAIR_SCHEDULER_TEST_UTIL_H_

#include <optional>
#include <utility>

#include "gtest/gtest.h"
#include "missile/pcie_sched/fair_scheduler.h"

namespace missile::pcie {

class FairSchedulerTestPeer {
 public:
  static void SetRebaseThreshold(FairScheduler& s, uint64_t threshold) {
    s.rebase_threshold_ = threshold;
  }
  static uint64_t MinVruntime(const FairScheduler& s, TenantClass cls) {
    return s.min_vruntime_[s.DomainOf(cls)];
  }
};

using Config = FairScheduler::Config;
inline constexpr TenantClass kLs = TenantClass::kLatencySensitive;
inline constexpr TenantClass kBe = TenantClass::kBestEffort;

inline FairScheduler MakeScheduler(Config config = {}) {
  absl::StatusOr<FairScheduler> s = FairScheduler::Create(config);
  EXPECT_TRUE(s.ok()) << s.status();
  return *std::move(s);
}

inline Config Limits(uint32_t total, uint32_t per_tenant) {
  Config c;
  c.max_inflight_chunks_total = total;
  c.max_inflight_chunks_per_tenant = per_tenant;
  return c;
}

inline const TenantStats& StatsOf(const SchedulerSnapshot& snap, TenantId id) {
  for (const TenantStats& t : snap.tenants) {
    if (t.id == id) return t;
  }
  ADD_FAILURE() << "no tenant " << id;
  static const TenantStats kNone;
  return kNone;
}

// Grants one chunk and completes it at once; returns the tenant it went to (0 when none).
inline TenantId GrantAndComplete(FairScheduler& s, uint64_t now) {
  std::optional<Grant> g = s.NextGrant(now);
  if (!g.has_value()) return 0;
  EXPECT_TRUE(s.Complete(g->id, now).ok());
  return g->tenant;
}

}  // namespace missile::pcie

#endif  // MISSILE_PCIE_SCHED_TESTING_FAIR_SCHEDULER_TEST_UTIL_H_
