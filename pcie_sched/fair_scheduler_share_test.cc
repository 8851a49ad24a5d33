// The BE class's minimum share of the link (Config::be_min_share) under ls_first: call by call
// (when a BE chunk goes ahead, what a share of 0 keeps), and on the simulated link (16 LS
// tenants saturating it next to one BE tenant). Simulated time only; every test is
// deterministic.
#include <cmath>
#include <limits>
#include <optional>
#include <vector>

#include "gtest/gtest.h"
#include "missile/pcie_sched/fair_scheduler.h"
#include "pcie_sched/testing/fair_scheduler_test_util.h"
#include "pcie_sched/testing/link_simulator.h"

namespace missile::pcie {
namespace {

using testing::LinkSimulator;
using testing::SimOptions;
using testing::SimResult;
using testing::Workload;

constexpr uint64_t kMs = 1'000'000;
constexpr double kRate = testing::kH200HostToDeviceBytesPerNs;
constexpr TenantId kBeId = 100;
constexpr int kLsTenants = 16;

Config ShareConfig(double share) {
  Config c = Limits(2, 2);
  c.be_min_share = share;
  return c;
}

// Grants and completes one chunk at a time until `count` grants; the tenants granted, in order.
std::vector<TenantId> Order(FairScheduler& s, int count, uint64_t now = 0) {
  std::vector<TenantId> order;
  for (int i = 0; i < count; ++i) order.push_back(GrantAndComplete(s, now));
  return order;
}

int CountOf(const std::vector<TenantId>& order, TenantId id) {
  int n = 0;
  for (TenantId t : order) n += t == id ? 1 : 0;
  return n;
}

TEST(FairSchedulerShareTest, ValidateRefusesSharesOutsideZeroToOneHalf) {
  for (double bad : {-0.01, 0.51, 1.0, std::nan(""), std::numeric_limits<double>::infinity()}) {
    Config c = ShareConfig(bad);
    EXPECT_EQ(c.Validate().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_EQ(FairScheduler::Create(c).status().code(), absl::StatusCode::kInvalidArgument)
        << bad;
  }
  EXPECT_TRUE(ShareConfig(0).Validate().ok());
  EXPECT_TRUE(ShareConfig(0.5).Validate().ok());
  EXPECT_DOUBLE_EQ(Config{}.be_min_share, 0.05) << "the documented default";
}

TEST(FairSchedulerShareTest, ZeroShareKeepsLsStrictlyFirst) {
  FairScheduler s = MakeScheduler(ShareConfig(0));
  ASSERT_TRUE(s.AddTenant(1, kLs, 1024).ok());
  ASSERT_TRUE(s.AddTenant(kBeId, kBe, 88761).ok());
  ASSERT_TRUE(s.Submit(kBeId, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(1, 200 * 2 * kMiB, 0).ok());
  const std::vector<TenantId> order = Order(s, 201);
  EXPECT_EQ(CountOf(order, kBeId), 1) << "the BE goes only once the LS has nothing pending";
  EXPECT_EQ(order.back(), kBeId);
  EXPECT_EQ(s.BeWaitBoundNs(kRate), std::numeric_limits<uint64_t>::max());
}

TEST(FairSchedulerShareTest, BeGetsOneChunkInTwentyWhileLsSaturates) {
  FairScheduler s = MakeScheduler(ShareConfig(0.05));
  ASSERT_TRUE(s.AddTenant(1, kLs, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 1024).ok());
  ASSERT_TRUE(s.AddTenant(kBeId, kBe, 15).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kTiB, 0).ok());
  ASSERT_TRUE(s.Submit(kBeId, kTiB, 0).ok());
  const std::vector<TenantId> order = Order(s, 400);
  EXPECT_EQ(CountOf(order, kBeId), 20);
  // The LS go first until the BE has earned a chunk: 19 LS chunks earn it one.
  for (int i = 0; i < 19; ++i) EXPECT_NE(order[i], kBeId) << i;
  EXPECT_EQ(order[19], kBeId);
  // Never two BE chunks in a row: the credit holds at most one.
  for (size_t i = 1; i < order.size(); ++i) {
    EXPECT_FALSE(order[i] == kBeId && order[i - 1] == kBeId) << i;
  }
}

TEST(FairSchedulerShareTest, LsGetEverythingWithNoBePendingAndBankNothingForIt) {
  FairScheduler s = MakeScheduler(ShareConfig(0.05));
  ASSERT_TRUE(s.AddTenant(1, kLs, 1024).ok());
  ASSERT_TRUE(s.AddTenant(kBeId, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kTiB, 0).ok());
  const std::vector<TenantId> alone = Order(s, 100);
  EXPECT_EQ(CountOf(alone, 1), 100);
  // The BE arrives: the credit earned while it had nothing pending is none, so it waits its 19
  // LS chunks like any BE chunk (no burst).
  ASSERT_TRUE(s.Submit(kBeId, kGiB, 0).ok());
  const std::vector<TenantId> order = Order(s, 40);
  EXPECT_EQ(CountOf(order, kBeId), 2);
  EXPECT_EQ(order[19], kBeId);
  EXPECT_EQ(order[39], kBeId);
}

TEST(FairSchedulerShareTest, BeGetsEverythingWhileLsIdle) {
  FairScheduler s = MakeScheduler(ShareConfig(0.05));
  ASSERT_TRUE(s.AddTenant(1, kLs, 88761).ok());
  ASSERT_TRUE(s.AddTenant(kBeId, kBe, 15).ok());
  ASSERT_TRUE(s.Submit(kBeId, kGiB, 0).ok());
  EXPECT_EQ(CountOf(Order(s, 100), kBeId), 100);
  // Two slots, both the BE's: the link stays full with the LS idle.
  std::optional<Grant> a = s.NextGrant(0);
  std::optional<Grant> b = s.NextGrant(0);
  ASSERT_TRUE(a && b);
  EXPECT_EQ(a->tenant, kBeId);
  EXPECT_EQ(b->tenant, kBeId);
  ASSERT_TRUE(s.Complete(a->id, 0).ok());
  ASSERT_TRUE(s.Complete(b->id, 0).ok());
  // The LS arrives: it goes first again; having used the link alone, the BE starts in debt and
  // goes ahead only after earning a chunk back (its deepest debt plus one chunk: 38 LS chunks).
  ASSERT_TRUE(s.Submit(1, kGiB, 0).ok());
  const std::vector<TenantId> order = Order(s, 60);
  for (int i = 0; i < 38; ++i) EXPECT_EQ(order[i], 1u) << i;
  EXPECT_EQ(CountOf(order, kBeId), 2);
}

TEST(FairSchedulerShareTest, ABeAtItsPerTenantLimitLeavesTheSlotToTheLs) {
  Config c = ShareConfig(0.5);
  c.max_inflight_chunks_total = 3;
  c.max_inflight_chunks_per_tenant = 1;
  FairScheduler s = MakeScheduler(c);
  ASSERT_TRUE(s.AddTenant(1, kLs, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kLs, 1024).ok());
  ASSERT_TRUE(s.AddTenant(kBeId, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(kBeId, kGiB, 0).ok());
  // 0.5: one LS chunk earns a BE chunk.
  std::optional<Grant> a = s.NextGrant(0);
  std::optional<Grant> b = s.NextGrant(0);
  std::optional<Grant> c3 = s.NextGrant(0);
  ASSERT_TRUE(a && b && c3);
  EXPECT_EQ(a->tenant, 1u);
  EXPECT_EQ(b->tenant, kBeId);
  EXPECT_EQ(c3->tenant, 2u) << "the BE is due again but at its limit: the LS tenant goes";
}

TEST(FairSchedulerShareTest, SetClassAndRemoveKeepThePendingCountsRight) {
  FairScheduler s = MakeScheduler(ShareConfig(0.5));
  ASSERT_TRUE(s.AddTenant(1, kLs, 1024).ok());
  ASSERT_TRUE(s.AddTenant(2, kBe, 1024).ok());
  ASSERT_TRUE(s.AddTenant(3, kBe, 1024).ok());
  ASSERT_TRUE(s.Submit(1, kGiB, 0).ok());
  ASSERT_TRUE(s.Submit(2, kGiB, 0).ok());
  absl::StatusOr<RequestId> r3 = s.Submit(3, kGiB, 0);
  ASSERT_TRUE(r3.ok());
  // Tenant 2 becomes LS and tenant 3's request is cancelled: no BE work is pending, so the
  // LS tenants share everything, and after the idle grace (1 ms) they earn the BE nothing.
  ASSERT_TRUE(s.SetClass(2, kLs).ok());
  ASSERT_TRUE(s.Cancel(*r3, 0).ok());
  constexpr uint64_t kLater = 2'000'000;
  const std::vector<TenantId> order = Order(s, 20, kLater);
  EXPECT_EQ(CountOf(order, 1) + CountOf(order, 2), 20);
  // A BE request again, then removed: the LS keep the link.
  ASSERT_TRUE(s.Submit(3, kGiB, kLater).ok());
  EXPECT_EQ(GrantAndComplete(s, kLater), 1u);
  ASSERT_TRUE(s.RemoveTenant(3).ok());
  const std::vector<TenantId> after = Order(s, 10, kLater);
  EXPECT_EQ(CountOf(after, 1) + CountOf(after, 2), 10);
}

// On the simulated link: 16 LS tenants copying 64 MiB requests back to back, and one BE tenant
// copying one chunk per request, back to back (so each request's latency is its chunk's wait
// for a grant plus the chunk's own transfer).
SimResult RunSixteenLsAndOneBe(const Config& config, uint64_t be_request_bytes) {
  LinkSimulator sim(SimOptions{.bytes_per_ns = kRate,
                               .duration_ns = 2000 * kMs,
                               .window_start_ns = 100 * kMs,
                               .window_end_ns = 2000 * kMs});
  for (int i = 1; i <= kLsTenants; ++i) {
    const TenantId id = static_cast<TenantId>(i);
    sim.AddTenant({.id = id, .cls = kLs, .weight = 1024});
    sim.AddWorkload(Workload{.tenant = id, .request_bytes = 64 * kMiB});
  }
  sim.AddTenant({.id = kBeId, .cls = kBe, .weight = 1024});
  sim.AddWorkload(Workload{.tenant = kBeId, .request_bytes = be_request_bytes});
  absl::StatusOr<SimResult> r = sim.RunFair(config);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : SimResult{};
}

TEST(FairSchedulerShareTest, SixteenSaturatingLsLeaveTheBeItsShareWithABoundedWait) {
  for (uint64_t be_chunk : {uint64_t{0}, 16 * kMiB}) {
    Config config = ShareConfig(0.05);
    config.be_chunk_bytes = be_chunk;
    const uint64_t chunk = config.ChunkFor(kBe);
    SimResult r = RunSixteenLsAndOneBe(config, chunk);
    const double share = r.ShareInWindow(kBeId);
    EXPECT_GE(share, 0.049) << "BE chunk " << chunk;
    EXPECT_LE(share, 0.06) << "the LS still go first";
    const testing::TenantResult& be = *r.Find(kBeId);
    ASSERT_GE(be.latencies.size(), 10u);
    const FairScheduler bounds = *FairScheduler::Create(config);
    const double bound =
        static_cast<double>(bounds.BeWaitBoundNs(kRate)) + static_cast<double>(chunk) / kRate;
    EXPECT_LE(be.MaxLatencyNs(), bound) << "BE chunk " << chunk;
    EXPECT_GT(be.MaxLatencyNs(), 0.25 * bound) << "the bound is not loose by 4x";
    // The LS tenants share the rest evenly.
    for (int i = 1; i <= kLsTenants; ++i) {
      EXPECT_NEAR(r.ShareInWindow(static_cast<TenantId>(i)), (1 - share) / kLsTenants, 0.005)
          << i;
    }
  }
}

TEST(FairSchedulerShareTest, WithoutAMinimumShareTheSixteenLsStarveTheBe) {
  SimResult r = RunSixteenLsAndOneBe(ShareConfig(0), 2 * kMiB);
  EXPECT_EQ(r.Find(kBeId)->requests_completed, 0u);
  EXPECT_EQ(r.ShareInWindow(kBeId), 0);
}

TEST(FairSchedulerShareTest, LsLatencyBoundCountsTheBeChunkAhead) {
  // One LS tenant copying 4 MiB requests back to back next to a BE copying 1 GiB after 1 GiB:
  // the BE gets its share only through chunks that go ahead of the LS tenant's, and every LS
  // request still completes within LsLatencyBoundNs.
  Config config = ShareConfig(0.05);
  LinkSimulator sim(SimOptions{.bytes_per_ns = kRate, .duration_ns = 500 * kMs});
  sim.AddTenant({.id = 1, .cls = kLs, .weight = 1024});
  sim.AddWorkload(Workload{.tenant = 1, .request_bytes = 4 * kMiB});
  sim.AddTenant({.id = kBeId, .cls = kBe, .weight = 1024});
  sim.AddWorkload(Workload{.tenant = kBeId, .request_bytes = kGiB});
  absl::StatusOr<SimResult> r = sim.RunFair(config);
  ASSERT_TRUE(r.ok()) << r.status();
  const FairScheduler bounds = *FairScheduler::Create(config);
  const testing::TenantResult& ls = *r->Find(1);
  ASSERT_GT(ls.latencies.size(), 1000u);
  EXPECT_LE(ls.MaxLatencyNs(), static_cast<double>(bounds.LsLatencyBoundNs(4 * kMiB, kRate)));
  EXPECT_GE(r->ShareInWindow(kBeId), 0.049);
}

}  // namespace
}  // namespace missile::pcie
