// Unit tests of VramPool over a fake BlockSource: options, arguments, quotas, capacity, frees,
// tenants leaving, many tenants at once. Colours are in vram_pool_colour_test.cc, the cache,
// scrubbing and preallocation in vram_pool_cache_test.cc.
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

TEST(VramPoolTest, CreateRejectsBadOptions) {
  FakeSource source;
  PoolSetup s;
  EXPECT_EQ(VramPool::Create(s.options, nullptr, OneColourPolicy(), s.ls, s.be).status().code(),
            absl::StatusCode::kInvalidArgument);
  PoolSetup bad = s;
  bad.options.granularity = 3 << 20;
  EXPECT_FALSE(VramPool::Create(bad.options, &source, OneColourPolicy(), s.ls, s.be).ok());
  bad = s;
  bad.options.capacity_bytes = kG + 1;
  EXPECT_FALSE(VramPool::Create(bad.options, &source, OneColourPolicy(), s.ls, s.be).ok());
  bad = s;
  bad.options.max_colour_retries = 0;
  EXPECT_FALSE(VramPool::Create(bad.options, &source, OneColourPolicy(), s.ls, s.be).ok());
}

TEST(VramPoolTest, InvalidArgumentsAndUnknownSessions) {
  FakeSource source;
  auto pool = MakePool(&source, OneColourPolicy());
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  EXPECT_EQ(pool->AddTenant(1, kBe, 0).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(pool->AllocateChunks(1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->AllocateChunks(1, 17).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->AllocateChunks(1, uint64_t{1} << 62).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->AllocateBlock(1, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->AllocateBlock(1, kG + 4096).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->AllocateBlock(1, 17 * kG).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->AllocateChunks(2, 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->GetUsage(2).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->Free(2, {}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->SetTenantQuota(2, kG).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->SetTenantClass(2, kBe).code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(pool->RemoveTenant(2).empty());
  EXPECT_EQ(source.creates(), 0);
}

TEST(VramPoolTest, TenantQuotaFailsOnlyThatTenant) {
  FakeSource source;
  auto pool = MakePool(&source, OneColourPolicy());
  ASSERT_TRUE(pool->AddTenant(7, kLs, 4 * kG).ok());
  ASSERT_TRUE(pool->AddTenant(8, kLs, 0).ok());
  ASSERT_TRUE(pool->AllocateChunks(7, 3).ok());

  auto over = pool->AllocateChunks(7, 2);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("tenant 7 quota 8.0 MiB: holds 6.0 MiB, asked 4.0 MiB"));
  EXPECT_EQ(pool->GetUsage(7)->used_bytes, 3 * kG);
  EXPECT_EQ(pool->GetUsage(7)->available_bytes, kG);
  EXPECT_EQ(source.creates(), 3);

  EXPECT_TRUE(pool->AllocateChunks(7, 1).ok());
  EXPECT_EQ(pool->AllocateChunks(7, 1).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->AllocateBlock(7, 2 * kG).status().code(), absl::StatusCode::kResourceExhausted);
  // The other tenant goes on.
  auto other = pool->AllocateChunks(8, 6);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(pool->GetUsage(8)->used_bytes, 6 * kG);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, TenantQuotaIsCappedAtTheClassDefault) {
  FakeSource source;
  PoolSetup s;
  s.ls.tenant_quota_bytes = 4 * kG;
  auto pool = MakePool(&source, OneColourPolicy(), s);
  ASSERT_TRUE(pool->AddTenant(1, kLs, 100 * kG).ok());
  ASSERT_TRUE(pool->AddTenant(2, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(3, kBe, 100 * kG).ok());
  EXPECT_EQ(pool->GetUsage(1)->quota_bytes, 4 * kG);
  EXPECT_EQ(pool->GetUsage(2)->quota_bytes, 4 * kG);
  EXPECT_EQ(pool->GetUsage(3)->quota_bytes, 16 * kG);

  // Lowering the quota below what the tenant holds takes nothing back and never underflows.
  ASSERT_TRUE(pool->AllocateChunks(1, 3).ok());
  ASSERT_TRUE(pool->SetTenantQuota(1, kG).ok());
  EXPECT_EQ(pool->GetUsage(1)->used_bytes, 3 * kG);
  EXPECT_EQ(pool->GetUsage(1)->available_bytes, 0u);
  EXPECT_EQ(pool->AllocateChunks(1, 1).status().code(), absl::StatusCode::kResourceExhausted);

  // Raising the class default raises the cap; moving class applies the other class's cap.
  ASSERT_TRUE(
      pool->SetClassQuota(kLs, {.tenant_quota_bytes = 8 * kG, .class_quota_bytes = 16 * kG}).ok());
  EXPECT_EQ(pool->GetUsage(2)->quota_bytes, 8 * kG);
  ASSERT_TRUE(pool->SetTenantClass(3, kLs).ok());
  EXPECT_EQ(pool->GetUsage(3)->quota_bytes, 8 * kG);
  ASSERT_TRUE(pool->SetTenantClass(1, kBe).ok());
  EXPECT_EQ(pool->Snapshot().class_used_bytes[ClassIndex(kBe)], 3 * kG);
  EXPECT_EQ(pool->Snapshot().class_used_bytes[ClassIndex(kLs)], 0u);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, ClassQuota) {
  FakeSource source;
  PoolSetup s;
  s.ls = {.tenant_quota_bytes = 4 * kG, .class_quota_bytes = 6 * kG};
  auto pool = MakePool(&source, OneColourPolicy(), s);
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(3, kBe, 0).ok());
  ASSERT_TRUE(pool->AllocateChunks(1, 4).ok());
  ASSERT_TRUE(pool->AllocateChunks(2, 2).ok());
  EXPECT_EQ(pool->GetUsage(2)->available_bytes, 0u);  // tenant room 2, class room 0

  auto over = pool->AllocateChunks(2, 1);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()),
              HasSubstr("class ls quota 12.0 MiB: holds 12.0 MiB, tenant 2 asked 2.0 MiB"));
  EXPECT_TRUE(pool->AllocateChunks(3, 8).ok());  // BE is not affected
  EXPECT_EQ(pool->GetUsage(2)->used_bytes, 2 * kG);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, PoolCapacityExhausted) {
  FakeSource source;
  PoolSetup s;
  s.options.capacity_bytes = 4 * kG;
  auto pool = MakePool(&source, OneColourPolicy(), s);
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());
  ASSERT_TRUE(pool->AllocateChunks(1, 3).ok());
  auto over = pool->AllocateChunks(2, 2);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_THAT(std::string(over.status().message()), HasSubstr("pool capacity 8.0 MiB"));
  EXPECT_EQ(pool->AllocateBlock(2, 2 * kG).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(pool->GetUsage(2)->available_bytes, kG);
  EXPECT_TRUE(pool->AllocateChunks(2, 1).ok());
  EXPECT_EQ(pool->GetUsage(2)->available_bytes, 0u);
  EXPECT_EQ(source.creates(), 4);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, FreeIsAllOrNothing) {
  FakeSource source;
  auto pool = MakePool(&source, OneColourPolicy());
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());
  auto mine = pool->AllocateChunks(1, 2);
  auto theirs = pool->AllocateChunks(2, 1);
  ASSERT_TRUE(mine.ok() && theirs.ok());
  const BlockId a = (*mine)[0].id, b = (*mine)[1].id, c = (*theirs)[0].id;

  EXPECT_EQ(pool->Free(1, {a, c}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->Free(1, {a, 9999}).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->Free(1, {a, a}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(pool->GetUsage(1)->used_bytes, 2 * kG);
  EXPECT_EQ(pool->Snapshot().cached_bytes, 0u);
  EXPECT_EQ(source.scrubs(), 0);

  // Only the holder may look a block up.
  ASSERT_TRUE(pool->Lookup(1, a).ok());
  EXPECT_EQ(pool->Lookup(1, a)->handle, (*mine)[0].handle);
  EXPECT_EQ(pool->Lookup(2, a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->Lookup(1, c).status().code(), absl::StatusCode::kNotFound);

  EXPECT_TRUE(pool->Free(1, {a, b}).ok());
  EXPECT_EQ(pool->GetUsage(1)->used_bytes, 0u);
  EXPECT_EQ(pool->Lookup(1, a).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(pool->Free(1, {a}).code(), absl::StatusCode::kNotFound);  // not twice
  EXPECT_EQ(source.scrubs(), 2);
  EXPECT_EQ(pool->Snapshot().cached_bytes, 2 * kG);
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, RemoveTenantReturnsEverythingForTheNextTenant) {
  FakeSource source;
  auto pool = MakePool(&source, OneColourPolicy());
  ASSERT_TRUE(pool->AddTenant(1, kLs, 0).ok());
  ASSERT_TRUE(pool->AddTenant(2, kBe, 0).ok());
  auto chunks = pool->AllocateChunks(1, 12);
  auto block = pool->AllocateBlock(1, 4 * kG);
  ASSERT_TRUE(chunks.ok() && block.ok());
  EXPECT_EQ(pool->AllocateChunks(2, 1).status().code(), absl::StatusCode::kResourceExhausted);

  std::vector<BlockId> expected = Ids(*chunks);
  expected.push_back(block->id);
  std::sort(expected.begin(), expected.end());
  EXPECT_EQ(pool->RemoveTenant(1), expected);
  EXPECT_EQ(pool->GetUsage(1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(pool->RemoveTenant(1).empty());

  const int creates = source.creates();
  auto next = pool->AllocateChunks(2, 12);
  ASSERT_TRUE(next.ok()) << next.status();
  EXPECT_EQ(source.creates(), creates);  // served from the cache
  auto big = pool->AllocateBlock(2, 4 * kG);
  ASSERT_TRUE(big.ok()) << big.status();
  EXPECT_EQ(source.creates(), creates);  // the cached multi-granule block, reused
  ExpectConsistent(*pool, source);
}

TEST(VramPoolTest, ConcurrentTenantsKeepTheBooksStraight) {
  FakeSource source({kColour0, kColour1, kColour1});
  PoolSetup s;
  s.options.capacity_bytes = 64 * kG;
  s.options.cache_limit_bytes = 8 * kG;
  s.ls = {.tenant_quota_bytes = 12 * kG, .class_quota_bytes = 32 * kG};
  s.be = {.tenant_quota_bytes = 12 * kG, .class_quota_bytes = 40 * kG};
  auto pool = MakePool(&source, TwoColourPolicy(), s);
  constexpr int kThreads = 4;
  std::atomic<int> unexpected{0};
  std::atomic<int> allocations{0};
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937 rng(t);
      const SessionId session = 100 + t;
      const TenantClass cls = t % 2 == 0 ? kLs : kBe;
      const ColourSet colour = cls == kLs ? kColour0 : kColour1;
      if (!pool->AddTenant(session, cls, 0).ok()) ++unexpected;
      std::vector<BlockId> held;
      for (int i = 0; i < 1500; ++i) {
        const int op = rng() % 10;
        if (op < 4) {
          auto leases = pool->AllocateChunks(session, 1 + rng() % 4);
          if (leases.ok()) {
            ++allocations;
            for (const Lease& lease : *leases) {
              if (lease.colours != colour) ++unexpected;
              held.push_back(lease.id);
            }
          } else if (leases.status().code() != absl::StatusCode::kResourceExhausted) {
            ++unexpected;
          }
        } else if (op < 5) {
          auto lease = pool->AllocateBlock(session, kG);
          if (lease.ok()) held.push_back(lease->id);
        } else if (op < 8 && !held.empty()) {
          std::shuffle(held.begin(), held.end(), rng);
          const size_t n = 1 + rng() % held.size();
          std::vector<BlockId> ids(held.end() - n, held.end());
          if (!pool->Free(session, ids).ok()) ++unexpected;
          held.resize(held.size() - n);
        } else if (op < 9) {
          const PoolSnapshot snap = pool->Snapshot();
          if (snap.leased_bytes + snap.cached_bytes != snap.created_bytes) ++unexpected;
        } else if (t == 0) {
          if (!pool->Trim(2 * kG).ok()) ++unexpected;
        }
      }
      if (pool->GetUsage(session)->used_bytes != held.size() * kG) ++unexpected;
    });
  }
  for (std::thread& thread : threads) thread.join();
  EXPECT_EQ(unexpected.load(), 0);
  EXPECT_GT(allocations.load(), 100);
  ExpectConsistent(*pool, source);
  EXPECT_LE(pool->Snapshot().class_used_bytes[ClassIndex(kLs)], 32 * kG);

  for (int t = 0; t < kThreads; ++t) pool->RemoveTenant(100 + t);
  const PoolSnapshot snap = pool->Snapshot();
  EXPECT_EQ(snap.leased_bytes, 0u);
  EXPECT_TRUE(snap.tenants.empty());
  ExpectConsistent(*pool, source);
  pool.reset();
  EXPECT_EQ(source.live_bytes(), 0u);
}

}  // namespace
}  // namespace missile::daemon::pool_test
