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

}  // namespace
}  // namespace missile::daemon::pool_test
