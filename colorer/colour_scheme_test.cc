#include "missile/colorer/colour_scheme.h"

#include <cstdint>
#include <memory>
#include <vector>

#include "gtest/gtest.h"
#include "missile/colorer/channel_map.h"

namespace missile::colorer {
namespace {

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kChunk = 2 * kMiB;

std::shared_ptr<const ChannelMap> Xor(std::vector<uint64_t> masks) {
  auto map = XorChannelMap::Create(std::move(masks));
  EXPECT_TRUE(map.ok()) << map.status();
  return std::shared_ptr<const ChannelMap>(*std::move(map));
}

std::shared_ptr<const ChannelMap> Table(int shift, std::vector<int> table) {
  auto map = LookupTableChannelMap::Create(shift, std::move(table));
  EXPECT_TRUE(map.ok()) << map.status();
  return std::shared_ptr<const ChannelMap>(*std::move(map));
}

std::shared_ptr<const ChannelMap> Uniform(int channels) {
  auto map = UniformChannelMap::Create(channels);
  EXPECT_TRUE(map.ok()) << map.status();
  return std::shared_ptr<const ChannelMap>(*std::move(map));
}

TEST(ColourSchemeTest, EvenSplitValidates) {
  EXPECT_FALSE(ColourScheme::EvenSplit(nullptr, 1).ok());
  EXPECT_FALSE(ColourScheme::EvenSplit(Uniform(8), 0).ok());
  EXPECT_FALSE(ColourScheme::EvenSplit(Uniform(8), 3).ok());
  EXPECT_FALSE(ColourScheme::EvenSplit(Uniform(8), 16).ok());
  EXPECT_TRUE(ColourScheme::EvenSplit(Uniform(8), 8).ok());
  EXPECT_TRUE(ColourScheme::EvenSplit(Uniform(64), 1).ok());
}

TEST(ColourSchemeTest, EvenSplitGroupsConsecutiveChannels) {
  auto scheme = ColourScheme::EvenSplit(Uniform(8), 4);
  ASSERT_TRUE(scheme.ok());
  EXPECT_EQ(scheme->colour_count(), 4);
  EXPECT_EQ(scheme->ChannelsOfColour(0), ChannelSet::FromBits(0b11));
  EXPECT_EQ(scheme->ChannelsOfColour(3), ChannelSet::FromBits(0b11000000));
  EXPECT_EQ(scheme->ChannelsOfColour(4), ChannelSet());
  EXPECT_EQ(scheme->ColourOfChannel(5), 2);
  EXPECT_EQ(scheme->ColourOfChannel(8), -1);
  EXPECT_EQ(scheme->ColoursOfChannels(ChannelSet::FromBits(0b10000001)),
            ColourSet::Single(0).With(3));
}

TEST(ColourSchemeTest, FromGroupsValidates) {
  auto map = Uniform(4);
  EXPECT_FALSE(ColourScheme::FromGroups(map, {}).ok());
  EXPECT_FALSE(ColourScheme::FromGroups(map, {ChannelSet::FromBits(0b0011), ChannelSet()}).ok());
  EXPECT_FALSE(
      ColourScheme::FromGroups(map, {ChannelSet::FromBits(0b0011), ChannelSet::FromBits(0b1110)})
          .ok());                                                                     // overlap
  EXPECT_FALSE(ColourScheme::FromGroups(map, {ChannelSet::FromBits(0b0011)}).ok());   // gap
  EXPECT_FALSE(ColourScheme::FromGroups(map, {ChannelSet::FromBits(0b11111)}).ok());  // extra
  auto scheme =
      ColourScheme::FromGroups(map, {ChannelSet::FromBits(0b0101), ChannelSet::FromBits(0b1010)});
  ASSERT_TRUE(scheme.ok());
  EXPECT_EQ(scheme->ColourOfChannel(2), 0);
  EXPECT_EQ(scheme->ColourOfChannel(3), 1);
}

TEST(ColourSchemeTest, ChunkColoursAndCleanliness) {
  // Channel bits from address bits 21 and 22: each 2 MiB chunk sits on one channel.
  auto scheme = ColourScheme::EvenSplit(Xor({kChunk, 2 * kChunk}), 2);
  ASSERT_TRUE(scheme.ok());
  EXPECT_EQ(scheme->ColoursOf(0, kChunk), ColourSet::Single(0));
  EXPECT_EQ(scheme->ColoursOf(kChunk, kChunk), ColourSet::Single(0));      // channel 1
  EXPECT_EQ(scheme->ColoursOf(2 * kChunk, kChunk), ColourSet::Single(1));  // channel 2
  EXPECT_TRUE(scheme->IsClean(3 * kChunk, kChunk));
  EXPECT_FALSE(scheme->IsClean(kChunk, 2 * kChunk));  // channels 1 and 2
  EXPECT_FALSE(scheme->IsClean(0, 0));
}

TEST(ColourSchemeTest, DistinguishableColours) {
  // The H200 as measured: one colour at 2 MiB.
  EXPECT_EQ(*DistinguishableColours(*Uniform(64), kChunk), 1);
  EXPECT_EQ(*DistinguishableColours(*Uniform(1), kChunk), 1);
  // Fine XOR hash (all masks below 2 MiB): one colour at 2 MiB, more at 256 bytes.
  auto fine = Xor({0x0A100, 0x14200, 0x28400});
  EXPECT_EQ(*DistinguishableColours(*fine, kChunk), 1);
  EXPECT_EQ(*DistinguishableColours(*fine, 256), 8);
  EXPECT_EQ(*DistinguishableColours(*fine, 1024), 2);  // bits 8, 9 vary: channel bits 0, 1
  // Coarse XOR: four colours at 2 MiB, two at 4 MiB, one at 8 MiB.
  auto coarse = Xor({kChunk, 2 * kChunk});
  EXPECT_EQ(*DistinguishableColours(*coarse, kChunk), 4);
  EXPECT_EQ(*DistinguishableColours(*coarse, 2 * kChunk), 2);
  EXPECT_EQ(*DistinguishableColours(*coarse, 4 * kChunk), 1);
  // Mixed: channel bit 0 varies inside a chunk, bit 1 does not.
  EXPECT_EQ(*DistinguishableColours(*Xor({0x100 | kChunk, 2 * kChunk}), kChunk), 2);
  // Tables: one entry per chunk; and overlapping windows that chain all channels together.
  EXPECT_EQ(*DistinguishableColours(*Table(21, {0, 1, 2, 3}), kChunk), 4);
  EXPECT_EQ(*DistinguishableColours(*Table(21, {0, 1, 2, 3}), 2 * kChunk), 2);
  EXPECT_EQ(*DistinguishableColours(*Table(20, {0, 1, 2}), kChunk), 1);  // {0,1},{2,0},{1,2}
  EXPECT_FALSE(DistinguishableColours(*Uniform(4), 3 * kMiB).ok());
}

TEST(ColourSchemeTest, ForGranularityMakesEveryChunkClean) {
  auto map = Xor({0x100 | kChunk, 2 * kChunk, 0x800 | 4 * kChunk});
  auto scheme = ColourScheme::ForGranularity(map, kChunk);
  ASSERT_TRUE(scheme.ok());
  EXPECT_EQ(scheme->colour_count(), 2);  // channel bits 0 and 2 vary inside a chunk
  for (uint64_t a = 0; a < 64 * kChunk; a += kChunk) {
    EXPECT_TRUE(scheme->IsClean(a, kChunk)) << a;
  }
  EXPECT_EQ(scheme->ChannelsOfColour(0), ChannelSet::FromBits(0b00110011));
  auto one = ColourScheme::ForGranularity(Uniform(16), kChunk);
  ASSERT_TRUE(one.ok());
  EXPECT_EQ(one->colour_count(), 1);
  EXPECT_EQ(one->ChannelsOfColour(0), ChannelSet::FirstN(16));
}

}  // namespace
}  // namespace missile::colorer
