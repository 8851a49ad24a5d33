#include "allocation_table.h"

#include <atomic>
#include <cstdint>
#include <random>
#include <thread>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::shim {
namespace {

using Entry = AllocationTable::Entry;

constexpr uint64_t kBase = 0x7f0000000000;

TEST(AllocationTableTest, FindsTheAllocationContainingAnAddress) {
  AllocationTable table;
  ASSERT_TRUE(table.Insert(kBase, 4096, AllocationKind::kSmall, 11).ok());
  ASSERT_TRUE(table.Insert(kBase + 4096, 256, AllocationKind::kSmall, 12).ok());  // adjacent
  ASSERT_TRUE(table.Insert(kBase + (8 << 20), 2 << 20, AllocationKind::kLarge, 13).ok());

  const Entry first{kBase, 4096, AllocationKind::kSmall, 11};
  EXPECT_EQ(table.Find(kBase), first);               // start
  EXPECT_EQ(table.Find(kBase + 100), first);         // middle
  EXPECT_EQ(table.Find(kBase + 4095), first);        // last byte
  EXPECT_EQ(table.Find(kBase + 4096)->cookie, 12u);  // one past the end: the neighbour
  EXPECT_EQ(table.Find(kBase + 4096 + 255)->cookie, 12u);
  EXPECT_EQ(table.Find(kBase + 4096 + 256), std::nullopt);  // one past the end: a gap
  EXPECT_EQ(table.Find(kBase - 1), std::nullopt);
  EXPECT_EQ(table.Find(0), std::nullopt);
  EXPECT_EQ(table.Find(UINT64_MAX), std::nullopt);
  const std::optional<Entry> large = table.Find(kBase + (9 << 20) + 7);
  ASSERT_TRUE(large.has_value());
  EXPECT_EQ(large->base, kBase + (8 << 20));
  EXPECT_EQ(large->size, uint64_t{2} << 20);
  EXPECT_EQ(large->kind, AllocationKind::kLarge);
  EXPECT_EQ(table.Find(kBase + (10 << 20)), std::nullopt);
  EXPECT_EQ(table.size(), 3u);
}

TEST(AllocationTableTest, EraseTakesTheExactBaseOnly) {
  AllocationTable table;
  ASSERT_TRUE(table.Insert(kBase, 4096, AllocationKind::kVmmUser, 5).ok());
  EXPECT_EQ(table.Erase(kBase + 1).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Erase(kBase + 4096).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.Erase(0).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(table.size(), 1u);
  absl::StatusOr<Entry> e = table.Erase(kBase);
  ASSERT_TRUE(e.ok()) << e.status();
  EXPECT_EQ(*e, (Entry{kBase, 4096, AllocationKind::kVmmUser, 5}));
  EXPECT_EQ(table.Erase(kBase).status().code(), absl::StatusCode::kNotFound);  // twice
  EXPECT_EQ(table.Find(kBase), std::nullopt);
  EXPECT_EQ(table.size(), 0u);
}

TEST(AllocationTableTest, RejectsOverlapsAndEmptyRanges) {
  AllocationTable table;
  ASSERT_TRUE(table.Insert(kBase + 1000, 1000, AllocationKind::kSmall, 1).ok());
  auto code = [&](uint64_t base, uint64_t size) {
    return table.Insert(base, size, AllocationKind::kSmall, 2).code();
  };
  EXPECT_EQ(code(kBase + 1000, 1000), absl::StatusCode::kAlreadyExists);  // same
  EXPECT_EQ(code(kBase + 1000, 1), absl::StatusCode::kAlreadyExists);     // same base
  EXPECT_EQ(code(kBase + 1500, 10), absl::StatusCode::kAlreadyExists);    // inside
  EXPECT_EQ(code(kBase + 1999, 10), absl::StatusCode::kAlreadyExists);    // over the end
  EXPECT_EQ(code(kBase + 500, 501), absl::StatusCode::kAlreadyExists);    // over the start
  EXPECT_EQ(code(kBase, 5000), absl::StatusCode::kAlreadyExists);         // around
  EXPECT_EQ(code(kBase + 10, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(UINT64_MAX - 10, 100), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(table.size(), 1u);
  EXPECT_EQ(code(kBase + 500, 500), absl::StatusCode::kOk);   // touches the start
  EXPECT_EQ(code(kBase + 2000, 500), absl::StatusCode::kOk);  // touches the end
  // The end must be representable: the top range stops one byte short of 2^64.
  EXPECT_EQ(code(UINT64_MAX - 10, 10), absl::StatusCode::kOk);
  const std::optional<Entry> top = table.Find(UINT64_MAX - 1);
  ASSERT_TRUE(top.has_value());
  EXPECT_EQ(top->base, UINT64_MAX - 10);
  EXPECT_EQ(table.Find(UINT64_MAX), std::nullopt);

  const std::vector<Entry> all = table.Snapshot();
  ASSERT_EQ(all.size(), 4u);
  for (size_t i = 1; i < all.size(); ++i) EXPECT_LE(all[i - 1].base + all[i - 1].size, all[i].base);
}

// Readers look up entries that stay put while a writer churns others around them: every
// stable entry must always be found, and whatever is found must contain the address.
TEST(AllocationTableTest, ConcurrentReadersWithAWriter) {
  AllocationTable table;
  constexpr int kStable = 64;
  constexpr uint64_t kSlot = 1 << 16;
  for (int i = 0; i < kStable; ++i) {
    ASSERT_TRUE(table.Insert(kBase + 2 * i * kSlot, kSlot, AllocationKind::kLarge, i).ok());
  }
  std::atomic<bool> stop{false};
  std::atomic<int64_t> lookups{0};
  std::vector<std::thread> readers;
  for (int r = 0; r < 3; ++r) {
    readers.emplace_back([&, r] {
      std::mt19937_64 rng(r);
      while (!stop.load(std::memory_order_relaxed)) {
        const int i = static_cast<int>(rng() % kStable);
        const uint64_t addr = kBase + 2 * i * kSlot + rng() % kSlot;
        const std::optional<Entry> e = table.Find(addr);
        ASSERT_TRUE(e.has_value());
        ASSERT_EQ(e->cookie, static_cast<uint64_t>(i));
        const uint64_t gap = kBase + (2 * i + 1) * kSlot + rng() % kSlot;
        if (const std::optional<Entry> g = table.Find(gap); g.has_value()) {
          ASSERT_TRUE(g->Contains(gap));
          ASSERT_EQ(g->kind, AllocationKind::kSmall);
        }
        lookups.fetch_add(1, std::memory_order_relaxed);
      }
    });
  }
  // On a loaded machine the readers may not run at all unless the writer waits for them: every
  // 1000 steps, wait until they have looked something up since the last wait.
  auto readers_ran = [&, seen = int64_t{0}]() mutable {
    while (lookups.load() == seen) std::this_thread::yield();
    seen = lookups.load();
  };
  std::mt19937_64 rng(99);
  for (int step = 0; step < 20000; ++step) {
    if (step % 1000 == 0) readers_ran();
    const int i = static_cast<int>(rng() % kStable);
    const uint64_t base = kBase + (2 * i + 1) * kSlot + (rng() % 16) * 4096;
    if (table.Find(base).has_value()) {
      absl::StatusOr<Entry> e = table.Erase(table.Find(base)->base);
      ASSERT_TRUE(e.ok()) << e.status();
    } else {
      // May overlap an earlier small entry in the same gap; then it is refused.
      const absl::Status s = table.Insert(base, 4096 * (1 + rng() % 3), AllocationKind::kSmall, 0);
      ASSERT_TRUE(s.ok() || s.code() == absl::StatusCode::kAlreadyExists) << s;
    }
  }
  stop = true;
  for (std::thread& t : readers) t.join();
  EXPECT_GT(lookups.load(), 0);
  EXPECT_GE(table.size(), static_cast<size_t>(kStable));
}

}  // namespace
}  // namespace missile::shim
