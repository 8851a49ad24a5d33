// Unit tests of FairScheduler driven call by call (no simulated link; see
// fair_scheduler_sim_test.cc for shares and latencies over time): weights, configuration,
// chunking, limits, proportional grants, errors, snapshots and time. The classes are in
// fair_scheduler_class_test.cc, tenants coming, going and changing in
// fair_scheduler_tenant_test.cc.
#include <cmath>
#include <limits>
#include <map>
#include <vector>

#include "gtest/gtest.h"
#include "missile/pcie_sched/fair_scheduler.h"
#include "pcie_sched/testing/fair_scheduler_test_util.h"

namespace missile::pcie {
namespace {

TEST(WeightFromPriorityTest, FollowsTheCfsTable) {
  EXPECT_EQ(*WeightFromPriority(0), 1024u);
  EXPECT_EQ(*WeightFromPriority(1), 820u);
  EXPECT_EQ(*WeightFromPriority(-1), 1277u);
  EXPECT_EQ(*WeightFromPriority(kMinPriority), 88761u);
  EXPECT_EQ(*WeightFromPriority(kMaxPriority), 15u);
  for (int p = kMinPriority; p < kMaxPriority; ++p) {
    const double ratio = static_cast<double>(*WeightFromPriority(p)) / *WeightFromPriority(p + 1);
    EXPECT_GT(ratio, 1.19) << p;
    EXPECT_LT(ratio, 1.29) << p;
  }
}

TEST(WeightFromPriorityTest, OutOfRangeIsInvalidArgument) {
  EXPECT_EQ(WeightFromPriority(-21).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(WeightFromPriority(20).status().code(), absl::StatusCode::kInvalidArgument);
}

TEST(ConfigTest, DefaultIsValid) {
  Config c;
  EXPECT_TRUE(c.Validate().ok());
  EXPECT_EQ(c.chunk_bytes, 2 * kMiB);
  EXPECT_TRUE(c.ls_first);
}

TEST(ConfigTest, RejectsEachBadField) {
  std::vector<std::pair<const char*, Config>> bad;
  auto with = [&](const char* what, auto mutate) {
    Config c;
    mutate(c);
    bad.emplace_back(what, c);
  };
  with("chunk 0", [](Config& c) { c.chunk_bytes = 0; });
  with("chunk not 4 KiB multiple", [](Config& c) { c.chunk_bytes = 6 * kKiB; });
  with("chunk below 4 KiB", [](Config& c) {
    c.chunk_bytes = 2 * kKiB;
    c.min_bypass_bytes = 0;
  });
  with("chunk above 1 GiB", [](Config& c) { c.chunk_bytes = 2 * kGiB; });
  with("total 0", [](Config& c) { c.max_inflight_chunks_total = 0; });
  with("total huge", [](Config& c) { c.max_inflight_chunks_total = 1025; });
  with("per tenant 0", [](Config& c) { c.max_inflight_chunks_per_tenant = 0; });
  with("per tenant above total", [](Config& c) {
    c.max_inflight_chunks_total = 2;
    c.max_inflight_chunks_per_tenant = 3;
  });
  with("bypass above chunk", [](Config& c) { c.min_bypass_bytes = c.chunk_bytes + 1; });
  with("BE chunk not 4 KiB multiple", [](Config& c) { c.be_chunk_bytes = 6 * kKiB; });
  with("BE chunk above 1 GiB", [](Config& c) { c.be_chunk_bytes = 2 * kGiB; });
  with("bypass above BE chunk", [](Config& c) { c.be_chunk_bytes = 32 * kKiB; });
  with("BE rest chunk not 4 KiB multiple", [](Config& c) { c.be_rest_chunk_bytes = 6 * kKiB; });
  with("BE rest chunk above 1 GiB", [](Config& c) { c.be_rest_chunk_bytes = 2 * kGiB; });
  with("bypass above BE rest chunk", [](Config& c) { c.be_rest_chunk_bytes = 32 * kKiB; });
  with("share window tiny", [](Config& c) { c.share_window_ns = 999'999; });
  with("idle grace above 1 s", [](Config& c) { c.idle_grace_ns = 1'000'000'001; });
  for (const auto& [what, c] : bad) {
    EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument) << what;
    EXPECT_EQ(FairScheduler::Create(c).status().code(), absl::StatusCode::kInvalidArgument) << what;
  }
  Config edge;
  edge.chunk_bytes = 4 * kKiB;
  edge.min_bypass_bytes = 4 * kKiB;
  edge.max_inflight_chunks_total = 1;
  edge.max_inflight_chunks_per_tenant = 1;
  EXPECT_TRUE(edge.Validate().ok());
}

TEST(FairSchedulerTest, CutsARequestIntoChunksInOffsetOrder) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  const RequestId r = *s.Submit(1, 5 * kMiB, 100);

  std::optional<Grant> a = s.NextGrant(100);
  std::optional<Grant> b = s.NextGrant(100);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(*a, (Grant{.id = a->id, .tenant = 1, .request = r, .offset = 0, .length = 2 * kMiB}));
  EXPECT_EQ(b->offset, 2 * kMiB);
  EXPECT_EQ(b->length, 2 * kMiB);
  EXPECT_FALSE(s.NextGrant(100).has_value()) << "two in flight is the limit";

  absl::StatusOr<std::optional<RequestDone>> done = s.Complete(a->id, 200);
  ASSERT_TRUE(done.ok());
  EXPECT_FALSE(done->has_value());
  std::optional<Grant> c = s.NextGrant(200);
  ASSERT_TRUE(c);
  EXPECT_EQ(c->offset, 4 * kMiB);
  EXPECT_EQ(c->length, 1 * kMiB);
  EXPECT_FALSE(s.NextGrant(200).has_value()) << "nothing left to grant";

  EXPECT_FALSE(s.Complete(c->id, 300)->has_value()) << "b is still in flight";
  done = s.Complete(b->id, 400);
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_EQ(**done, (RequestDone{.request = r,
                                 .tenant = 1,
                                 .bytes = 5 * kMiB,
                                 .bytes_completed = 5 * kMiB,
                                 .submit_ns = 100,
                                 .done_ns = 400,
                                 .cancelled = false}));
  EXPECT_EQ(s.inflight_chunks(), 0u);
  EXPECT_EQ(s.Complete(b->id, 400).status().code(), absl::StatusCode::kNotFound);
}

TEST(FairSchedulerTest, RequestsOfOneTenantAreFifo) {
  FairScheduler s = MakeScheduler(Limits(4, 4));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  const RequestId r1 = *s.Submit(1, 3 * kMiB, 0);
  const RequestId r2 = *s.Submit(1, 1 * kMiB, 0);
  const RequestId r3 = *s.Submit(1, 4 * kKiB, 0);
  std::vector<std::pair<RequestId, uint64_t>> order;
  while (std::optional<Grant> g = s.NextGrant(0)) order.emplace_back(g->request, g->offset);
  EXPECT_EQ(order, (std::vector<std::pair<RequestId, uint64_t>>{
                       {r1, 0}, {r1, 2 * kMiB}, {r2, 0}, {r3, 0}}));
}

TEST(FairSchedulerTest, HonoursTotalAndPerTenantInflightLimits) {
  FairScheduler s = MakeScheduler(Limits(3, 2));
  for (TenantId t : {1, 2, 3}) {
    ASSERT_TRUE(s.AddTenant(t, kBe, 1024).ok());
    ASSERT_TRUE(s.Submit(t, 100 * kMiB, 0).ok());
  }
  std::map<TenantId, int> per_tenant;
  while (std::optional<Grant> g = s.NextGrant(0)) ++per_tenant[g->tenant];
  EXPECT_EQ(s.inflight_chunks(), 3u);
  for (const auto& [t, n] : per_tenant) EXPECT_LE(n, 2) << t;

  FairScheduler one = MakeScheduler(Limits(3, 2));
  ASSERT_TRUE(one.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(one.Submit(1, 100 * kMiB, 0).ok());
  EXPECT_TRUE(one.NextGrant(0));
  EXPECT_TRUE(one.NextGrant(0));
  EXPECT_FALSE(one.NextGrant(0)) << "per-tenant limit";
}

TEST(FairSchedulerTest, TiesGoToTheLowerTenantId) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  for (TenantId t : {7, 3, 5}) ASSERT_TRUE(s.AddTenant(t, kBe, 1024).ok());
  for (TenantId t : {7, 5, 3}) ASSERT_TRUE(s.Submit(t, 100 * kMiB, 0).ok());
  std::vector<TenantId> order;
  for (int i = 0; i < 6; ++i) order.push_back(GrantAndComplete(s, 0));
  EXPECT_EQ(order, (std::vector<TenantId>{3, 5, 7, 3, 5, 7}));
}

TEST(FairSchedulerTest, GrantsInProportionToWeights) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 3072).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  std::map<TenantId, int> grants;
  for (int i = 0; i < 4000; ++i) ++grants[GrantAndComplete(s, i)];
  EXPECT_NEAR(grants[1], 1000, 1);
  EXPECT_NEAR(grants[2], 3000, 1);
}

TEST(FairSchedulerTest, ChargesAtGrantByBytesOverWeight) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kBe, 2048).ok());
  ASSERT_TRUE(s.Submit(1, 3 * kMiB, 0).ok());
  ASSERT_TRUE(s.NextGrant(0));
  EXPECT_EQ(StatsOf(s.Snapshot(0), 1).vruntime, 1 * kMiB) << "2 MiB * 1024 / 2048";
  ASSERT_TRUE(s.NextGrant(0));
  EXPECT_EQ(StatsOf(s.Snapshot(0), 1).vruntime, 1 * kMiB + 512 * kKiB)
      << "charged before completion";
}

TEST(FairSchedulerTest, NoStarvationAtExtremeWeights) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 88761).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  // Between two grants of the light tenant, the heavy one gets at most about the weight ratio
  // of chunks (its vruntime must pass the light tenant's, which grew by one weight-1 charge).
  const int kBound = 88761 + 2;
  int since_light = 0;
  int light_grants = 0;
  int max_gap = 0;
  for (int i = 0; i < 3 * kBound; ++i) {
    if (GrantAndComplete(s, 0) == 2) {
      ++light_grants;
      since_light = 0;
    } else {
      max_gap = std::max(max_gap, ++since_light);
    }
  }
  EXPECT_GE(light_grants, 3);
  EXPECT_LE(max_gap, kBound);
  EXPECT_GE(max_gap, 88000) << "and the heavy tenant really gets its weight";
}

TEST(FairSchedulerTest, ErrorsAreClearAndChangeNothing) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, 3 * kMiB, 10).ok());
  ASSERT_TRUE(s.NextGrant(10));
  const SchedulerSnapshot before = s.Snapshot(10);

  auto expect_error = [&](absl::Status status, absl::StatusCode code, const char* what) {
    EXPECT_EQ(status.code(), code) << what << ": " << status;
    EXPECT_FALSE(status.message().empty()) << what;
    EXPECT_EQ(s.Snapshot(10), before) << what;
  };
  expect_error(s.AddTenant(1, kLs, 1024), absl::StatusCode::kAlreadyExists, "duplicate");
  expect_error(s.AddTenant(2, kLs, 0), absl::StatusCode::kInvalidArgument, "weight 0");
  expect_error(s.AddTenant(2, kLs, kMaxWeight + 1), absl::StatusCode::kInvalidArgument,
               "weight huge");
  expect_error(s.SetWeight(9, 1024), absl::StatusCode::kNotFound, "weight unknown");
  expect_error(s.SetWeight(1, 0), absl::StatusCode::kInvalidArgument, "weight 0");
  expect_error(s.SetClass(9, kLs), absl::StatusCode::kNotFound, "class unknown");
  expect_error(s.RemoveTenant(9).status(), absl::StatusCode::kNotFound, "remove unknown");
  expect_error(s.Submit(9, kMiB, 10).status(), absl::StatusCode::kNotFound, "submit unknown");
  expect_error(s.Submit(1, 0, 10).status(), absl::StatusCode::kInvalidArgument, "0 bytes");
  expect_error(s.Submit(1, kTiB + 1, 10).status(), absl::StatusCode::kInvalidArgument, "> 1 TiB");
  expect_error(s.Complete(12345, 10).status(), absl::StatusCode::kNotFound, "grant unknown");
  expect_error(s.Cancel(12345, 10).status(), absl::StatusCode::kNotFound, "request unknown");
  EXPECT_TRUE(s.Submit(1, kTiB, 10).ok()) << "1 TiB itself is allowed";
}

TEST(FairSchedulerTest, SnapshotReportsPerTenantStats) {
  Config c = Limits(2, 1);
  FairScheduler s = MakeScheduler(c);
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 3072).ok());
  ASSERT_TRUE(s.Submit(1, 5 * kMiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, 1 * kMiB, 0).ok());
  std::optional<Grant> ls = s.NextGrant(0);
  std::optional<Grant> be = s.NextGrant(0);
  ASSERT_TRUE(ls && be);
  ASSERT_EQ(ls->tenant, 2u);
  ASSERT_TRUE(s.Complete(ls->id, 0).ok());
  ASSERT_TRUE(s.Submit(2, 1 * kMiB, 0).ok());

  SchedulerSnapshot snap = s.Snapshot(0);
  EXPECT_EQ(snap.inflight_chunks, 1u);
  ASSERT_EQ(snap.tenants.size(), 2u);
  const TenantStats& t1 = snap.tenants[0];
  const TenantStats& t2 = snap.tenants[1];
  EXPECT_EQ(t1.id, 1u);
  EXPECT_EQ(t1.cls, kBe);
  EXPECT_EQ(t1.bytes_granted, 2 * kMiB);
  EXPECT_EQ(t1.bytes_completed, 0u);
  EXPECT_EQ(t1.pending_bytes, 3 * kMiB);
  EXPECT_EQ(t1.queued_requests, 1u);
  EXPECT_EQ(t1.inflight_chunks, 1u);
  EXPECT_EQ(t1.vruntime, 2 * kMiB);
  EXPECT_EQ(t2.bytes_granted, 1 * kMiB);
  EXPECT_EQ(t2.bytes_completed, 1 * kMiB);
  EXPECT_EQ(t2.pending_bytes, 1 * kMiB);
  EXPECT_EQ(t2.inflight_chunks, 0u);
  EXPECT_EQ(t2.weight, 3072u);
  EXPECT_NEAR(t1.share, 2.0 / 3, 1e-9);
  EXPECT_NEAR(t2.share, 1.0 / 3, 1e-9);
  // 2 MiB granted just now, with a 1 s window: 2 MiB/s.
  EXPECT_NEAR(t1.recent_bytes_per_sec, 2.0 * kMiB, 1);

  // The estimate decays with the window: after 3 windows, e^-3 of it is left.
  snap = s.Snapshot(3'000'000'000);
  EXPECT_NEAR(snap.tenants[0].recent_bytes_per_sec, 2.0 * kMiB * std::exp(-3.0), 1);
  EXPECT_NEAR(snap.tenants[0].share, 2.0 / 3, 1e-9);
}

TEST(FairSchedulerTest, ShareEstimateFollowsRecentGrants) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 3072).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  uint64_t now = 0;
  for (int i = 0; i < 20000; ++i, now += 40'000) GrantAndComplete(s, now);
  SchedulerSnapshot snap = s.Snapshot(now);
  EXPECT_NEAR(snap.tenants[0].share, 0.25, 0.01);
  EXPECT_NEAR(snap.tenants[1].share, 0.75, 0.01);
}

TEST(FairSchedulerTest, TimeNeverRunsBackwards) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kMiB, 500).ok());
  std::optional<Grant> g = s.NextGrant(100);
  ASSERT_TRUE(g);
  absl::StatusOr<std::optional<RequestDone>> done = s.Complete(g->id, 200);
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_EQ((*done)->submit_ns, 500u);
  EXPECT_EQ((*done)->done_ns, 500u);
  EXPECT_EQ(s.Snapshot(0).now_ns, 500u);
}

TEST(FairSchedulerTest, VruntimeRebasePreservesOrderAndShares) {
  FairScheduler s = MakeScheduler(Limits(1, 1));
  FairSchedulerTestPeer::SetRebaseThreshold(s, uint64_t{1} << 26);  // 64 MiB of vruntime.
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 3072).ok());
  ASSERT_TRUE(s.AddTenant(3, kBe, 1024).ok());  // Idle: must not come back with credit.
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(3, 2 * kMiB, 0).ok());
  std::map<TenantId, int> grants;
  uint64_t now = 0;
  for (int i = 0; i < 4001; ++i) {  // 4000 chunks x 2 MiB: dozens of rebases.
    ++grants[GrantAndComplete(s, now += 40'000)];
    for (const TenantStats& t : s.Snapshot(now).tenants) {
      ASSERT_LT(t.vruntime, (uint64_t{1} << 26) + 4 * kMiB);
    }
  }
  EXPECT_NEAR(grants[1], 1000, 1);
  EXPECT_NEAR(grants[2], 3000, 1);
  ASSERT_TRUE(s.Submit(3, kTiB, now).ok());
  grants.clear();
  for (int i = 0; i < 500; ++i) ++grants[GrantAndComplete(s, now += 40'000)];
  EXPECT_NEAR(grants[3], 100, 2) << "weights 1:3:1 -> 100 of 500, no banked credit";
}

TEST(FairSchedulerTest, AStartedRequestHasItsFirstChunkGrantedAtOnceBeyondTheLimits) {
  FairScheduler s = MakeScheduler(Limits(2, 2));
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(2, 100 * kMiB, 0).ok());
  std::optional<Grant> a = s.NextGrant(0);
  std::optional<Grant> b = s.NextGrant(0);
  ASSERT_TRUE(a && b);
  ASSERT_FALSE(s.NextGrant(0)) << "both slots taken";

  absl::StatusOr<Grant> started = s.SubmitStarted(1, 5 * kMiB, 10);
  ASSERT_TRUE(started.ok()) << started.status();
  EXPECT_EQ(started->tenant, 1u);
  EXPECT_EQ(started->offset, 0u);
  EXPECT_EQ(started->length, 2 * kMiB);
  EXPECT_EQ(s.inflight_chunks(), 3u) << "the caller kept a slot for it; it counts from now";
  EXPECT_EQ(StatsOf(s.Snapshot(10), 1).bytes_granted, 2 * kMiB);

  // The rest of it queues: nothing is granted until the three in flight fall below two.
  EXPECT_FALSE(s.NextGrant(10));
  ASSERT_TRUE(s.Complete(a->id, 20).ok());
  EXPECT_FALSE(s.NextGrant(20));
  ASSERT_TRUE(s.Complete(b->id, 20).ok());
  std::optional<Grant> next = s.NextGrant(20);
  ASSERT_TRUE(next);
  EXPECT_EQ(next->tenant, 2u) << "tenant 1 was charged for its started chunk";
  std::optional<Grant> rest = s.NextGrant(20);
  ASSERT_FALSE(rest) << "three in flight again";
  ASSERT_TRUE(s.Complete(started->id, 30).ok());
  rest = s.NextGrant(30);
  ASSERT_TRUE(rest);
  EXPECT_EQ(rest->tenant, 1u);
  EXPECT_EQ(rest->request, started->request);
  EXPECT_EQ(rest->offset, 2 * kMiB);
}

TEST(FairSchedulerTest, AStartedRequestOfOneChunkLeavesNothingQueued) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kLs, 1024).ok());
  const RequestId queued = *s.Submit(1, 4 * kMiB, 0);
  absl::StatusOr<Grant> started = s.SubmitStarted(1, 1 * kMiB, 0);
  ASSERT_TRUE(started.ok());
  EXPECT_EQ(started->length, 1 * kMiB);
  absl::StatusOr<std::optional<RequestDone>> done = s.Complete(started->id, 5);
  ASSERT_TRUE(done.ok() && done->has_value());
  EXPECT_EQ((*done)->request, started->request);
  // The request queued before it is whole, in order.
  std::vector<uint64_t> offsets;
  while (std::optional<Grant> g = s.NextGrant(5)) {
    EXPECT_EQ(g->request, queued);
    offsets.push_back(g->offset);
  }
  EXPECT_EQ(offsets, (std::vector<uint64_t>{0, 2 * kMiB}));
}

TEST(FairSchedulerTest, AStartedRequestIsCheckedAsSubmitChecksOne) {
  FairScheduler s = MakeScheduler();
  ASSERT_TRUE(s.AddTenant(1, kBe, 1024).ok());
  EXPECT_EQ(s.SubmitStarted(9, kMiB, 0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(s.SubmitStarted(1, 0, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.SubmitStarted(1, kMiB, 0, 1000).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.inflight_chunks(), 0u);
  EXPECT_EQ(StatsOf(s.Snapshot(0), 1).queued_requests, 0u);
}

}  // namespace
}  // namespace missile::pcie
