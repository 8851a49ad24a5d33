// Unit tests of FairScheduler, call by call: the two classes (LS first or only a label),
// moving a tenant between them, the bypass and LS bounds, the BE chunk size.
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "missile/pcie_sched/fair_scheduler.h"
#include "pcie_sched/testing/fair_scheduler_test_util.h"

namespace missile::pcie {
namespace {

TEST(FairSchedulerTest, LsFirstPicksLsBeforeAnyBe) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 88761).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 15).ok());
  ASSERT_TRUE(s.AddTenant(3, kLs, 15).ok());
  ASSERT_TRUE(s.Submit(1, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, 4 * kMiB, 0).ok());
  ASSERT_TRUE(s.Submit(3, 4 * kMiB, 0).ok());
  std::vector<TenantId> order;
  for (int i = 0; i < 6; ++i) order.push_back(GrantAndComplete(s, 0));
  EXPECT_EQ(order, (std::vector<TenantId>{2, 3, 2, 3, 1, 1}));
}

TEST(FairSchedulerTest, WithoutLsFirstTheClassIsOnlyALabel) {
  Config c = Limits(1, 1);
  c.ls_first = false;
  FairScheduler s = MakeScheduler(c);
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kGiB, 0).ok());
  std::vector<TenantId> order;
  for (int i = 0; i < 4; ++i) order.push_back(GrantAndComplete(s, 0));
  EXPECT_EQ(order, (std::vector<TenantId>{1, 2, 1, 2}));
}

TEST(FairSchedulerTest, BeWaitsWhileLsHasPendingChunks) {
  FairScheduler s = MakeScheduler(Limits(3, 2));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, 6 * kMiB, 0).ok());
  std::optional<Grant> a = s.NextGrant(0);
  std::optional<Grant> b = s.NextGrant(0);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->tenant, 2u);
  EXPECT_EQ(b->tenant, 2u);
  EXPECT_FALSE(s.NextGrant(0)) << "a slot is free, but LS still has a chunk to send";
  ASSERT_TRUE(s.Complete(a->id, 1).ok());
  std::optional<Grant> c = s.NextGrant(1);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->tenant, 2u);
  std::optional<Grant> d = s.NextGrant(1);
  ASSERT_TRUE(d);
  EXPECT_EQ(d->tenant, 1u) << "LS has nothing pending now";
}

TEST(FairSchedulerTest, WithoutLsFirstFreeSlotsGoToOthers) {
  Config c = Limits(3, 2);
  c.ls_first = false;
  FairScheduler s = MakeScheduler(c);
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kGiB, 0).ok());
  std::vector<TenantId> order;
  while (std::optional<Grant> g = s.NextGrant(0)) order.push_back(g->tenant);
  EXPECT_EQ(order, (std::vector<TenantId>{1, 2, 1}));
}

TEST(FairSchedulerTest, SetClassMovesATenantBetweenClasses) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  for (int i = 0; i < 10; ++i) GrantAndComplete(s, 0);
  ASSERT_TRUE(s.SetClass(2, kLs).ok());
  EXPECT_EQ(StatsOf(s.Snapshot(0), 2).cls, kLs);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(GrantAndComplete(s, 0), 2u);
  ASSERT_TRUE(s.SetClass(2, kBe).ok());
  std::map<TenantId, int> grants;
  for (int i = 0; i < 20; ++i) ++grants[GrantAndComplete(s, 0)];
  // Back among the BE tenants with the lag it had in the LS class (none: it was alone there), so
  // the chunks it took as an LS tenant are not held against it: the two alternate.
  EXPECT_NEAR(grants[1], 10, 1);
  EXPECT_EQ(s.SetClass(2, kBe).code(), absl::StatusCode::kOk) << "same class is a no-op";
}

TEST(FairSchedulerTest, BypassAndLsBounds) {
  Config strict;
  strict.be_min_share = 0;
  FairScheduler s = MakeScheduler(strict);
  EXPECT_TRUE(s.ShouldBypass(64 * kKiB - 1));
  EXPECT_FALSE(s.ShouldBypass(64 * kKiB));
  // (2 in flight + 1) x 2 MiB at 55.4 B/ns.
  EXPECT_EQ(s.LsWaitBoundNs(55.4), static_cast<uint64_t>(std::ceil(3.0 * 2 * kMiB / 55.4)));
  EXPECT_EQ(s.LsLatencyBoundNs(4 * kMiB, 55.4),
            static_cast<uint64_t>(std::ceil((2.0 * 2 * kMiB + 4 * kMiB) / 55.4)));
  // With the BE minimum share (default 5 %), one BE chunk more may go ahead; a request long
  // enough to earn the BE another chunk (2 MiB x 19) lets one more go ahead.
  FairScheduler shared = MakeScheduler();
  EXPECT_EQ(shared.LsWaitBoundNs(55.4), static_cast<uint64_t>(std::ceil(4.0 * 2 * kMiB / 55.4)));
  EXPECT_EQ(shared.LsLatencyBoundNs(4 * kMiB, 55.4),
            static_cast<uint64_t>(std::ceil((3.0 * 2 * kMiB + 4 * kMiB) / 55.4)));
  EXPECT_EQ(shared.LsLatencyBoundNs(38 * kMiB, 55.4),
            static_cast<uint64_t>(std::ceil((4.0 * 2 * kMiB + 38 * kMiB) / 55.4)));
  EXPECT_EQ(s.LsWaitBoundNs(0), std::numeric_limits<uint64_t>::max());
  EXPECT_EQ(s.LsLatencyBoundNs(kMiB, -1), std::numeric_limits<uint64_t>::max());
  EXPECT_STREQ(TenantClassName(kLs), "ls");
  EXPECT_STREQ(TenantClassName(kBe), "be");
}

// BE tenants' requests are cut into be_chunk_bytes, LS tenants' into chunk_bytes; a size given
// at Submit (how the tenant cut its copy) wins over both; the LS bounds count the larger chunks.
TEST(FairSchedulerTest, BestEffortChunkSizeAndSubmitOverride) {
  Config c = Limits(4, 4);
  c.be_chunk_bytes = 8 * kMiB;
  c.be_min_share = 0;
  FairScheduler s = MakeScheduler(c);
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 1024).ok());
  ASSERT_TRUE(s.Submit(2, 5 * kMiB, 10).ok());
  std::optional<Grant> ls = s.NextGrant(10);
  ASSERT_TRUE(ls.has_value());
  EXPECT_EQ(ls->tenant, 2u);
  EXPECT_EQ(ls->length, 2 * kMiB);
  ASSERT_TRUE(s.Complete(ls->id, 10).ok());
  ASSERT_TRUE(s.Complete(s.NextGrant(10)->id, 10).ok());
  ASSERT_TRUE(s.Complete(s.NextGrant(10)->id, 10).ok());  // LS request done: 2 + 2 + 1 MiB
  ASSERT_TRUE(s.Submit(1, 20 * kMiB, 20).ok());
  std::optional<Grant> be = s.NextGrant(20);
  ASSERT_TRUE(be.has_value());
  EXPECT_EQ(be->tenant, 1u);
  EXPECT_EQ(be->length, 8 * kMiB);
  std::optional<Grant> be2 = s.NextGrant(20);
  std::optional<Grant> be3 = s.NextGrant(20);
  ASSERT_TRUE(be2 && be3);
  EXPECT_EQ(be3->offset, 16 * kMiB);
  EXPECT_EQ(be3->length, 4 * kMiB);
  // Overridden at Submit: 1 MiB pieces for this BE request.
  ASSERT_TRUE(s.Submit(1, 3 * kMiB, 30, 1 * kMiB).ok());
  std::optional<Grant> small = s.NextGrant(30);
  ASSERT_TRUE(small.has_value());
  EXPECT_EQ(small->length, 1 * kMiB);
  EXPECT_EQ(s.Submit(1, kMiB, 30, 6 * kKiB).status().code(), absl::StatusCode::kInvalidArgument);
  // (4 in flight x 8 MiB + one 2 MiB LS chunk) at 55.4 B/ns.
  EXPECT_EQ(s.LsWaitBoundNs(55.4), static_cast<uint64_t>(std::ceil((4.0 * 8 + 2) * kMiB / 55.4)));
}

// The chunk BE copies may take while the LS tenants rest is the largest: the LS bounds and the
// BE's deepest debt count it.
TEST(FairSchedulerTest, TheRestChunkCountsInTheBounds) {
  Config c = Limits(2, 2);
  c.be_chunk_bytes = 16 * kMiB;
  c.be_rest_chunk_bytes = 64 * kMiB;
  c.be_min_share = 0;
  EXPECT_EQ(c.LargestChunk(), 64 * kMiB);
  FairScheduler s = MakeScheduler(c);
  EXPECT_EQ(s.LsWaitBoundNs(55.4), static_cast<uint64_t>(std::ceil((2.0 * 64 + 2) * kMiB / 55.4)));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, 100 * kMiB, 10, 64 * kMiB).ok());
  std::optional<Grant> be = s.NextGrant(10);
  ASSERT_TRUE(be.has_value());
  EXPECT_EQ(be->length, 64 * kMiB);
  c.be_rest_chunk_bytes = 0;
  EXPECT_EQ(c.LargestChunk(), 16 * kMiB);
}

}  // namespace
}  // namespace missile::pcie
