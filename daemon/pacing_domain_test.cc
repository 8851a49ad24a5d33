#include "pacing_domain.h"

#include <gtest/gtest.h>
#include <sys/mman.h>
#include <unistd.h>

namespace missile::daemon {
namespace {

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
  auto fd = (*d)->Join(11, 1234, /*ls=*/false, 4);
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
  auto a = (*d)->Join(1, 100, /*ls=*/true, 10);
  auto b = (*d)->Join(2, 200, /*ls=*/false, 0);
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
  auto again = (*d)->Join(1, 100, true, 10);
  ASSERT_TRUE(again.ok());
  close(*again);
  EXPECT_EQ((*d)->SlotOf(1), sa);
  // A class change reaches the slot and the LS count.
  (*d)->SetPolicy(2, /*ls=*/true, 7);
  EXPECT_EQ(r->slots[*sb].cls.load(), pacingreg::kLs);
  EXPECT_EQ(r->slots[*sb].weight.load(), 7u);
  EXPECT_EQ(r->header.policy.ls_tenants.load(), 2u);
  EXPECT_EQ(r->header.policy.be_tenants.load(), 0u);
  munmap(r, pacingreg::kRegionBytes);
}

TEST(PacingDomain, LeaveMakesADeadLsIdleAtOnceAndFreesTheSlot) {
  auto d = PacingDomain::Create({});
  ASSERT_TRUE(d.ok());
  auto fd = (*d)->Join(5, 1, /*ls=*/true, 1);
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
  auto next = (*d)->Join(6, 2, false, 1);
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
    auto fd = (*d)->Join(s, 1, false, 1);
    ASSERT_TRUE(fd.ok());
    close(*fd);
  }
  auto full = (*d)->Join(1000, 1, false, 1);
  EXPECT_EQ(full.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ((*d)->Join(0, 1, false, 1).status().code(), absl::StatusCode::kInvalidArgument);
  (*d)->Leave(3);
  auto fd = (*d)->Join(1000, 1, false, 1);
  ASSERT_TRUE(fd.ok());
  close(*fd);
}

}  // namespace
}  // namespace missile::daemon
