// Unit tests of VramPool: placement by colour, with two colours and with one, and colour
// retries.
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

TEST(VramPoolTest, TwoColoursKeepClassesApart) {
  FakeSource source({kColour1, kColour0});  // the hardware alternates
  auto pool = MakePool(&source, TwoColourPolicy());
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());

  auto ls = pool->AllocateChunks(1, 3);
  ASSERT_TRUE(ls.ok()) << ls.status();
  for (const Lease& lease : *ls) EXPECT_EQ(lease.colours, kColour0);
  EXPECT_EQ(source.creates(), 6);  // three BE-coloured blocks kept in the cache
  EXPECT_EQ(pool->Snapshot().cached_bytes, 3 * kG);

  auto be = pool->AllocateChunks(2, 4);
  ASSERT_TRUE(be.ok()) << be.status();
  for (const Lease& lease : *be) EXPECT_EQ(lease.colours, kColour1);
  EXPECT_EQ(source.creates(), 7);  // three from the cache, then a new one of colour 1

  // A freed LS block is not given to BE: BE gets a new block (after one LS-coloured retry).
  ASSERT_TRUE(pool->Free(1, {(*ls)[0].id}).ok());
  auto be2 = pool->AllocateChunks(2, 1);
  ASSERT_TRUE(be2.ok());
  EXPECT_EQ((*be2)[0].colours, kColour1);
  EXPECT_NE((*be2)[0].id, (*ls)[0].id);
  EXPECT_EQ(source.creates(), 9);
  auto ls2 = pool->AllocateChunks(1, 2);  // both LS-coloured cached blocks, no new ones
  ASSERT_TRUE(ls2.ok());
  EXPECT_EQ(source.creates(), 9);
  for (const Lease& lease : *ls2) EXPECT_EQ(lease.colours, kColour0);

  const PoolSnapshot snap = pool->Snapshot();
  EXPECT_TRUE(snap.isolating);
  ASSERT_EQ(snap.colours.size(), 2u);
  EXPECT_EQ(snap.colours[0].role, ColourRole::kLatencySensitive);
  EXPECT_EQ(snap.colours[1].role, ColourRole::kBestEffort);
  EXPECT_EQ(snap.colours[0].leased_bytes, 4 * kG);
  EXPECT_EQ(snap.colours[1].leased_bytes, 5 * kG);
  EXPECT_EQ(snap.cached_bytes, 0u);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, OneColourServesEveryone) {
  FakeSource source({kColour0});
  auto pool = MakePool(&source, OneColourPolicy());
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());
  auto ls = pool->AllocateChunks(1, 4);
  auto be = pool->AllocateChunks(2, 4);
  ASSERT_TRUE(ls.ok() && be.ok());
  EXPECT_EQ(source.creates(), 8);  // no retries
  ASSERT_TRUE(pool->Free(1, Ids(*ls)).ok());
  ASSERT_TRUE(pool->AllocateChunks(2, 4).ok());
  EXPECT_EQ(source.creates(), 8);  // BE reuses what LS freed

  const PoolSnapshot snap = pool->Snapshot();
  EXPECT_FALSE(snap.isolating);
  ASSERT_EQ(snap.colours.size(), 1u);
  EXPECT_EQ(snap.colours[0].role, ColourRole::kShared);
  EXPECT_EQ(snap.colours[0].leased_bytes, 8 * kG);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, ColourRetriesExhausted) {
  FakeSource source({kColour1});  // only BE colours, ever
  PoolSetup s;
  s.options.max_colour_retries = 3;
  auto pool = MakePool(&source, TwoColourPolicy(), s);
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());

  auto ls = pool->AllocateChunks(1, 1);
  EXPECT_EQ(ls.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(ls.status().message()),
              HasSubstr("no block of an LS colour after 3 tries"));
  EXPECT_EQ(source.creates(), 3);
  EXPECT_EQ(pool->GetUsage(1)->used_bytes, 0u);
  EXPECT_EQ(pool->Snapshot().cached_bytes, 3 * kG);

  ASSERT_TRUE(pool->AllocateChunks(2, 3).ok());  // the wrong-coloured blocks serve BE
  EXPECT_EQ(source.creates(), 3);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, RetriesEvictCachedBlocksWhenThePoolIsFull) {
  FakeSource source({kColour1});
  PoolSetup s;
  s.options.capacity_bytes = 2 * kG;
  auto pool = MakePool(&source, TwoColourPolicy(), s);
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  EXPECT_EQ(pool->AllocateChunks(1, 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(source.creates(), 8);
  EXPECT_LE(pool->Snapshot().created_bytes, 2 * kG);
  ExpectConsistent(*pool, source);
}

}  // namespace
}  // namespace missile::daemon::pool_test
