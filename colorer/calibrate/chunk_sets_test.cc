#include "chunk_sets.h"

#include <algorithm>
#include <set>

#include "gtest/gtest.h"

namespace missile::calibrate {
namespace {

bool SortedDistinctBelow(const ChunkList& v, uint32_t n) {
  return std::is_sorted(v.begin(), v.end()) && std::adjacent_find(v.begin(), v.end()) == v.end() &&
         std::all_of(v.begin(), v.end(), [&](uint32_t x) { return x < n; });
}

TEST(SeededPermutation, IsAPermutationAndReproducible) {
  const std::vector<uint32_t> p = SeededPermutation(1000, 7);
  std::vector<uint32_t> sorted = p;
  std::sort(sorted.begin(), sorted.end());
  for (uint32_t i = 0; i < 1000; ++i) ASSERT_EQ(sorted[i], i);
  EXPECT_EQ(p, SeededPermutation(1000, 7));
  EXPECT_NE(p, SeededPermutation(1000, 8));
  EXPECT_TRUE(SeededPermutation(0, 1).empty());
  EXPECT_EQ(SeededPermutation(1, 1), std::vector<uint32_t>{0});
}

TEST(SeededPermutation, IsPinnedAcrossStandardLibraries) {
  // Our own SplitMix64 + Fisher-Yates: a profile's evidence names the same chunks everywhere.
  EXPECT_EQ(SeededRng(1).Next(), 0x910a2dec89025cc1ULL);
  const std::vector<uint32_t> p = SeededPermutation(8, 1);
  EXPECT_EQ(p, SeededPermutation(8, 1));
  EXPECT_NE(p, (std::vector<uint32_t>{0, 1, 2, 3, 4, 5, 6, 7}));
}

TEST(SeededRng, BelowStaysInRange) {
  SeededRng rng(3);
  std::set<uint64_t> seen;
  for (int i = 0; i < 1000; ++i) {
    const uint64_t x = rng.Below(5);
    ASSERT_LT(x, 5u);
    seen.insert(x);
  }
  EXPECT_EQ(seen.size(), 5u);
  EXPECT_EQ(rng.Below(1), 0u);
}

TEST(RandomSubset, SizeOrderAndEdges) {
  for (uint32_t d : {1u, 2u, 4u, 8u, 16u}) {
    const ChunkList s = RandomSubset(4096, d, 5);
    EXPECT_EQ(s.size(), 4096 / d);
    EXPECT_TRUE(SortedDistinctBelow(s, 4096));
  }
  EXPECT_EQ(RandomSubset(4096, 2, 5), RandomSubset(4096, 2, 5));
  EXPECT_NE(RandomSubset(4096, 2, 5), RandomSubset(4096, 2, 6));
  // Not simply allocation order.
  EXPECT_NE(RandomSubset(4096, 2, 5), EveryKth(4096, 2, 0));
  EXPECT_TRUE(RandomSubset(10, 0, 1).empty());
  EXPECT_TRUE(RandomSubset(10, 11, 1).empty());
}

TEST(EveryKthAndRuns, Basics) {
  EXPECT_EQ(EveryKth(10, 4, 0), (ChunkList{0, 4, 8}));
  EXPECT_EQ(EveryKth(10, 4, 2), (ChunkList{2, 6}));
  EXPECT_TRUE(EveryKth(10, 0, 0).empty());
  EXPECT_EQ(ContiguousRun(10, 7, 5), (ChunkList{7, 8, 9}));
  EXPECT_TRUE(ContiguousRun(10, 10, 5).empty());
  EXPECT_EQ(ContiguousRun(UINT32_MAX, UINT32_MAX - 1, 5).size(), 1u);
}

TEST(SampleChunks, DistinctRandomOrder) {
  const ChunkList s = SampleChunks(4096, 64, 9);
  ASSERT_EQ(s.size(), 64u);
  EXPECT_EQ(std::set<uint32_t>(s.begin(), s.end()).size(), 64u);
  EXPECT_FALSE(std::is_sorted(s.begin(), s.end()));
  EXPECT_EQ(SampleChunks(10, 64, 9).size(), 10u);
}

TEST(BandwidthSets, TheDocumentedSets) {
  const std::vector<NamedSet> sets = BandwidthSets(4096, 1, 64);
  std::vector<std::string> names;
  for (const NamedSet& s : sets) {
    names.push_back(s.name);
    EXPECT_TRUE(SortedDistinctBelow(s.chunks, 4096)) << s.name;
  }
  EXPECT_EQ(names,
            (std::vector<std::string>{"all", "random_1_2", "random_1_4", "random_1_8",
                                      "random_1_16", "every_2", "every_4", "every_8", "every_16",
                                      "run_64_start", "run_64_middle", "run_64_random"}));
  EXPECT_EQ(sets[0].chunks.size(), 4096u);
  EXPECT_EQ(sets[4].chunks.size(), 256u);
  EXPECT_EQ(sets[10].chunks.front(), (4096u - 64) / 2);
  EXPECT_EQ(sets[11].chunks.size(), 64u);
  // Tiny: the run is clipped, empty subsets are dropped.
  for (const NamedSet& s : BandwidthSets(3, 1, 64)) EXPECT_FALSE(s.chunks.empty()) << s.name;
}

TEST(InterferenceSplits, DisjointNonEmptyAndNamed) {
  const std::vector<NamedSplit> splits = InterferenceSplits(4096, {1, 2, 3});
  ASSERT_EQ(splits.size(), 6u);
  EXPECT_EQ(splits[0].name, "random_half_s1");
  EXPECT_EQ(splits[3].name, "even_odd");
  EXPECT_EQ(splits[4].name, "low_high");
  EXPECT_EQ(splits[5].name, "mod4_0_vs_2");
  for (const NamedSplit& s : splits) {
    ASSERT_FALSE(s.victim.empty());
    ASSERT_FALSE(s.aggressor.empty());
    EXPECT_TRUE(SortedDistinctBelow(s.victim, 4096));
    EXPECT_TRUE(SortedDistinctBelow(s.aggressor, 4096));
    std::vector<uint32_t> both;
    std::set_intersection(s.victim.begin(), s.victim.end(), s.aggressor.begin(), s.aggressor.end(),
                          std::back_inserter(both));
    EXPECT_TRUE(both.empty()) << s.name;
  }
  EXPECT_EQ(splits[0].victim.size() + splits[0].aggressor.size(), 4096u);
  EXPECT_NE(splits[0].victim, splits[1].victim);
  EXPECT_EQ(splits[5].victim.size(), 1024u);
  EXPECT_EQ(splits[5].aggressor.front(), 2u);
  // One chunk cannot be split.
  EXPECT_TRUE(InterferenceSplits(1, {1}).empty());
}

}  // namespace
}  // namespace missile::calibrate
