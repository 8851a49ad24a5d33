#include "missile/colorer/colour_policy.h"

#include <cmath>
#include <cstdint>
#include <limits>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::colorer {
namespace {

constexpr uint64_t kChunk = uint64_t{2} << 20;
constexpr TenantClass kLs = TenantClass::kLatencySensitive;
constexpr TenantClass kBe = TenantClass::kBestEffort;

// Four channels from address bits 21 and 22, split into `colours` colours: chunk i sits on
// channel i % 4.
ColourScheme CoarseScheme(int colours) {
  auto map = XorChannelMap::Create({kChunk, 2 * kChunk});
  EXPECT_TRUE(map.ok());
  auto scheme =
      ColourScheme::EvenSplit(std::shared_ptr<const ChannelMap>(*std::move(map)), colours);
  EXPECT_TRUE(scheme.ok()) << scheme.status();
  return *std::move(scheme);
}

ColourScheme OneColourScheme() {
  auto map = UniformChannelMap::Create(32);
  EXPECT_TRUE(map.ok());
  auto scheme = ColourScheme::EvenSplit(std::shared_ptr<const ChannelMap>(*std::move(map)), 1);
  EXPECT_TRUE(scheme.ok());
  return *std::move(scheme);
}

TEST(ColourPolicyTest, RejectsBadSplits) {
  ColourPolicyOptions both;
  both.ls_colours = 1;
  both.ls_fraction = 0.25;
  EXPECT_FALSE(ColourPolicy::Create(CoarseScheme(4), both).ok());
  for (int ls : {0, -1, 4, 5}) {
    ColourPolicyOptions o;
    o.ls_colours = ls;
    EXPECT_FALSE(ColourPolicy::Create(CoarseScheme(4), o).ok()) << ls;
  }
  for (double f : {0.0, 1.0, -0.5, 1.5, std::numeric_limits<double>::quiet_NaN()}) {
    ColourPolicyOptions o;
    o.ls_fraction = f;
    EXPECT_FALSE(ColourPolicy::Create(CoarseScheme(4), o).ok()) << f;
  }
}

TEST(ColourPolicyTest, LsGetsExclusiveColoursBeSharesTheRest) {
  auto policy = ColourPolicy::Create(CoarseScheme(4));  // default: one LS colour
  ASSERT_TRUE(policy.ok());
  EXPECT_TRUE(policy->isolating());
  EXPECT_EQ(policy->ColoursFor(kLs), ColourSet::Single(0));
  EXPECT_EQ(policy->ColoursFor(kBe), ColourSet::FromBits(0b1110));
  EXPECT_EQ(policy->PreferenceOrder(kLs), (std::vector<int>{0}));
  EXPECT_EQ(policy->PreferenceOrder(kBe), (std::vector<int>{1, 2, 3}));

  EXPECT_TRUE(policy->Eligible(ColourSet::Single(0), kLs));
  EXPECT_FALSE(policy->Eligible(ColourSet::Single(0), kBe));
  EXPECT_FALSE(policy->Eligible(ColourSet::Single(2), kLs));
  EXPECT_EQ(policy->Rank(ColourSet::Single(1), kBe), 0);
  EXPECT_EQ(policy->Rank(ColourSet::Single(3), kBe), 2);
  // Unclean within BE's colours: after every clean BE chunk.
  EXPECT_EQ(policy->Rank(ColourSet::FromBits(0b0110), kBe), 3);
  // Straddling LS and BE colours: nobody's, by default.
  EXPECT_FALSE(policy->Eligible(ColourSet::FromBits(0b0011), kLs));
  EXPECT_FALSE(policy->Eligible(ColourSet::FromBits(0b0011), kBe));
  EXPECT_FALSE(policy->Eligible(ColourSet(), kLs));

  EXPECT_EQ(policy->RankChunk({0, kChunk}, kLs), 0);
  EXPECT_EQ(policy->RankChunk({2 * kChunk, kChunk}, kBe), 1);
  EXPECT_EQ(policy->RankChunk({2 * kChunk, kChunk}, kLs), std::nullopt);
}

TEST(ColourPolicyTest, FractionAndUncleanOptions) {
  ColourPolicyOptions o;
  o.ls_fraction = 0.5;
  o.be_may_use_unclean = true;
  auto policy = ColourPolicy::Create(CoarseScheme(4), o);
  ASSERT_TRUE(policy.ok());
  EXPECT_EQ(policy->ColoursFor(kLs), ColourSet::FromBits(0b0011));
  EXPECT_EQ(policy->ColoursFor(kBe), ColourSet::FromBits(0b1100));
  EXPECT_EQ(policy->Rank(ColourSet::FromBits(0b0110), kBe), 3);  // last resort for BE
  EXPECT_FALSE(policy->Eligible(ColourSet::FromBits(0b0110), kLs));
  EXPECT_EQ(policy->Rank(ColourSet::FromBits(0b0011), kLs), 2);

  o.ls_fraction = 0.01;  // rounds to 0, clamped to 1
  auto small = ColourPolicy::Create(CoarseScheme(4), o);
  ASSERT_TRUE(small.ok());
  EXPECT_EQ(small->ColoursFor(kLs).Count(), 1);
  o.ls_fraction = 0.99;  // rounds to 4, clamped to 3
  auto large = ColourPolicy::Create(CoarseScheme(4), o);
  ASSERT_TRUE(large.ok());
  EXPECT_EQ(large->ColoursFor(kBe).Count(), 1);
}

TEST(ColourPolicyTest, OneColourIsNotIsolating) {
  ColourPolicyOptions o;
  o.ls_colours = 1;
  auto policy = ColourPolicy::Create(OneColourScheme(), o);
  ASSERT_TRUE(policy.ok());
  EXPECT_FALSE(policy->isolating());
  EXPECT_EQ(policy->ColoursFor(kLs), ColourSet::Single(0));
  EXPECT_EQ(policy->ColoursFor(kBe), ColourSet::Single(0));
  EXPECT_EQ(policy->RankChunk({7 * kChunk, kChunk}, kLs), 0);
  EXPECT_EQ(policy->RankChunk({7 * kChunk, kChunk}, kBe), 0);
}

TEST(ColourPolicyTest, CapacityAddsUp) {
  auto policy = ColourPolicy::Create(CoarseScheme(2));  // colours {ch0,ch1}, {ch2,ch3}
  ASSERT_TRUE(policy.ok());
  std::vector<PhysRange> chunks;
  for (uint64_t i = 0; i < 10; ++i) chunks.push_back({i * kChunk, kChunk});
  chunks.push_back({kChunk, 2 * kChunk});  // channels 1 and 2: unclean
  chunks.push_back({0, 0});                // ignored
  const ColourCapacity cap = policy->Capacity(chunks);
  ASSERT_EQ(cap.clean_bytes.size(), 2u);
  EXPECT_EQ(cap.clean_bytes[0], 6 * kChunk);  // chunks 0,1,4,5,8,9
  EXPECT_EQ(cap.clean_bytes[1], 4 * kChunk);  // chunks 2,3,6,7
  EXPECT_EQ(cap.unclean_bytes, 2 * kChunk);
  EXPECT_EQ(cap.total_bytes, 12 * kChunk);
  EXPECT_EQ(cap.ls_eligible_bytes, 6 * kChunk);
  EXPECT_EQ(cap.be_eligible_bytes, 4 * kChunk);
  EXPECT_TRUE(CheckCapacityAddsUp(cap).ok());

  ColourCapacity broken = cap;
  broken.clean_bytes[1] += 1;
  EXPECT_EQ(CheckCapacityAddsUp(broken).code(), absl::StatusCode::kInternal);
  broken = cap;
  broken.be_eligible_bytes = cap.total_bytes + 1;
  EXPECT_FALSE(CheckCapacityAddsUp(broken).ok());
  broken = cap;
  broken.clean_bytes[0] = std::numeric_limits<uint64_t>::max();
  EXPECT_FALSE(CheckCapacityAddsUp(broken).ok());

  auto shared = ColourPolicy::Create(OneColourScheme());
  ASSERT_TRUE(shared.ok());
  const ColourCapacity all = shared->Capacity(chunks);
  EXPECT_EQ(all.clean_bytes[0], all.total_bytes);
  EXPECT_EQ(all.ls_eligible_bytes, all.total_bytes);
  EXPECT_EQ(all.be_eligible_bytes, all.total_bytes);
  EXPECT_TRUE(CheckCapacityAddsUp(all).ok());
}

}  // namespace
}  // namespace missile::colorer
