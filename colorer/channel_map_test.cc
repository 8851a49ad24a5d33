#include "missile/colorer/channel_map.h"

#include <algorithm>
#include <cstdint>
#include <limits>
#include <numeric>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "missile/colorer/channel_set.h"

namespace missile::colorer {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kChunk = 2 * kMiB;

// The reference answer: ChannelOf at every granule of the range (the base-class walk, without
// the early stop, done here independently).
ChannelSet BruteChannels(const ChannelMap& map, uint64_t begin, uint64_t bytes) {
  ChannelSet s;
  if (bytes == 0) return s;
  const uint64_t g = map.granule_bytes();
  for (uint64_t a = begin & ~(g - 1); a < begin + bytes; a += g) s.Add(map.ChannelOf(a));
  return s;
}

// The reference for AlignedBlockChannelSets: every aligned block in [0, span).
std::vector<uint64_t> BruteBlockSets(const ChannelMap& map, uint64_t block, uint64_t span) {
  std::vector<uint64_t> sets;
  for (uint64_t a = 0; a < span; a += block) sets.push_back(BruteChannels(map, a, block).bits());
  std::sort(sets.begin(), sets.end());
  sets.erase(std::unique(sets.begin(), sets.end()), sets.end());
  return sets;
}

std::vector<uint64_t> SortedBits(const std::vector<ChannelSet>& sets) {
  std::vector<uint64_t> bits;
  for (ChannelSet s : sets) bits.push_back(s.bits());
  std::sort(bits.begin(), bits.end());
  return bits;
}

TEST(ChannelSetTest, Basics) {
  ChannelSet s;
  EXPECT_TRUE(s.Empty());
  EXPECT_EQ(s.Lowest(), -1);
  s.Add(3);
  s.Add(63);
  s.Add(0);
  EXPECT_EQ(s.Count(), 3);
  EXPECT_TRUE(s.Contains(63));
  EXPECT_FALSE(s.Contains(64));
  EXPECT_FALSE(s.Contains(-1));
  EXPECT_EQ(s.Lowest(), 0);
  EXPECT_EQ(s.ToString(), "{0,3,63}");
  EXPECT_EQ(s.Indices(), (std::vector<int>{0, 3, 63}));
  EXPECT_EQ(ChannelSet::FirstN(64).Count(), 64);
  EXPECT_EQ(ChannelSet::FirstN(0), ChannelSet());
  EXPECT_TRUE(ChannelSet::Single(3).IsSubsetOf(s));
  EXPECT_FALSE(s.IsSubsetOf(ChannelSet::Single(3)));
  EXPECT_EQ((s & ChannelSet::FirstN(4)).bits(), 0b1001u);
}

TEST(XorChannelMapTest, RejectsBadMasks) {
  EXPECT_EQ(XorChannelMap::Create({}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(XorChannelMap::Create({0x100, 0}).ok());
  EXPECT_FALSE(XorChannelMap::Create({1, 2, 4, 8, 16, 32, 64}).ok());  // 7 masks
  EXPECT_FALSE(XorChannelMap::Create({0x300, 0x500, 0x600}).ok());     // third = XOR
  EXPECT_FALSE(XorChannelMap::Create({0x100, 0x100}).ok());            // duplicate
  EXPECT_TRUE(XorChannelMap::Create({1, 2, 4, 8, 16, 32}).ok());       // 6 masks
  EXPECT_TRUE(XorChannelMap::Create({0x300, 0x500, 0x900}).ok());
}

TEST(XorChannelMapTest, ChannelOfIsMaskParity) {
  auto map = XorChannelMap::Create({0x100, 0x200 | 0x4000});
  ASSERT_TRUE(map.ok()) << map.status();
  EXPECT_EQ((*map)->channel_count(), 4);
  EXPECT_EQ((*map)->granule_bytes(), 0x100u);
  EXPECT_EQ((*map)->ChannelOf(0x0), 0);
  EXPECT_EQ((*map)->ChannelOf(0x100), 1);
  EXPECT_EQ((*map)->ChannelOf(0x200), 2);
  EXPECT_EQ((*map)->ChannelOf(0x4200), 0);  // bits 9 and 14 cancel
  EXPECT_EQ((*map)->ChannelOf(0x4300), 1);
  EXPECT_EQ((*map)->ChannelOf(0x40FF), 2);
}

TEST(XorChannelMapTest, ChannelsOfMatchesBruteForceOnRandomRanges) {
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 40; ++trial) {
    const int n = 1 + static_cast<int>(rng() % 6);
    std::vector<uint64_t> masks;
    while (static_cast<int>(masks.size()) < n) {
      masks.push_back((rng() & 0x3FFFFF) & ~uint64_t{0x7F});  // bits 7..21
      if (!XorChannelMap::Create(masks).ok()) masks.pop_back();
    }
    auto map = XorChannelMap::Create(masks);
    ASSERT_TRUE(map.ok());
    for (int r = 0; r < 50; ++r) {
      const uint64_t begin = rng() % (8 * kMiB);
      const uint64_t bytes = rng() % (r % 2 == 0 ? 4096 : 300000);
      EXPECT_EQ((*map)->ChannelsOf(begin, bytes), BruteChannels(**map, begin, bytes))
          << "begin " << begin << " bytes " << bytes;
      EXPECT_EQ((*map)->ChannelsOf(begin, bytes), (*map)->ChannelMap::ChannelsOf(begin, bytes));
    }
  }
}

TEST(XorChannelMapTest, FineHashSpansEveryChannelPerChunk) {
  // FGPU-like: hashes over bits below 2 MiB, so every 2 MiB chunk touches all channels.
  auto map = XorChannelMap::Create({0x0A100, 0x14200, 0x28400, 0x50800});
  ASSERT_TRUE(map.ok());
  for (uint64_t a = 0; a < 64 * kChunk; a += kChunk) {
    EXPECT_EQ((*map)->ChannelsOf(a, kChunk), (*map)->AllChannels());
  }
  auto sets = (*map)->AlignedBlockChannelSets(kChunk);
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ(sets->size(), 1u);
}

TEST(XorChannelMapTest, CoarseHashMakesChunksClean) {
  auto map = XorChannelMap::Create({kChunk, 2 * kChunk});
  ASSERT_TRUE(map.ok());
  EXPECT_EQ((*map)->ChannelsOf(0, kChunk), ChannelSet::Single(0));
  EXPECT_EQ((*map)->ChannelsOf(3 * kChunk, kChunk), ChannelSet::Single(3));
  EXPECT_EQ((*map)->ChannelsOf(kChunk - 1, 2), ChannelSet::Single(0).With(1));
}

TEST(XorChannelMapTest, AlignedBlockSetsMatchBruteForce) {
  for (const std::vector<uint64_t>& masks :
       {std::vector<uint64_t>{0x0A100, 0x14200, 0x28400}, std::vector<uint64_t>{0x100 | kChunk},
        std::vector<uint64_t>{0x100 | kChunk, 2 * kChunk, 0x800},
        std::vector<uint64_t>{0x20000, 0x100}}) {
    auto map = XorChannelMap::Create(masks);
    ASSERT_TRUE(map.ok());
    for (uint64_t block = 256; block <= 8 * kMiB; block *= 4) {
      auto sets = (*map)->AlignedBlockChannelSets(block);
      ASSERT_TRUE(sets.ok());
      EXPECT_EQ(SortedBits(*sets), BruteBlockSets(**map, block, 16 * kMiB)) << block;
    }
  }
  auto map = XorChannelMap::Create({0x100});
  EXPECT_FALSE((*map)->AlignedBlockChannelSets(3000).ok());
  EXPECT_FALSE((*map)->AlignedBlockChannelSets(0).ok());
}

TEST(XorChannelMapTest, RangesAtTheTopOfTheAddressSpaceAreCut) {
  auto map = XorChannelMap::Create({uint64_t{1} << 63, 0x100});
  ASSERT_TRUE(map.ok());
  constexpr uint64_t kMax = std::numeric_limits<uint64_t>::max();
  EXPECT_EQ((*map)->ChannelsOf(kMax - 0xFF, 1000), (*map)->ChannelsOf(kMax - 0xFF, 0x100));
  EXPECT_EQ((*map)->ChannelsOf(0, kMax), (*map)->AllChannels());
  EXPECT_EQ((*map)->ChannelsOf(5, 0), ChannelSet());
}

TEST(LookupTableChannelMapTest, RejectsBadTables) {
  EXPECT_FALSE(LookupTableChannelMap::Create(10, {}).ok());
  EXPECT_FALSE(LookupTableChannelMap::Create(10, {0, 64}).ok());
  EXPECT_FALSE(LookupTableChannelMap::Create(10, {0, -1}).ok());
  EXPECT_FALSE(LookupTableChannelMap::Create(10, {0, 2}).ok());  // channel 1 never appears
  EXPECT_FALSE(LookupTableChannelMap::Create(64, {0}).ok());
  EXPECT_FALSE(LookupTableChannelMap::Create(-1, {0}).ok());
  EXPECT_TRUE(LookupTableChannelMap::Create(10, {1, 0, 63 - 63}).ok());
}

TEST(LookupTableChannelMapTest, ChannelOfIndexesTheTable) {
  auto map = LookupTableChannelMap::Create(11, {2, 0, 1, 1, 3});
  ASSERT_TRUE(map.ok());
  EXPECT_EQ((*map)->channel_count(), 4);
  EXPECT_EQ((*map)->granule_bytes(), 2048u);
  EXPECT_EQ((*map)->ChannelOf(0), 2);
  EXPECT_EQ((*map)->ChannelOf(2047), 2);
  EXPECT_EQ((*map)->ChannelOf(2048), 0);
  EXPECT_EQ((*map)->ChannelOf(4 * 2048), 3);
  EXPECT_EQ((*map)->ChannelOf(5 * 2048), 2);  // wraps
}

TEST(LookupTableChannelMapTest, ChannelsOfMatchesBruteForce) {
  std::mt19937_64 rng(11);
  for (int trial = 0; trial < 30; ++trial) {
    const int channels = 1 + static_cast<int>(rng() % 12);
    std::vector<int> table(channels + rng() % 40);
    for (size_t i = 0; i < table.size(); ++i) {
      table[i] = i < static_cast<size_t>(channels) ? static_cast<int>(i)
                                                   : static_cast<int>(rng() % channels);
    }
    std::shuffle(table.begin(), table.end(), rng);
    const int shift = 8 + static_cast<int>(rng() % 6);
    auto map = LookupTableChannelMap::Create(shift, table);
    ASSERT_TRUE(map.ok()) << map.status();
    for (int r = 0; r < 40; ++r) {
      const uint64_t begin = rng() % (64 * kMiB);
      const uint64_t bytes = rng() % (uint64_t{table.size() + 3} << shift);
      EXPECT_EQ((*map)->ChannelsOf(begin, bytes), BruteChannels(**map, begin, bytes));
    }
    for (uint64_t block = 64; block <= 4 * kMiB; block *= 2) {
      auto sets = (*map)->AlignedBlockChannelSets(block);
      ASSERT_TRUE(sets.ok());
      // Block channel sets repeat every lcm(table period, block) bytes.
      const uint64_t span = std::lcm(uint64_t{table.size()} << shift, block);
      EXPECT_EQ(SortedBits(*sets), BruteBlockSets(**map, block, span))
          << "block " << block << " shift " << shift << " size " << table.size();
    }
  }
}

TEST(LookupTableChannelMapTest, ArtifactStyleTableAtChunkGranularity) {
  // One table entry per 2 MiB: chunks are clean, one channel each.
  auto map = LookupTableChannelMap::Create(21, {0, 1, 2, 3, 3, 2, 1, 0});
  ASSERT_TRUE(map.ok());
  auto sets = (*map)->AlignedBlockChannelSets(kChunk);
  ASSERT_TRUE(sets.ok());
  EXPECT_EQ(sets->size(), 4u);
  EXPECT_EQ((*map)->ChannelsOf(5 * kChunk, kChunk), ChannelSet::Single(2));
}

TEST(UniformChannelMapTest, RoundRobinAndEveryChunkTouchesAll) {
  EXPECT_FALSE(UniformChannelMap::Create(0).ok());
  EXPECT_FALSE(UniformChannelMap::Create(65).ok());
  auto map = UniformChannelMap::Create(16);
  ASSERT_TRUE(map.ok());
  EXPECT_EQ((*map)->ChannelOf(0), 0);
  EXPECT_EQ((*map)->ChannelOf(256 * 17 + 5), 1);
  EXPECT_EQ((*map)->ChannelsOf(0, 256), ChannelSet::Single(0));
  EXPECT_EQ((*map)->ChannelsOf(255, 2), ChannelSet::Single(0).With(1));
  EXPECT_EQ((*map)->ChannelsOf(256 * 15, 512), ChannelSet::Single(15).With(0));
  EXPECT_EQ((*map)->ChannelsOf(100, 16 * 256), (*map)->AllChannels());
  for (uint64_t a = 0; a < 16 * kChunk; a += kChunk) {
    EXPECT_EQ((*map)->ChannelsOf(a, kChunk), (*map)->AllChannels());
  }
  for (uint64_t block = 64; block <= kChunk; block *= 2) {
    auto sets = (*map)->AlignedBlockChannelSets(block);
    ASSERT_TRUE(sets.ok());
    EXPECT_EQ(SortedBits(*sets), BruteBlockSets(**map, block, 2 * kChunk)) << block;
  }
  auto one = UniformChannelMap::Create(1);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ((*one)->ChannelsOf(12345, 1), ChannelSet::Single(0));
}

// A map that counts ChannelOf calls, to check the base walk's cost.
class CountingMap : public ChannelMap {
 public:
  explicit CountingMap(int channels) : channels_(channels) {}
  int channel_count() const override { return channels_; }
  int ChannelOf(uint64_t phys) const override {
    ++calls;
    return static_cast<int>((phys >> 12) % static_cast<uint64_t>(channels_));
  }
  uint64_t granule_bytes() const override { return 4096; }
  absl::StatusOr<std::vector<ChannelSet>> AlignedBlockChannelSets(uint64_t) const override {
    return absl::UnimplementedError("test map");
  }
  ChannelMapSpec spec() const override { return {}; }
  mutable int calls = 0;

 private:
  int channels_;
};

TEST(ChannelMapTest, BaseWalkStepsOneGranuleAndStopsWhenAllSeen) {
  CountingMap map(64);  // channel c at 4 KiB granule c (mod 64)
  EXPECT_EQ(map.ChannelsOf(0, kChunk), map.AllChannels());
  EXPECT_EQ(map.calls, 64);  // 512 granules, but all channels seen after 64
  map.calls = 0;
  EXPECT_EQ(map.ChannelsOf(5 * 4096 + 7, 10 * 4096 - 7).Count(), 10);
  EXPECT_EQ(map.calls, 10);
  map.calls = 0;
  EXPECT_EQ(map.ChannelsOf(4095, 2).Count(), 2);  // straddles two granules
  EXPECT_EQ(map.calls, 2);
}

TEST(MakeChannelMapTest, SpecRoundTripsAndWrongKindFieldsAreRejected) {
  std::vector<ChannelMapSpec> specs(3);
  specs[0].kind = ChannelMapSpec::Kind::kUniform;
  specs[0].channels = 12;
  specs[1].kind = ChannelMapSpec::Kind::kXor;
  specs[1].masks = {0x300, 0x500 | kChunk};
  specs[2].kind = ChannelMapSpec::Kind::kLookupTable;
  specs[2].granule_shift = 12;
  specs[2].table = {1, 0, 2};
  for (const ChannelMapSpec& spec : specs) {
    auto map = MakeChannelMap(spec);
    ASSERT_TRUE(map.ok()) << map.status();
    EXPECT_EQ((*map)->spec(), spec);
  }
  ChannelMapSpec bad = specs[0];
  bad.masks = {0x100};
  EXPECT_FALSE(MakeChannelMap(bad).ok());
  bad = specs[1];
  bad.table = {0};
  EXPECT_FALSE(MakeChannelMap(bad).ok());
  bad = specs[2];
  bad.masks = {0x100};
  EXPECT_FALSE(MakeChannelMap(bad).ok());

  for (auto kind : {ChannelMapSpec::Kind::kUniform, ChannelMapSpec::Kind::kXor,
                    ChannelMapSpec::Kind::kLookupTable}) {
    auto parsed = ParseKind(KindName(kind));
    ASSERT_TRUE(parsed.ok());
    EXPECT_EQ(*parsed, kind);
  }
  EXPECT_FALSE(ParseKind("hash").ok());
}

}  // namespace
}  // namespace missile::colorer
