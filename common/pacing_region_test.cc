#include "missile/common/pacing_region.h"

#include <gtest/gtest.h>

#include <cstring>
#include <memory>

namespace missile::pacingreg {
namespace {

constexpr uint64_t kNow = 1'000'000'000'000;

std::unique_ptr<LanesPage> Page() {
  auto p = std::make_unique<LanesPage>();
  memset(static_cast<void*>(p.get()), 0, sizeof(LanesPage));
  InitLanes(p.get());
  return p;
}

TEST(ReadLanes, AnHonestPageAsWritten) {
  auto p = Page();
  p->lanes_used.store(2);
  p->lanes[1].submitted.store(3);
  p->lanes[1].completed.store(2);
  p->last_submit_ns.store(kNow - 5);
  p->gpu_ns.store(123);
  p->running_until_ns.store(kNow + 1000);
  p->inflight.store(4);
  p->held_ns.store(50);
  p->held_count.store(2);
  p->submissions.store(9);
  p->work_sum.store(77);
  p->active.store(1);
  p->reserve_state.store(kReserveActive);
  p->reserve_tpcs.store(8);
  p->mps_client.store(1);
  const LanesView v = ReadLanes(*p, kNow);
  EXPECT_TRUE(v.mps_client);
  EXPECT_FALSE(ReadLanes(*Page(), kNow).mps_client);
  EXPECT_EQ(v.reserve_state, kReserveActive);
  EXPECT_EQ(v.reserve_tpcs, 8u);
  EXPECT_TRUE(v.in_flight);
  EXPECT_EQ(v.last_submit_ns, kNow - 5);
  EXPECT_EQ(v.gpu_ns, 123u);
  EXPECT_EQ(v.running_until_ns, kNow + 1000);
  EXPECT_EQ(v.inflight, 4u);
  EXPECT_EQ(v.held_ns, 50u);
  EXPECT_EQ(v.held_count, 2u);
  EXPECT_EQ(v.submissions, 9u);
  EXPECT_EQ(v.work_sum, 77u);
  EXPECT_TRUE(v.active);
  p->lanes[1].completed.store(3);
  EXPECT_FALSE(ReadLanes(*p, kNow).in_flight);
}

// The audit's lies: a submission in the future counted as busy for ever; counts and times out
// of range were shown as they were.
TEST(ReadLanes, EveryValueIsBounded) {
  auto p = Page();
  p->lanes_used.store(UINT32_MAX);
  p->lanes[kLanes - 1].submitted.store(1);  // the last lane is still read
  p->last_submit_ns.store(UINT64_MAX);
  p->gpu_ns.store(UINT64_MAX);
  p->running_until_ns.store(UINT64_MAX);
  p->inflight.store(UINT64_MAX);
  p->held_ns.store(UINT64_MAX);
  p->hold_since_ns.store(UINT64_MAX);
  p->reserve_state.store(UINT32_MAX);
  p->reserve_tpcs.store(UINT32_MAX);
  p->mps_client.store(UINT32_MAX);
  const LanesView v = ReadLanes(*p, kNow);
  EXPECT_FALSE(v.mps_client);  // only 1 says it is an MPS client
  EXPECT_EQ(v.reserve_state, kReserveOff);  // an unknown state is no reserve
  EXPECT_EQ(v.reserve_tpcs, 0u);
  p->reserve_state.store(kReserveActive);
  EXPECT_EQ(ReadLanes(*p, kNow).reserve_tpcs, 128u);
  EXPECT_TRUE(v.in_flight);
  EXPECT_EQ(v.last_submit_ns, 0u);  // in the future: no submission
  EXPECT_EQ(v.gpu_ns, kMaxGpuNs);
  EXPECT_EQ(v.running_until_ns, kNow + kMaxRunAheadNs);
  EXPECT_EQ(v.inflight, kMaxInflight);
  EXPECT_EQ(v.held_ns, kMaxGpuNs);  // the hold "since the future" adds nothing
}

TEST(ReadLanes, ASubmissionJustAheadOfTheReadersClockIsNow) {
  auto p = Page();
  p->last_submit_ns.store(kNow + kClockSlackNs);
  EXPECT_EQ(ReadLanes(*p, kNow).last_submit_ns, kNow);
  p->last_submit_ns.store(kNow + kClockSlackNs + 1);
  EXPECT_EQ(ReadLanes(*p, kNow).last_submit_ns, 0u);
}

TEST(ReadLanes, AHoldGoingOnCountsUntilNow) {
  auto p = Page();
  p->held_ns.store(1000);
  p->hold_since_ns.store(kNow - 500);
  EXPECT_EQ(ReadLanes(*p, kNow).held_ns, 1500u);
}

}  // namespace
}  // namespace missile::pacingreg
