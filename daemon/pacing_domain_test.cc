#include "pacing_domain.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <optional>
#include <string>
#include <thread>
#include <vector>

namespace missile::daemon {
namespace {

constexpr TenantClass kLs = TenantClass::kLatencySensitive;
constexpr TenantClass kBe = TenantClass::kBestEffort;

// The tenant's view: the region mapped from the descriptor Join returned.
pacingreg::Region* MapTenant(int fd) {
  void* p = mmap(nullptr, pacingreg::kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
  close(fd);
  return p == MAP_FAILED ? nullptr : static_cast<pacingreg::Region*>(p);
}

TEST(PacingDomain, PublishesThePolicyAndChangesIt) {
  PacingSettings s;
  s.window_items = 3;
  s.window_ns = 77'000;
  auto d = PacingDomain::Create(s);
  ASSERT_TRUE(d.ok()) << d.status();
  auto fd = (*d)->Join(11, 1234, kBe, 4);
  ASSERT_TRUE(fd.ok());
  pacingreg::Region* r = MapTenant(*fd);
  ASSERT_NE(r, nullptr);
  EXPECT_EQ(r->header.magic, pacingreg::kMagic);
  EXPECT_EQ(r->header.policy.window_items.load(), 3u);
  EXPECT_EQ(r->header.policy.window_ns.load(), 77'000u);
  EXPECT_EQ(r->header.policy.pacing.load(), 1u);
  const uint64_t gen = r->header.policy.generation.load();
  s.pacing = false;
  (*d)->Configure(s);
  EXPECT_EQ(r->header.policy.pacing.load(), 0u);
  EXPECT_GT(r->header.policy.generation.load(), gen);
  EXPECT_EQ((*d)->settings(), s);
  munmap(r, pacingreg::kRegionBytes);
}

TEST(PacingDomain, SlotsPerSessionWithClassWeightAndLsCount) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  auto a = (*d)->Join(1, 100, kLs, 10);
  auto b = (*d)->Join(2, 200, kBe, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  close(*b);
  pacingreg::Region* r = MapTenant(*a);
  ASSERT_NE(r, nullptr);
  auto sa = (*d)->SlotOf(1);
  auto sb = (*d)->SlotOf(2);
  ASSERT_TRUE(sa && sb);
  EXPECT_NE(*sa, *sb);
  EXPECT_EQ(r->slots[*sa].session.load(), 1u);
  EXPECT_EQ(r->slots[*sa].cls.load(), pacingreg::kLs);
  EXPECT_EQ(r->slots[*sa].pid.load(), 100);
  EXPECT_EQ(r->slots[*sb].cls.load(), pacingreg::kBe);
  EXPECT_EQ(r->slots[*sb].weight.load(), 1u);  // 0 is read as 1
  EXPECT_EQ(r->header.policy.ls_tenants.load(), 1u);
  EXPECT_EQ(r->header.policy.be_tenants.load(), 1u);
  // Joining again keeps the slot.
  auto again = (*d)->Join(1, 100, kLs, 10);
  ASSERT_TRUE(again.ok());
  close(*again);
  EXPECT_EQ((*d)->SlotOf(1), sa);
  // A class change reaches the slot and the LS count.
  (*d)->SetPolicy(2, kLs, 7);
  EXPECT_EQ(r->slots[*sb].cls.load(), pacingreg::kLs);
  EXPECT_EQ(r->slots[*sb].weight.load(), 7u);
  EXPECT_EQ(r->header.policy.ls_tenants.load(), 2u);
  EXPECT_EQ(r->header.policy.be_tenants.load(), 0u);
  munmap(r, pacingreg::kRegionBytes);
}

TEST(PacingDomain, LeaveMakesADeadLsIdleAtOnceAndFreesTheSlot) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  auto fd = (*d)->Join(5, 1, kLs, 1);
  ASSERT_TRUE(fd.ok());
  pacingreg::Region* r = MapTenant(*fd);
  ASSERT_NE(r, nullptr);
  const uint32_t slot = *(*d)->SlotOf(5);
  // The tenant marks work that never completes (it was killed mid-request).
  r->slots[slot].lanes_used.store(2);
  r->slots[slot].lanes[1].submitted.store(42);
  r->slots[slot].lanes[1].completed.store(40);
  auto st = (*d)->Stats(5);
  ASSERT_TRUE(st.has_value());
  EXPECT_TRUE(st->busy);
  EXPECT_TRUE(st->ls);
  (*d)->Leave(5);
  EXPECT_EQ(r->slots[slot].lanes[1].completed.load(), 42u);
  EXPECT_EQ(r->slots[slot].session.load(), 0u);
  EXPECT_EQ(r->slots[slot].cls.load(), pacingreg::kFree);
  EXPECT_EQ(r->header.policy.ls_tenants.load(), 0u);
  EXPECT_FALSE((*d)->Stats(5).has_value());
  (*d)->Leave(5);  // twice: nothing
  // The slot is reused clean.
  auto next = (*d)->Join(6, 2, kBe, 1);
  ASSERT_TRUE(next.ok());
  close(*next);
  EXPECT_EQ(*(*d)->SlotOf(6), slot);
  EXPECT_EQ(r->slots[slot].lanes[1].submitted.load(), 0u);
  EXPECT_EQ(r->slots[slot].lanes_used.load(), 0u);
  munmap(r, pacingreg::kRegionBytes);
}

TEST(PacingDomain, RefusesWhenEverySlotIsTaken) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  for (uint64_t s = 1; s <= pacingreg::kSlots; ++s) {
    auto fd = (*d)->Join(s, 1, kBe, 1);
    ASSERT_TRUE(fd.ok());
    close(*fd);
  }
  auto full = (*d)->Join(1000, 1, kBe, 1);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*d)->Join(0, 1, kBe, 1).status().code(), absl::StatusCode::kInvalidArgument);
  (*d)->Leave(3);
  auto fd = (*d)->Join(1000, 1, kBe, 1);
  ASSERT_TRUE(fd.ok());
  close(*fd);
}

void SleepMs(int ms) { std::this_thread::sleep_for(std::chrono::milliseconds(ms)); }

// The sampler's share of a session, once it is above 0 (at most 2 s later); 0 if it never is.
double ShareOnceAboveZero(const PacingDomain& d, uint64_t session, TenantClass cls) {
  for (int i = 0; i < 200; ++i) {
    std::optional<PacingStats> st = d.Stats(session);
    if (!st.has_value()) return 0;
    const double share = cls == kLs ? st->busy_share : st->held_share;
    if (share > 0) return share;
    SleepMs(10);
  }
  return 0;
}

TEST(PacingDomain, SamplerMeasuresHowBusyAnLsWas) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  auto fd = (*d)->Join(7, 1, kLs, 1);
  ASSERT_TRUE(fd.ok());
  pacingreg::Region* r = MapTenant(*fd);
  ASSERT_NE(r, nullptr);
  pacingreg::Slot& slot = r->slots[*(*d)->SlotOf(7)];
  SleepMs(20);
  EXPECT_EQ((*d)->Stats(7)->busy_share, 0.0);  // nothing in flight yet
  // Work in flight on lane 2 for about 50 ms.
  slot.lanes_used.store(3);
  slot.lanes[2].submitted.store(5);
  SleepMs(50);
  const double busy = ShareOnceAboveZero(**d, 7, kLs);
  EXPECT_GT(busy, 0.0);
  EXPECT_LT(busy, 0.5);  // 50 ms of about a second, however late the samples came
  EXPECT_EQ((*d)->Stats(7)->held_share, 0.0);  // an LS is never held
  // Done: the share decays.
  slot.lanes[2].completed.store(5);
  SleepMs(20);
  const double after = (*d)->Stats(7)->busy_share;
  SleepMs(100);
  const double later = (*d)->Stats(7)->busy_share;
  EXPECT_GT(after, 0.0);
  EXPECT_LT(later, after);
  munmap(r, pacingreg::kRegionBytes);
}

TEST(PacingDomain, SamplerMeasuresHowLongABeWasHeld) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  auto fd = (*d)->Join(8, 1, kBe, 1);
  ASSERT_TRUE(fd.ok());
  pacingreg::Region* r = MapTenant(*fd);
  ASSERT_NE(r, nullptr);
  pacingreg::Slot& slot = r->slots[*(*d)->SlotOf(8)];
  // The tenant adds 30 ms of holds; its lanes say busy, which does not count for a BE.
  slot.lanes_used.store(1);
  slot.lanes[0].submitted.store(1);
  slot.held_ns.store(30'000'000);
  slot.held_count.store(3);
  const double held = ShareOnceAboveZero(**d, 8, kBe);
  EXPECT_GT(held, 0.0);
  SleepMs(50);  // the 30 ms are counted by now
  std::optional<PacingStats> st = (*d)->Stats(8);
  ASSERT_TRUE(st.has_value());
  EXPECT_EQ(st->busy_share, 0.0);
  EXPECT_EQ(st->held_ns, 30'000'000u);
  EXPECT_EQ(st->held_count, 3u);
  const double counted = st->held_share;
  EXPECT_GT(counted, 0.0);
  EXPECT_LT(counted, 0.1);  // 30 ms of about a second (1 - e^-0.03), never more than elapsed
  SleepMs(100);
  EXPECT_LT((*d)->Stats(8)->held_share, counted);  // no more holds: decaying
  // Leaving and joining again starts the slot's estimate afresh.
  (*d)->Leave(8);
  auto again = (*d)->Join(9, 1, kBe, 1);
  ASSERT_TRUE(again.ok());
  close(*again);
  EXPECT_EQ((*d)->Stats(9)->held_share, 0.0);
  munmap(r, pacingreg::kRegionBytes);
}

TEST(PacingDomain, ApplyPacingChangeChecksEveryFieldFirst) {
  PacingSettings before;
  PacingChange change;
  change.pacing = false;
  change.window_us = 300;
  change.max_hold_ms = 5;
  absl::StatusOr<PacingSettings> after = ApplyPacingChange(before, change);
  ASSERT_TRUE(after.ok()) << after.status();
  EXPECT_FALSE(after->pacing);
  EXPECT_EQ(after->window_ns, 300'000u);
  EXPECT_EQ(after->max_hold_ns, 5'000'000u);
  EXPECT_EQ(after->window_items, before.window_items);
  EXPECT_EQ(after->ls_stale_ns, before.ls_stale_ns);
  EXPECT_EQ(DescribePacingChange(before, *after),
            "pacing on -> off, window_us 100 -> 300, max_hold_ms 20 -> 5");
  EXPECT_EQ(DescribePacingChange(before, before), "unchanged");

  struct Bad {
    PacingChange change;
    const char* message;
  };
  auto with = [](auto set) {
    PacingChange c;
    c.window_us = 1;  // valid: a bad field elsewhere still changes nothing
    set(c);
    return c;
  };
  for (const Bad& bad : std::vector<Bad>{
           {with([](PacingChange& c) { c.window_items = 0; }),
            "window_items must be in [1, 1024], got 0"},
           {with([](PacingChange& c) { c.window_items = 1025; }), "window_items must be in"},
           {with([](PacingChange& c) { c.window_us = 5'000'000; }),
            "window_us must be in [0, 1000000], got 5000000"},
           {with([](PacingChange& c) { c.ls_idle_us = 1'000'001; }), "ls_idle_us must be in"},
           {with([](PacingChange& c) { c.ls_stale_ms = 0; }), "ls_stale_ms must be in [1, 600000]"},
           {with([](PacingChange& c) { c.max_hold_ms = 600'001; }), "max_hold_ms must be in"},
           {with([](PacingChange& c) { c.unknown_us = 1'000'001; }), "unknown_us must be in"},
           {with([](PacingChange& c) { c.share_slack_us = 1'000'001; }),
            "share_slack_us must be in"}}) {
    absl::StatusOr<PacingSettings> r = ApplyPacingChange(before, bad.change);
    ASSERT_FALSE(r.ok()) << bad.message;
    EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(r.status().message().find(bad.message), std::string::npos) << r.status();
  }
  // The edges of every range are accepted.
  PacingChange edges;
  edges.window_items = 1024;
  edges.window_us = 0;
  edges.ls_idle_us = 1'000'000;
  edges.ls_stale_ms = 1;
  edges.max_hold_ms = 600'000;
  edges.unknown_us = 0;
  edges.share_slack_us = 1'000'000;
  EXPECT_TRUE(ApplyPacingChange(before, edges).ok());
}

}  // namespace
}  // namespace missile::daemon
