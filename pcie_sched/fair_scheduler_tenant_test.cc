// Unit tests of FairScheduler, call by call: tenants that go idle and return, arrive, change
// weight, cancel or are removed.
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "missile/pcie_sched/fair_scheduler.h"
#include "pcie_sched/testing/fair_scheduler_test_util.h"

namespace missile::pcie {
namespace {

TEST(FairSchedulerTest, IdleTenantReturnsAtMinVruntimeWithoutCredit) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, 2 * kMiB, 0).ok());
  uint64_t now = 0;
  constexpr uint64_t kChunkNs = 40'000;  // About 2 MiB at 55 GB/s.
  EXPECT_EQ(GrantAndComplete(s, now += kChunkNs), 1u);
  EXPECT_EQ(GrantAndComplete(s, now += kChunkNs), 2u);  // Its only request; then it idles.
  for (int i = 0; i < 1000; ++i) EXPECT_EQ(GrantAndComplete(s, now += kChunkNs), 1u);
  const uint64_t v1 = StatsOf(s.Snapshot(now), 1).vruntime;
  EXPECT_EQ(StatsOf(s.Snapshot(now), 2).vruntime, 2 * kMiB) << "idle: no charge";

  ASSERT_TRUE(s.Submit(2, kTiB, now).ok());  // 40 ms later: far beyond the idle grace.
  EXPECT_EQ(StatsOf(s.Snapshot(now), 2).vruntime, FairSchedulerTestPeer::MinVruntime(s, kBe));
  EXPECT_GE(StatsOf(s.Snapshot(now), 2).vruntime + 2 * kMiB, v1);
  std::map<TenantId, int> grants;
  for (int i = 0; i < 100; ++i) ++grants[GrantAndComplete(s, now += kChunkNs)];
  EXPECT_NEAR(grants[2], 50, 1) << "back to its fair share, not 1000 chunks of catch-up";
}

TEST(FairSchedulerTest, QuickReturnWithinTheGraceKeepsItsPlace) {
  for (uint64_t grace : {uint64_t{0}, uint64_t{1'000'000}}) {
    Config c = Limits(1, 1);
    c.idle_grace_ns = grace;
    FairScheduler s = MakeScheduler(c);
    ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
    ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
    ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
    ASSERT_TRUE(s.Submit(2, 2 * kMiB, 0).ok());
    EXPECT_EQ(GrantAndComplete(s, 0), 1u);
    EXPECT_EQ(GrantAndComplete(s, 0), 2u);  // Idle from t = 0.
    for (int i = 0; i < 10; ++i) EXPECT_EQ(GrantAndComplete(s, 1000 * i), 1u);
    ASSERT_TRUE(s.Submit(2, kTiB, 999'999).ok());  // Just inside a 1 ms grace.
    std::map<TenantId, int> grants;
    for (int i = 0; i < 20; ++i) ++grants[GrantAndComplete(s, 999'999)];
    if (grace == 0) {
      EXPECT_EQ(grants[2], 10) << "strict CFS rule: restarts at min_vruntime";
    } else {
      EXPECT_EQ(grants[2], 15) << "makes up the 10 chunks the other took while it was away";
    }
  }
  // The grace is a strict bound: a return exactly at its end is a return from idle.
  Config c = Limits(1, 1);
  FairScheduler s = MakeScheduler(c);
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, 2 * kMiB, 0).ok());
  GrantAndComplete(s, 0);
  GrantAndComplete(s, 0);
  for (int i = 0; i < 10; ++i) GrantAndComplete(s, 0);
  ASSERT_TRUE(s.Submit(2, kTiB, c.idle_grace_ns).ok());
  EXPECT_EQ(StatsOf(s.Snapshot(0), 2).vruntime, FairSchedulerTestPeer::MinVruntime(s, kBe));
}

TEST(FairSchedulerTest, NewTenantStartsAtMinVruntime) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  for (int i = 0; i < 500; ++i) GrantAndComplete(s, 0);
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  std::map<TenantId, int> grants;
  for (int i = 0; i < 100; ++i) ++grants[GrantAndComplete(s, 0)];
  EXPECT_NEAR(grants[2], 50, 1);
}

TEST(FairSchedulerTest, WeightChangeAppliesFromTheNextDecision) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  for (int i = 0; i < 100; ++i) GrantAndComplete(s, 0);
  ASSERT_TRUE(s.SetWeight(2, 4096).ok());
  std::map<TenantId, int> grants;
  for (int i = 0; i < 500; ++i) ++grants[GrantAndComplete(s, 0)];
  EXPECT_NEAR(grants[2], 400, 2);
  EXPECT_EQ(StatsOf(s.Snapshot(0), 2).weight, 4096u);
}

TEST(FairSchedulerTest, CancelDropsPendingChunksAndWaitsForInflightOnes) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  const RequestId r1 = *s.Submit(1, 10 * kMiB, 0);
  const RequestId r2 = *s.Submit(1, 2 * kMiB, 0);
  std::optional<Grant> a = s.NextGrant(0);
  std::optional<Grant> b = s.NextGrant(0);
  ASSERT_TRUE(a && b);

  absl::StatusOr<std::optional<RequestDone>> c = s.Cancel(r1, 10);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->has_value()) << "two chunks still in flight";
  EXPECT_EQ(s.Cancel(r1, 10).status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(StatsOf(s.Snapshot(10), 1).pending_bytes, 2 * kMiB) << "only r2 remains";

  EXPECT_FALSE(s.Complete(a->id, 20)->has_value());
  std::optional<Grant> next = s.NextGrant(20);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->request, r2) << "r1's remaining chunks were dropped";
  absl::StatusOr<std::optional<RequestDone>> done = s.Complete(b->id, 30);
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_EQ((*done)->request, r1);
  EXPECT_TRUE((*done)->cancelled);
  EXPECT_EQ((*done)->bytes_completed, 4 * kMiB);
  EXPECT_EQ(s.Cancel(r1, 30).status().code(), absl::StatusCode::kNotFound);
}

TEST(FairSchedulerTest, CancelWithNothingInFlightFinishesAtOnce) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  const RequestId r1 = *s.Submit(1, 2 * kMiB, 0);
  const RequestId r2 = *s.Submit(1, 2 * kMiB, 0);
  const RequestId r3 = *s.Submit(1, 2 * kMiB, 0);
  absl::StatusOr<std::optional<RequestDone>> c = s.Cancel(r2, 5);  // In the middle of the queue.
  ASSERT_TRUE(c.ok() && c->has_value());
  EXPECT_TRUE((*c)->cancelled);
  EXPECT_EQ((*c)->bytes_completed, 0u);
  EXPECT_EQ((*c)->done_ns, 5u);
  std::vector<RequestId> order;
  for (int i = 0; i < 3; ++i) {
    std::optional<Grant> g = s.NextGrant(6);
    if (!g) break;
    order.push_back(g->request);
    ASSERT_TRUE(s.Complete(g->id, 6).ok());
  }
  EXPECT_EQ(order, (std::vector<RequestId>{r1, r3}));
  EXPECT_EQ(s.Cancel(9999, 7).status().code(), absl::StatusCode::kNotFound);
}

TEST(FairSchedulerTest, RemoveTenantDropsQueueAndInflightGrants) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  const RequestId r1 = *s.Submit(1, 4 * kMiB, 0);
  const RequestId r2 = *s.Submit(1, 8 * kMiB, 0);
  std::optional<Grant> a = s.NextGrant(0);
  std::optional<Grant> b = s.NextGrant(0);
  ASSERT_TRUE(a && b);
  ASSERT_EQ(a->tenant, 1u);
  ASSERT_EQ(b->tenant, 1u);
  ASSERT_TRUE(s.Submit(2, 4 * kMiB, 0).ok());
  EXPECT_FALSE(s.NextGrant(0)) << "link full";

  absl::StatusOr<RemovedTenant> removed = s.RemoveTenant(1);
  ASSERT_TRUE(removed.ok());
  EXPECT_EQ(removed->requests, (std::vector<RequestId>{r1, r2}));
  EXPECT_EQ(removed->inflight_grants, (std::vector<GrantId>{a->id, b->id}));
  EXPECT_EQ(s.inflight_chunks(), 0u);
  std::optional<Grant> g = s.NextGrant(1);
  ASSERT_TRUE(g);
  EXPECT_EQ(g->tenant, 2u) << "the dropped grants' slots are free at once";
  EXPECT_EQ(s.Complete(a->id, 2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.Cancel(r2, 2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.Submit(1, kMiB, 2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.RemoveTenant(1).status().code(), absl::StatusCode::kNotFound);
  ASSERT_EQ(s.Snapshot(2).tenants.size(), 1u);
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok()) << "the id can be reused";
}

TEST(FairSchedulerTest, RemoveIdleTenantReturnsNothing) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kLs, 1024).ok());
  absl::StatusOr<RemovedTenant> removed = s.RemoveTenant(1);
  ASSERT_TRUE(removed.ok());
  EXPECT_TRUE(removed->requests.empty());
  EXPECT_TRUE(removed->inflight_grants.empty());
}

}  // namespace
}  // namespace missile::pcie
