#include "daemon/vram_pool.h"

#include <algorithm>
#include <atomic>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::daemon {
namespace {

using colorer::ColourPolicy;
using colorer::ColourScheme;
using colorer::ColourSet;
using colorer::TenantClass;
using ::testing::HasSubstr;

constexpr uint64_t kG = uint64_t{2} << 20;  // the H200's VMM granularity
constexpr TenantClass kLs = TenantClass::kLatencySensitive;
constexpr TenantClass kBe = TenantClass::kBestEffort;
const ColourSet kColour0 = ColourSet::Single(0);
const ColourSet kColour1 = ColourSet::Single(1);

// Hands out blocks whose colours cycle through a pattern; counts calls; fails on demand.
class FakeSource : public BlockSource {
 public:
  explicit FakeSource(std::vector<ColourSet> pattern = {ColourSet::Single(0)})
      : pattern_(std::move(pattern)) {}
  ~FakeSource() override { EXPECT_TRUE(live_.empty()) << live_.size() << " blocks leaked"; }

  absl::StatusOr<PhysicalBlock> Create(uint64_t bytes) override {
    absl::MutexLock lock(&mu_);
    ++creates_;
    if (fail_create_at_ != 0 && creates_ == fail_create_at_) {
      return absl::InternalError("fake: create failed");
    }
    PhysicalBlock block{next_handle_++, bytes, pattern_[next_colour_++ % pattern_.size()]};
    live_[block.handle] = bytes;
    return block;
  }
  void Destroy(const PhysicalBlock& block) override {
    absl::MutexLock lock(&mu_);
    ++destroys_;
    EXPECT_EQ(live_.erase(block.handle), 1u) << "destroyed twice or unknown: " << block.handle;
    destroyed_.push_back(block.handle);
  }
  absl::Status Scrub(const PhysicalBlock& block) override {
    absl::MutexLock lock(&mu_);
    ++scrubs_;
    EXPECT_TRUE(live_.contains(block.handle));
    return fail_scrubs_ ? absl::UnavailableError("fake: scrub failed") : absl::OkStatus();
  }

  // The n-th Create from now (1-based) fails.
  void FailCreateAt(int n) {
    absl::MutexLock lock(&mu_);
    fail_create_at_ = creates_ + n;
  }
  void FailScrubs(bool fail) {
    absl::MutexLock lock(&mu_);
    fail_scrubs_ = fail;
  }
  int creates() const {
    absl::MutexLock lock(&mu_);
    return creates_;
  }
  int destroys() const {
    absl::MutexLock lock(&mu_);
    return destroys_;
  }
  int scrubs() const {
    absl::MutexLock lock(&mu_);
    return scrubs_;
  }
  uint64_t live_bytes() const {
    absl::MutexLock lock(&mu_);
    uint64_t sum = 0;
    for (const auto& [handle, bytes] : live_) sum += bytes;
    return sum;
  }
  std::vector<uint64_t> destroyed() const {
    absl::MutexLock lock(&mu_);
    return destroyed_;
  }

 private:
  mutable absl::Mutex mu_;
  std::vector<ColourSet> pattern_;
  size_t next_colour_ = 0;
  uint64_t next_handle_ = 100;
  int creates_ = 0, destroys_ = 0, scrubs_ = 0;
  int fail_create_at_ = 0;
  bool fail_scrubs_ = false;
  absl::flat_hash_map<uint64_t, uint64_t> live_;
  std::vector<uint64_t> destroyed_;
};

// Two colours: channel = address bit 21, so each 2 MiB chunk is clean. LS gets colour 0.
ColourPolicy TwoColourPolicy() {
  auto map = colorer::XorChannelMap::Create({kG});
  EXPECT_TRUE(map.ok()) << map.status();
  auto scheme =
      ColourScheme::EvenSplit(std::shared_ptr<const colorer::ChannelMap>(*std::move(map)), 2);
  EXPECT_TRUE(scheme.ok()) << scheme.status();
  auto policy = ColourPolicy::Create(*scheme);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *policy;
}

// One colour, as measured on the H200: every chunk touches every channel.
ColourPolicy OneColourPolicy() {
  auto map = colorer::UniformChannelMap::Create(8);
  EXPECT_TRUE(map.ok()) << map.status();
  auto scheme =
      ColourScheme::EvenSplit(std::shared_ptr<const colorer::ChannelMap>(*std::move(map)), 1);
  EXPECT_TRUE(scheme.ok()) << scheme.status();
  auto policy = ColourPolicy::Create(*scheme);
  EXPECT_TRUE(policy.ok()) << policy.status();
  return *policy;
}

struct PoolSetup {
  PoolOptions options{.granularity = kG,
                      .capacity_bytes = 16 * kG,
                      .cache_limit_bytes = 16 * kG,
                      .scrub_on_release = true,
                      .max_colour_retries = 8};
  QuotaPolicy ls{.tenant_quota_bytes = 16 * kG, .class_quota_bytes = 16 * kG};
  QuotaPolicy be{.tenant_quota_bytes = 16 * kG, .class_quota_bytes = 16 * kG};
};

std::unique_ptr<VramPool> MakePool(FakeSource* source, ColourPolicy policy,
                                   const PoolSetup& s = {}) {
  auto pool = VramPool::Create(s.options, source, std::move(policy), s.ls, s.be);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

std::vector<BlockId> Ids(const std::vector<Lease>& leases) {
  std::vector<BlockId> ids;
  for (const Lease& lease : leases) ids.push_back(lease.id);
  return ids;
}

void ExpectConsistent(const VramPool& pool, const FakeSource& source) {
  const PoolSnapshot snap = pool.Snapshot();
  EXPECT_EQ(snap.leased_bytes + snap.cached_bytes, snap.created_bytes);
  EXPECT_LE(snap.created_bytes, snap.capacity_bytes);
  EXPECT_EQ(source.live_bytes(), snap.created_bytes);
  uint64_t tenant_sum = 0;
  for (const TenantStats& t : snap.tenants) tenant_sum += t.usage.used_bytes;
  EXPECT_EQ(tenant_sum, snap.leased_bytes);
  EXPECT_EQ(snap.class_used_bytes[0] + snap.class_used_bytes[1], snap.leased_bytes);
  uint64_t colour_created = snap.unclean_created_bytes, colour_leased = snap.unclean_leased_bytes;
  for (const ColourStats& c : snap.colours) {
    colour_created += c.created_bytes;
    colour_leased += c.leased_bytes;
  }
  EXPECT_EQ(colour_created, snap.created_bytes);
  EXPECT_EQ(colour_leased, snap.leased_bytes);
}

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
}  // namespace missile::daemon
