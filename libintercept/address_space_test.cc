#include "address_space.h"

#include <cstdint>
#include <random>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::shim {
namespace {

using ::testing::ElementsAre;

constexpr uint64_t kG = kChunkGranule;
// 2 MiB-aligned but not 4 MiB-aligned, so alignment has to do real work.
constexpr uint64_t kBase = 0x7f0000200000;

AddressSpace Make(uint64_t granules, uint64_t base = kBase) {
  absl::StatusOr<AddressSpace> as = AddressSpace::Create(base, granules * kG);
  EXPECT_TRUE(as.ok()) << as.status();
  return *std::move(as);
}

uint64_t Alloc(AddressSpace& as, uint64_t granules, uint64_t alignment = 0) {
  absl::StatusOr<uint64_t> a = as.Allocate(granules * kG, alignment);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.value_or(0);
}

TEST(AddressSpaceTest, CreateRejectsMalformedRanges) {
  EXPECT_EQ(AddressSpace::Create(kBase, 0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddressSpace::Create(kBase + 4096, kG).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddressSpace::Create(kBase, kG + 4096).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddressSpace::Create(kBase, kG, 3 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(AddressSpace::Create(UINT64_MAX - kG + 1, kG).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_TRUE(AddressSpace::Create(UINT64_MAX - 2 * kG + 1, kG).ok());
}

TEST(AddressSpaceTest, FreshSpaceIsOneFreeRange) {
  AddressSpace as = Make(8);
  EXPECT_EQ(as.free_bytes(), 8 * kG);
  EXPECT_EQ(as.largest_free(), 8 * kG);
  EXPECT_THAT(as.FreeRanges(), ElementsAre(AddressSpace::Range{kBase, 8 * kG}));
}

TEST(AddressSpaceTest, RejectsBadSizesAndAlignments) {
  AddressSpace as = Make(8);
  EXPECT_EQ(as.Allocate(0).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(as.Allocate(kG / 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(as.Allocate(3 * kG / 2).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(as.Allocate(kG, 3 * kG).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(as.free_bytes(), 8 * kG);
}

TEST(AddressSpaceTest, FirstFitTakesTheLowestHoleNotTheBestOne) {
  AddressSpace as = Make(16);
  const uint64_t a = Alloc(as, 1);
  const uint64_t b = Alloc(as, 3);
  const uint64_t c = Alloc(as, 1);
  const uint64_t d = Alloc(as, 2);
  const uint64_t e = Alloc(as, 1);
  EXPECT_EQ(a, kBase);
  EXPECT_EQ(b, kBase + kG);
  EXPECT_EQ(c, kBase + 4 * kG);
  EXPECT_EQ(d, kBase + 5 * kG);
  EXPECT_EQ(e, kBase + 7 * kG);
  ASSERT_TRUE(as.Free(b).ok());  // a 3-granule hole at +1
  ASSERT_TRUE(as.Free(d).ok());  // a 2-granule hole at +5
  // Best fit would pick the exact 2-granule hole; first fit takes the lower one.
  EXPECT_EQ(Alloc(as, 2), kBase + kG);
  EXPECT_EQ(Alloc(as, 1), kBase + 3 * kG);  // the rest of that hole
  EXPECT_EQ(Alloc(as, 2), kBase + 5 * kG);
  EXPECT_EQ(Alloc(as, 8), kBase + 8 * kG);  // the tail
  EXPECT_EQ(as.free_bytes(), 0u);
  EXPECT_EQ(as.largest_free(), 0u);
}

TEST(AddressSpaceTest, AlignmentLeavesThePaddingFree) {
  AddressSpace as = Make(32);                   // kBase is 2 MiB past an 8 MiB boundary
  const uint64_t a = Alloc(as, 2, 8 * kG / 2);  // 8 MiB
  EXPECT_EQ(a % (8 << 20), 0u);
  EXPECT_EQ(a, kBase + 3 * kG);
  EXPECT_THAT(as.FreeRanges(), ElementsAre(AddressSpace::Range{kBase, 3 * kG},
                                           AddressSpace::Range{kBase + 5 * kG, 27 * kG}));
  // The padding is still usable by unaligned requests.
  EXPECT_EQ(Alloc(as, 1), kBase);
  // An alignment below the granule means the granule.
  EXPECT_EQ(Alloc(as, 1, 256), kBase + kG);
  // A 32 MiB alignment skips the misaligned holes.
  const uint64_t big = Alloc(as, 1, 32 << 20);
  EXPECT_EQ(big % (32 << 20), 0u);
  EXPECT_GT(big, kBase + 5 * kG);
  ASSERT_TRUE(as.Free(a).ok());
  ASSERT_TRUE(as.Free(big).ok());
  EXPECT_EQ(as.free_bytes(), 30 * kG);
}

TEST(AddressSpaceTest, AlignmentLargerThanAnyFitIsExhausted) {
  AddressSpace as = Make(8);
  EXPECT_EQ(as.Allocate(kG, uint64_t{1} << 63).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(as.free_bytes(), 8 * kG);
}

TEST(AddressSpaceTest, FragmentationThenCoalescing) {
  AddressSpace as = Make(16);
  std::vector<uint64_t> addrs;
  for (int i = 0; i < 16; ++i) addrs.push_back(Alloc(as, 1));
  EXPECT_EQ(as.Allocate(kG).status().code(), absl::StatusCode::kResourceExhausted);
  for (int i = 0; i < 16; i += 2) ASSERT_TRUE(as.Free(addrs[i]).ok());
  EXPECT_EQ(as.free_bytes(), 8 * kG);
  EXPECT_EQ(as.largest_free(), kG);
  EXPECT_EQ(as.num_free_ranges(), 8u);
  // 8 granules are free but no two are adjacent.
  EXPECT_EQ(as.Allocate(2 * kG).status().code(), absl::StatusCode::kResourceExhausted);

  // Freeing 5 merges the holes at 4 and 6 into one run of three.
  ASSERT_TRUE(as.Free(addrs[5]).ok());
  EXPECT_EQ(as.num_free_ranges(), 7u);
  EXPECT_EQ(as.largest_free(), 3 * kG);
  EXPECT_EQ(Alloc(as, 3), addrs[4]);
  ASSERT_TRUE(as.Free(addrs[4]).ok());

  for (int i : {15, 1, 9, 3, 13, 7, 11}) ASSERT_TRUE(as.Free(addrs[i]).ok());
  EXPECT_THAT(as.FreeRanges(), ElementsAre(AddressSpace::Range{kBase, 16 * kG}));
  EXPECT_EQ(as.largest_free(), 16 * kG);
  EXPECT_EQ(as.num_allocations(), 0u);
}

TEST(AddressSpaceTest, ExhaustAndRecover) {
  AddressSpace as = Make(4);
  EXPECT_EQ(as.Allocate(5 * kG).status().code(), absl::StatusCode::kResourceExhausted);
  const uint64_t all = Alloc(as, 4);
  EXPECT_EQ(as.Allocate(kG).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(as.FreeRanges().empty());
  ASSERT_TRUE(as.Free(all).ok());
  EXPECT_EQ(Alloc(as, 4), kBase);
}

TEST(AddressSpaceTest, DoubleFreeAndUnknownAddressesChangeNothing) {
  AddressSpace as = Make(8);
  const uint64_t a = Alloc(as, 2);
  const uint64_t b = Alloc(as, 2);
  ASSERT_TRUE(as.Free(a).ok());
  const auto before = as.FreeRanges();
  EXPECT_EQ(as.Free(a).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(as.Free(kBase - kG).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(as.Free(kBase + 100 * kG).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(as.Free(b + kG).code(), absl::StatusCode::kInvalidArgument);  // inside b
  EXPECT_EQ(as.Free(b + 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(as.FreeRanges(), before);
  EXPECT_EQ(as.free_bytes(), 6 * kG);
  EXPECT_EQ(as.num_allocations(), 1u);
  EXPECT_TRUE(as.Free(b).ok());
  EXPECT_EQ(as.free_bytes(), 8 * kG);
}

// Random allocations and frees against a granule bitmap doing first fit the slow way: every
// address must match exactly, and free runs must stay maximal.
TEST(AddressSpaceTest, MatchesAReferenceFirstFit) {
  constexpr uint64_t kGranules = 256;
  AddressSpace as = Make(kGranules);
  std::vector<bool> used(kGranules, false);
  std::vector<std::pair<uint64_t, uint64_t>> live;  // (granule index, count)
  std::mt19937_64 rng(42);

  auto reference_fit = [&](uint64_t n, uint64_t align_granules) -> int64_t {
    for (uint64_t i = 0; i + n <= kGranules; ++i) {
      if (((kBase / kG) + i) % align_granules != 0) continue;
      bool ok = true;
      for (uint64_t j = i; j < i + n && ok; ++j) ok = !used[j];
      if (ok) return static_cast<int64_t>(i);
    }
    return -1;
  };

  for (int step = 0; step < 20000; ++step) {
    if (live.empty() || rng() % 100 < 55) {
      const uint64_t n = 1 + rng() % (rng() % 4 == 0 ? 32 : 4);
      const uint64_t align_granules = uint64_t{1} << (rng() % 8 == 0 ? rng() % 5 : 0);
      const int64_t expect = reference_fit(n, align_granules);
      absl::StatusOr<uint64_t> got = as.Allocate(n * kG, align_granules * kG);
      if (expect < 0) {
        ASSERT_EQ(got.status().code(), absl::StatusCode::kResourceExhausted) << step;
        continue;
      }
      ASSERT_TRUE(got.ok()) << step << ": " << got.status();
      ASSERT_EQ(*got, kBase + static_cast<uint64_t>(expect) * kG) << step;
      for (uint64_t j = 0; j < n; ++j) used[expect + j] = true;
      live.emplace_back(expect, n);
    } else {
      const size_t k = rng() % live.size();
      const auto [index, n] = live[k];
      live[k] = live.back();
      live.pop_back();
      ASSERT_TRUE(as.Free(kBase + index * kG).ok()) << step;
      for (uint64_t j = 0; j < n; ++j) used[index + j] = false;
    }
    if (step % 97 == 0) {
      uint64_t free_granules = 0;
      uint64_t largest = 0, run = 0;
      for (bool u : used) {
        run = u ? 0 : run + 1;
        free_granules += !u;
        largest = std::max(largest, run);
      }
      ASSERT_EQ(as.free_bytes(), free_granules * kG);
      ASSERT_EQ(as.largest_free(), largest * kG);
      const auto ranges = as.FreeRanges();
      for (size_t i = 1; i < ranges.size(); ++i) {
        ASSERT_LT(ranges[i - 1].base + ranges[i - 1].size, ranges[i].base) << "not coalesced";
      }
    }
  }
}

}  // namespace
}  // namespace missile::shim
