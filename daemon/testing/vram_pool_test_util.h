// What the VramPool tests share: the fake BlockSource (daemon/testing/fake_block_source.h) with
// misuse as a test failure, one- and two-colour policies, a pool set-up, and a consistency check
// of a pool's books against its source.
#ifndef MISSILE_DAEMON_TESTING_VRAM_POOL_TEST_UTIL_H_
#define MISSILE_DAEMON_TESTING_VRAM_POOL_TEST_UTIL_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "daemon/testing/fake_block_source.h"
#include "daemon/vram_pool.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::daemon::pool_test {

using colorer::ColourPolicy;
using colorer::ColourScheme;
using colorer::ColourSet;
using colorer::TenantClass;
using ::testing::HasSubstr;

inline constexpr uint64_t kG = uint64_t{2} << 20;  // the H200's VMM granularity
inline constexpr TenantClass kLs = TenantClass::kLatencySensitive;
inline constexpr TenantClass kBe = TenantClass::kBestEffort;
inline const ColourSet kColour0 = ColourSet::Single(0);
inline const ColourSet kColour1 = ColourSet::Single(1);

// The shared fake with misuse as a test failure rather than a crash, so a test's other checks
// still report.
class FakeSource : public FakeBlockSource {
 public:
  explicit FakeSource(std::vector<ColourSet> pattern = {ColourSet::Single(0)})
      : FakeBlockSource(std::move(pattern),
                        [](const std::string& what) { ADD_FAILURE() << what; }) {}
};

// Two colours: channel = address bit 21, so each 2 MiB chunk is clean. LS gets colour 0.
inline ColourPolicy TwoColourPolicy() {
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
inline ColourPolicy OneColourPolicy() {
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

inline std::unique_ptr<VramPool> MakePool(FakeSource* source, ColourPolicy policy,
                                   const PoolSetup& s = {}) {
  auto pool = VramPool::Create(s.options, source, std::move(policy), s.ls, s.be);
  EXPECT_TRUE(pool.ok()) << pool.status();
  return pool.ok() ? *std::move(pool) : nullptr;
}

inline std::vector<BlockId> Ids(const std::vector<Lease>& leases) {
  std::vector<BlockId> ids;
  for (const Lease& lease : leases) ids.push_back(lease.id);
  return ids;
}

inline void ExpectConsistent(const VramPool& pool, const FakeSource& source) {
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

}  // namespace missile::daemon::pool_test

#endif  // MISSILE_DAEMON_TESTING_VRAM_POOL_TEST_UTIL_H_
