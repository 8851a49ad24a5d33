#include "missile/pacing/tpc_map.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <set>

namespace missile::pacing {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A GPU as the probe would see it: physical TPC t at mask bit t, `dead` TPCs floorswept, the k-th live TPC holding SMs k and k + live (SM ids not contiguous per TPC).
struct FakeGpu {
  explicit FakeGpu(std::set<uint32_t> d) : dead(std::move(d)) {}
  std::set<uint32_t> dead;
  uint32_t tpcs = 72;
  uint32_t Bit(uint32_t t) const { return t; }
  std::vector<uint32_t> LiveBits() const {
    std::vector<uint32_t> bits;
    for (uint32_t t = 0; t < tpcs; ++t) {
      if (!dead.contains(t)) bits.push_back(Bit(t));
    }
    return bits;
  }
  std::vector<uint32_t> SmsUsed(const TpcMask& m) const {
    const std::vector<uint32_t> live = LiveBits();
    const uint32_t n = static_cast<uint32_t>(live.size());
    std::vector<uint32_t> sms;
    for (uint32_t k = 0; k < n; ++k) {
      if (m.Disables(live[k])) continue;
      sms.push_back(k);
      sms.push_back(k + n);
    }
    return sms;
  }
  TpcProbeResult Probe() const {
    TpcProbeResult r;
    r.all = SmsUsed(TpcMask{});
    for (uint32_t b : ProbeBits()) r.with_bit_disabled.push_back(SmsUsed(DisableMask({b})));
    return r;
  }
};

TEST(TpcMapTest, DisableMaskSetsTheBitsOfItsWords) {
  EXPECT_TRUE(DisableMask({}).empty());
  EXPECT_EQ(DisableMask({0, 31, 32, 127, 128}).words,
            (std::array<uint32_t, 4>{0x80000001u, 1u, 0, 0x80000000u}));
  EXPECT_EQ(ProbeBits().size(), 128u);
  EXPECT_EQ(ProbeBits()[31], 31u);
}

TEST(TpcMapTest, DerivesLiveBitsAndTheirSmsSkippingFloorsweptOnes) {
  FakeGpu gpu({3, 12, 25, 38, 51, 64});
  absl::StatusOr<TpcMap> map = DeriveTpcMap(gpu.Probe());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ(map->sm_count, 132u);
  ASSERT_EQ(map->live.size(), 66u);
  std::vector<uint32_t> bits;
  for (const LiveTpc& t : map->live) bits.push_back(t.bit);
  EXPECT_EQ(bits, gpu.LiveBits());
  EXPECT_THAT(map->live[0].sms, ElementsAre(0, 66));
  EXPECT_EQ(map->live[3].bit, 4u);  // TPC 3 is floorswept
  EXPECT_EQ(DescribeTpcMap(*map),
            "66 live TPCs (mask bits 0-2, 4-11, 13-24, 26-37, 39-50, 52-63, 65-71), 132 SMs");
}

TEST(TpcMapTest, TheReserveDisablesTheLastLiveBitsAndKeepsOneForTheBe) {
  FakeGpu gpu({70});
  absl::StatusOr<TpcMap> map = DeriveTpcMap(gpu.Probe());
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_TRUE(ReserveMask(*map, 0).empty());
  const TpcMask m = ReserveMask(*map, 2);
  // Live TPCs 69 and 71 (70 is floorswept).
  EXPECT_EQ(m.words, (std::array<uint32_t, 4>{0, 0, (1u << 5) | (1u << 7), 0}));
  EXPECT_THAT(ReservedSms(*map, 2), ElementsAre(69, 70, 140, 141));
  // What the fake GPU runs under the mask: everything but the reserve.
  const std::vector<uint32_t> used = gpu.SmsUsed(m);
  EXPECT_EQ(used.size(), 138u);
  for (uint32_t sm : ReservedSms(*map, 2)) EXPECT_EQ(std::count(used.begin(), used.end(), sm), 0);
  EXPECT_EQ(ReservedTpcs(*map, 1000), 70u);
  EXPECT_EQ(gpu.SmsUsed(ReserveMask(*map, 1000)).size(), 2u);
}

// As an MPS client on the H200 the SM ids are virtual: whichever live bit is disabled, the two
// highest ids vanish. The live bits are found by count, the SMs they hold are unknown.
TEST(TpcMapTest, VirtualSmIdsGiveTheLiveBitsByCount) {
  FakeGpu gpu({3, 12, 25, 38, 51, 64});
  TpcProbeResult probe = gpu.Probe();
  for (auto& used : probe.with_bit_disabled) {
    if (used.size() == 130) {
      used.clear();
      for (uint32_t sm = 0; sm < 130; ++sm) used.push_back(sm);
    }
  }
  absl::StatusOr<TpcMap> map = DeriveTpcMap(probe);
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_FALSE(map->physical_ids);
  ASSERT_EQ(map->live.size(), 66u);
  EXPECT_EQ(map->live[3].bit, 4u);
  EXPECT_TRUE(map->live[3].sms.empty());
  EXPECT_TRUE(ReservedSms(*map, 8).empty());
  EXPECT_EQ(ReserveMask(*map, 2).words, (std::array<uint32_t, 4>{0, 0, (1u << 6) | (1u << 7), 0}));
  EXPECT_THAT(DescribeTpcMap(*map), HasSubstr("132 SMs (virtual SM ids: by count)"));
}

TEST(TpcMapTest, RefusesAProbeThatDoesNotDescribeAWorkingMask) {
  FakeGpu gpu({});
  TpcProbeResult ok = gpu.Probe();
  // The mask changed nothing: no live bit.
  TpcProbeResult ignored = ok;
  for (auto& used : ignored.with_bit_disabled) used = ok.all;
  EXPECT_THAT(std::string(DeriveTpcMap(ignored).status().message()), HasSubstr("no mask bit"));
  // A bit-disabled launch ran nowhere.
  TpcProbeResult nowhere = ok;
  nowhere.with_bit_disabled[5].clear();
  EXPECT_THAT(std::string(DeriveTpcMap(nowhere).status().message()), HasSubstr("ran nowhere"));
  // Two bits claim one SM (bit 100 names no TPC), and the counts do not add up as virtual ids
  // would.
  TpcProbeResult twice = ok;
  twice.with_bit_disabled[100] = twice.with_bit_disabled[0];
  EXPECT_THAT(std::string(DeriveTpcMap(twice).status().message()),
              HasSubstr("73 live bits of 2 SMs do not make the 144 SMs"));
  TpcProbeResult uneven = ok;
  uneven.with_bit_disabled[1] = uneven.with_bit_disabled[0];
  uneven.with_bit_disabled[1].pop_back();
  EXPECT_THAT(std::string(DeriveTpcMap(uneven).status().message()), HasSubstr("removed 3 SMs"));
  // An SM no bit accounts for (a block the probe missed).
  TpcProbeResult missed = ok;
  missed.all.push_back(500);
  for (auto& used : missed.with_bit_disabled) used.push_back(500);
  EXPECT_THAT(std::string(DeriveTpcMap(missed).status().message()), HasSubstr("under no mask bit"));
  // An SM the unmasked launch never used.
  TpcProbeResult unseen = ok;
  unseen.with_bit_disabled[2].push_back(600);
  EXPECT_THAT(std::string(DeriveTpcMap(unseen).status().message()), HasSubstr("unseen unmasked"));
  TpcProbeResult empty;
  EXPECT_FALSE(DeriveTpcMap(empty).ok());
  EXPECT_TRUE(DeriveTpcMap(ok).ok());
}

}  // namespace
}  // namespace missile::pacing
