#include "copy_box.h"

#include <random>
#include <vector>

#include "gtest/gtest.h"

namespace missile::shim {
namespace {

// The payload offsets that the parts move, in the order a copy of each part moves them.
std::vector<uint64_t> Covered(const BoxParts& parts, uint64_t width, uint64_t height) {
  std::vector<uint64_t> out;
  for (int i = 0; i < parts.count; ++i) {
    const BoxPart& p = parts.part[i];
    for (uint64_t z = p.z; z < p.z + p.depth; ++z) {
      for (uint64_t y = p.y; y < p.y + p.height; ++y) {
        for (uint64_t x = p.x; x < p.x + p.width; ++x) out.push_back((z * height + y) * width + x);
      }
    }
  }
  return out;
}

void ExpectExactCover(uint64_t w, uint64_t h, uint64_t d, uint64_t begin, uint64_t end) {
  BoxParts parts = SplitBox(w, h, d, begin, end);
  ASSERT_LE(parts.count, 5);
  for (int i = 0; i < parts.count; ++i) {
    const BoxPart& p = parts.part[i];
    ASSERT_GT(p.width * p.height * p.depth, 0u) << "empty part " << i;
    ASSERT_LE(p.x + p.width, w);
    ASSERT_LE(p.y + p.height, h);
    ASSERT_LE(p.z + p.depth, d);
    if (p.height > 1 || p.depth > 1) {
      EXPECT_EQ(p.width, w) << "several rows, but not whole ones";
    }
    if (p.depth > 1) {
      EXPECT_EQ(p.height, h) << "several planes, but not whole ones";
    }
  }
  std::vector<uint64_t> got = Covered(parts, w, h);
  ASSERT_EQ(got.size(), end - begin)
      << w << "x" << h << "x" << d << " [" << begin << "," << end << ")";
  for (uint64_t i = 0; i < got.size(); ++i) {
    ASSERT_EQ(got[i], begin + i) << w << "x" << h << "x" << d << " [" << begin << "," << end << ")";
  }
}

TEST(CopyBoxTest, TheWholeBoxIsOnePart) {
  BoxParts parts = SplitBox(100, 7, 3, 0, 2100);
  ASSERT_EQ(parts.count, 1);
  EXPECT_EQ(parts.part[0].width, 100u);
  EXPECT_EQ(parts.part[0].height, 7u);
  EXPECT_EQ(parts.part[0].depth, 3u);
}

TEST(CopyBoxTest, AChunkInsideOneRowIsOnePartialRow) {
  BoxParts parts = SplitBox(100, 7, 1, 205, 290);
  ASSERT_EQ(parts.count, 1);
  EXPECT_EQ(parts.part[0].x, 5u);
  EXPECT_EQ(parts.part[0].y, 2u);
  EXPECT_EQ(parts.part[0].width, 85u);
}

TEST(CopyBoxTest, ChunkAcrossPlanesTakesFiveParts) {
  // From the middle of row 1 of plane 0 to the middle of row 2 of plane 3.
  BoxParts parts = SplitBox(10, 4, 5, 15, 3 * 40 + 25);
  ASSERT_EQ(parts.count, 5);
  EXPECT_EQ(parts.part[2].z, 1u);
  EXPECT_EQ(parts.part[2].depth, 2u);
  ExpectExactCover(10, 4, 5, 15, 3 * 40 + 25);
}

TEST(CopyBoxTest, EveryChunkingOfSmallBoxesCoversItExactly) {
  for (uint64_t w : {1, 3, 8}) {
    for (uint64_t h : {1, 2, 5}) {
      for (uint64_t d : {1, 3}) {
        const uint64_t all = w * h * d;
        for (uint64_t chunk = 1; chunk <= all; ++chunk) {
          for (uint64_t begin = 0; begin < all; begin += chunk) {
            ExpectExactCover(w, h, d, begin, std::min(all, begin + chunk));
            if (HasFatalFailure()) return;
          }
        }
      }
    }
  }
}

TEST(CopyBoxTest, RandomRangesOfLargerBoxes) {
  std::mt19937_64 rng(7);
  for (int i = 0; i < 300; ++i) {
    const uint64_t w = 1 + rng() % 300, h = 1 + rng() % 20, d = 1 + rng() % 6;
    const uint64_t all = w * h * d;
    uint64_t a = rng() % all, b = rng() % all;
    if (a > b) std::swap(a, b);
    ExpectExactCover(w, h, d, a, b + 1);
    if (HasFatalFailure()) return;
  }
}

TEST(CopyBoxTest, EmptyBoxesAndRangesHaveNoParts) {
  EXPECT_EQ(SplitBox(0, 4, 1, 0, 0).count, 0);
  EXPECT_EQ(SplitBox(8, 0, 1, 0, 0).count, 0);
  EXPECT_EQ(SplitBox(8, 4, 2, 17, 17).count, 0);
}

TEST(CopyBoxTest, PayloadOverflowIsReported) {
  EXPECT_EQ(BoxBytes(3, 5, 7), 105u);
  EXPECT_EQ(BoxBytes(uint64_t{1} << 40, uint64_t{1} << 30, 1), std::nullopt);
  EXPECT_EQ(BoxBytes(uint64_t{1} << 30, 2, uint64_t{1} << 40), std::nullopt);
}

}  // namespace
}  // namespace missile::shim
