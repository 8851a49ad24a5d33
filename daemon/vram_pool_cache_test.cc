// Unit tests of VramPool: rollback of a partial allocation, the cache of released blocks, its
// trimming and scrubbing, and preallocation.
#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "daemon/testing/vram_pool_test_util.h"
#include "daemon/vram_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon::pool_test {
namespace {

TEST(VramPoolTest, RollbackOnPartialFailure) {
  FakeSource source;
  auto pool = MakePool(&source, OneColourPolicy());
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  source.FailCreateAt(3);
  auto failed = pool->AllocateChunks(1, 5);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kInternal);
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("fake: create failed"));
  EXPECT_THAT(std::string(failed.status().message()), HasSubstr("block 3 of 5"));
  EXPECT_EQ(pool->GetUsage(1)->used_bytes, 0u);
  PoolSnapshot snap = pool->Snapshot();
  EXPECT_EQ(snap.leased_bytes, 0u);
  EXPECT_EQ(snap.cached_bytes, 2 * kG);  // the two taken so far went back to the cache
  EXPECT_EQ(snap.created_bytes, 2 * kG);
  EXPECT_EQ(source.scrubs(), 0);
  ExpectConsistent(*pool, source);

  auto retry = pool->AllocateChunks(1, 5);
  ASSERT_TRUE(retry.ok()) << retry.status();
  EXPECT_EQ(source.creates(), 6);  // 2 + the failed one + 3 new
  EXPECT_EQ(pool->Snapshot().cached_bytes, 0u);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, CacheTrimAndScrub) {
  FakeSource source;
  PoolSetup s;
  s.options.cache_limit_bytes = 2 * kG;
  auto pool = MakePool(&source, OneColourPolicy(), s);
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  auto leases = pool->AllocateChunks(1, 4);
  ASSERT_TRUE(leases.ok());
  ASSERT_TRUE(pool->Free(1, Ids(*leases)).ok());
  EXPECT_EQ(source.scrubs(), 4);
  EXPECT_EQ(pool->Snapshot().cached_bytes, 2 * kG);
  // The oldest cached blocks went first.
  EXPECT_EQ(source.destroyed(), (std::vector<uint64_t>{(*leases)[0].handle, (*leases)[1].handle}));

  // A failed scrub destroys the block instead of caching it.
  auto one = pool->AllocateChunks(1, 1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)[0].handle, (*leases)[3].handle);  // newest cached first
  source.FailScrubs(true);
  ASSERT_TRUE(pool->Free(1, Ids(*one)).ok());
  EXPECT_EQ(source.destroyed().back(), (*one)[0].handle);
  EXPECT_EQ(pool->Snapshot().cached_bytes, kG);
  source.FailScrubs(false);

  // A multi-granule block that would overflow the cache is destroyed on free.
  auto big = pool->AllocateBlock(1, 2 * kG);
  ASSERT_TRUE(big.ok());
  EXPECT_EQ(big->bytes, 2 * kG);
  ASSERT_TRUE(pool->Free(1, {big->id}).ok());
  EXPECT_EQ(source.destroyed().back(), big->handle);
  EXPECT_EQ(pool->Snapshot().cached_bytes, kG);

  ASSERT_TRUE(pool->Trim(0).ok());
  EXPECT_EQ(pool->Snapshot().cached_bytes, 0u);
  EXPECT_EQ(pool->Snapshot().created_bytes, 0u);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, NoScrubWhenDisabled) {
  FakeSource source;
  PoolSetup s;
  s.options.scrub_on_release = false;
  auto pool = MakePool(&source, OneColourPolicy(), s);
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  auto leases = pool->AllocateChunks(1, 2);
  ASSERT_TRUE(leases.ok());
  ASSERT_TRUE(pool->Free(1, Ids(*leases)).ok());
  EXPECT_EQ(source.scrubs(), 0);
  EXPECT_EQ(pool->Snapshot().cached_bytes, 2 * kG);
}

TEST(VramPoolTest, PreallocFillsTheCacheAndBigBlocksEvictIt) {
  FakeSource source;
  PoolSetup s;
  s.options.capacity_bytes = 4 * kG;
  auto pool = MakePool(&source, OneColourPolicy(), s);
  EXPECT_EQ(pool->Prealloc(kG + 1).code(), absl::StatusCode::kInvalidArgument);
  source.FailCreateAt(2);
  EXPECT_EQ(pool->Prealloc(3 * kG).code(), absl::StatusCode::kInternal);
  EXPECT_EQ(pool->Snapshot().created_bytes, 0u);  // all or nothing
  ASSERT_TRUE(pool->Prealloc(4 * kG).ok());
  EXPECT_EQ(pool->Prealloc(kG).code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->Snapshot().cached_bytes, 4 * kG);

  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  const int creates = source.creates();
  auto big = pool->AllocateBlock(1, 4 * kG);  // the cached granules make room
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(source.creates(), creates + 1);
  PoolSnapshot snap = pool->Snapshot();
  EXPECT_EQ(snap.cached_bytes, 0u);
  EXPECT_EQ(snap.leased_bytes, 4 * kG);
  ExpectConsistent(*pool, source);
}

// A block whose descriptor a tenant received may still be mapped by it after a free (the
// daemon cannot revoke a mapping): it is destroyed, never leased to another tenant; a block
// never handed out is cached and reused as before.
TEST(VramPoolTest, AHandedOutBlockIsNeverLeasedAgain) {
  FakeSource source;
  auto pool = MakePool(&source, OneColourPolicy());
  ASSERT_TRUE(pool->AddTenant(1, kBe, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());
  auto mine = pool->AllocateChunks(1, 2);
  ASSERT_TRUE(mine.ok()) << mine.status();
  absl::StatusOr<int> fd = pool->DuplicateDescriptor(1, (*mine)[0].id);
  ASSERT_TRUE(fd.ok()) << fd.status();
  close(*fd);
  ASSERT_TRUE(pool->Free(1, Ids(*mine)).ok());
  EXPECT_EQ(source.destroyed(), std::vector<uint64_t>{(*mine)[0].handle});
  EXPECT_EQ(source.scrubs(), 2) << "the handed-out block is scrubbed before it goes";
  EXPECT_EQ(pool->Snapshot().cached_bytes, kG);

  auto theirs = pool->AllocateChunks(2, 2);
  ASSERT_TRUE(theirs.ok()) << theirs.status();
  EXPECT_EQ((*theirs)[0].handle, (*mine)[1].handle) << "never handed out: reused";
  EXPECT_NE((*theirs)[1].handle, (*mine)[0].handle);
  EXPECT_EQ(source.creates(), 3);
  ExpectConsistent(*pool, source);
}

// A session removed while its process lives: the blocks it received are destroyed without a
// scrub (the process's data stays) and counted against the capacity until it exits.
TEST(VramPoolTest, MemoryOfAnEndedSessionWhoseProcessLivesStaysCounted) {
  FakeSource source;
  auto pool = MakePool(&source, OneColourPolicy());  // capacity 16 granules
  ASSERT_TRUE(pool->AddTenant(1, kBe, 0).ok());
  auto held = pool->AllocateChunks(1, 4);
  ASSERT_TRUE(held.ok()) << held.status();
  for (int i = 0; i < 3; ++i) {
    absl::StatusOr<int> fd = pool->DuplicateDescriptor(1, (*held)[i].id);
    ASSERT_TRUE(fd.ok()) << fd.status();
    close(*fd);
  }
  EXPECT_EQ(pool->RemoveTenant(1, /*process_lives=*/true).size(), 4u);
  EXPECT_EQ(source.scrubs(), 1) << "only the block never handed out is scrubbed";
  PoolSnapshot snap = pool->Snapshot();
  EXPECT_EQ(snap.released_mapped_bytes, 3 * kG);
  EXPECT_EQ(snap.cached_bytes, kG);
  ExpectConsistent(*pool, source);

  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());
  EXPECT_EQ(pool->GetUsage(2)->available_bytes, 13 * kG);
  auto too_much = pool->AllocateChunks(2, 14);
  EXPECT_EQ(too_much.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(too_much.status().message()), HasSubstr("possibly still mapped"));
  auto rest = pool->AllocateChunks(2, 13);
  ASSERT_TRUE(rest.ok()) << rest.status();
  for (const Lease& l : *rest) {
    for (int i = 0; i < 3; ++i) EXPECT_NE(l.handle, (*held)[i].handle);
  }

  EXPECT_EQ(pool->ForgetReleased(1), 3 * kG);  // the process exited
  EXPECT_EQ(pool->ForgetReleased(1), 0u);
  EXPECT_EQ(pool->Snapshot().released_mapped_bytes, 0u);
  EXPECT_TRUE(pool->AllocateChunks(2, 3).ok());
  ExpectConsistent(*pool, source);
}

}  // namespace
}  // namespace missile::daemon::pool_test
