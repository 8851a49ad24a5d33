#include "small_allocator.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <memory>
#include <random>
#include <set>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::shim {
namespace {

using ::testing::ElementsAre;
using ::testing::UnorderedElementsAre;

constexpr uint64_t kChunk = uint64_t{2} << 20;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kBase = 0x7f0000000000;

std::unique_ptr<SmallAllocator> Make(SmallAllocatorOptions options = {}) {
  absl::StatusOr<std::unique_ptr<SmallAllocator>> a = SmallAllocator::Create(options);
  EXPECT_TRUE(a.ok()) << a.status();
  return a.ok() ? *std::move(a) : nullptr;
}

// Allocates from held chunks only; fails the test if a chunk is needed.
SmallAllocation Alloc(SmallAllocator& a, uint64_t bytes, uint64_t alignment = 0) {
  absl::StatusOr<std::optional<SmallAllocation>> r = a.TryAllocate(bytes, alignment);
  EXPECT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r.ok() && r->has_value()) << "needs a chunk";
  return r.ok() && r->has_value() ? **r : SmallAllocation{0, 0, 0};
}

bool NeedsChunk(SmallAllocator& a, uint64_t bytes, uint64_t alignment = 0) {
  absl::StatusOr<std::optional<SmallAllocation>> r = a.TryAllocate(bytes, alignment);
  return r.ok() && !r->has_value();
}

TEST(SmallAllocatorTest, CreateRejectsBadOptions) {
  EXPECT_FALSE(SmallAllocator::Create({.chunk_size = 3 * kMiB}).ok());
  EXPECT_FALSE(SmallAllocator::Create({.chunk_size = 128}).ok());
  EXPECT_FALSE(SmallAllocator::Create({.max_small_bytes = 4 * kMiB}).ok());
  EXPECT_FALSE(SmallAllocator::Create({.max_small_bytes = 100}).ok());
  EXPECT_TRUE(SmallAllocator::Create({.max_small_bytes = kChunk}).ok());
}

TEST(SmallAllocatorTest, SignalsThatItNeedsAChunk) {
  auto a = Make();
  EXPECT_TRUE(NeedsChunk(*a, 256));
  absl::StatusOr<SmallAllocation> first = a->AddChunkAndAllocate(kBase, kChunk, 1000);
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->chunk_base, kBase);
  EXPECT_EQ(first->address, kBase);
  EXPECT_EQ(first->size, 1024u);
  // The chunk now serves requests until it is full.
  EXPECT_EQ(Alloc(*a, kMiB).chunk_base, kBase);
  EXPECT_TRUE(NeedsChunk(*a, kMiB));
  EXPECT_EQ(Alloc(*a, kMiB - 1024).chunk_base, kBase);
  EXPECT_TRUE(NeedsChunk(*a, 1));
  ASSERT_TRUE(a->AddChunk(kBase + kChunk, kChunk).ok());
  EXPECT_EQ(Alloc(*a, 1).chunk_base, kBase + kChunk);
  const SmallAllocatorStats s = a->stats();
  EXPECT_EQ(s.chunks_held, 2u);
  EXPECT_EQ(s.live_allocations, 4u);
  EXPECT_EQ(s.bytes_in_use, kChunk + 256);
  EXPECT_TRUE(a->CheckInvariants().ok()) << a->CheckInvariants();
}

TEST(SmallAllocatorTest, RejectsRequestsItNeverServes) {
  auto a = Make();
  ASSERT_TRUE(a->AddChunk(kBase, kChunk).ok());
  auto code = [&](uint64_t bytes, uint64_t alignment) {
    return a->TryAllocate(bytes, alignment).status().code();
  };
  EXPECT_EQ(code(0, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(kMiB + 1, 0), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(256, 384), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(256, 2 * kChunk), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(code(kMiB, 0), absl::StatusCode::kOk);
  // A bad request next to a good chunk leaves the chunk with the caller.
  EXPECT_EQ(a->AddChunkAndAllocate(kBase + kChunk, kChunk, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(a->Owns(kBase + kChunk));
}

TEST(SmallAllocatorTest, RejectsBadChunks) {
  auto a = Make();
  EXPECT_EQ(a->AddChunk(kBase + 4096, kChunk).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->AddChunk(kBase, kMiB).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(a->AddChunk(UINT64_MAX - kChunk + 1, kChunk).code(),
            absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(a->AddChunk(kBase, kChunk).ok());
  EXPECT_EQ(a->AddChunk(kBase, kChunk).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(a->AddChunkAndAllocate(kBase, kChunk, 256).status().code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_EQ(a->stats().chunks_held, 1u);
  EXPECT_EQ(a->stats().live_allocations, 0u);
}

TEST(SmallAllocatorTest, EverySizeIsAlignedTo256) {
  auto a = Make();
  ASSERT_TRUE(a->AddChunk(kBase, kChunk).ok());
  uint64_t total = 0;
  for (uint64_t bytes : {1, 7, 255, 256, 257, 1000, 4095, 65537, 3}) {
    const SmallAllocation s = Alloc(*a, bytes);
    EXPECT_EQ(s.address % 256, 0u) << bytes;
    EXPECT_EQ(s.size, (bytes + 255) / 256 * 256) << bytes;
    total += s.size;
  }
  EXPECT_EQ(a->stats().bytes_in_use, total);
  EXPECT_TRUE(a->CheckInvariants().ok()) << a->CheckInvariants();
}

TEST(SmallAllocatorTest, HonoursLargeAlignments) {
  auto a = Make({.max_small_bytes = kChunk});
  ASSERT_TRUE(a->AddChunk(kBase, kChunk).ok());
  ASSERT_TRUE(a->AddChunk(kBase + kChunk, kChunk).ok());
  Alloc(*a, 256);  // misalign the free space
  for (uint64_t alignment : {uint64_t{512}, uint64_t{4096}, uint64_t{65536}, kMiB}) {
    const SmallAllocation s = Alloc(*a, 300, alignment);
    EXPECT_EQ(s.address % alignment, 0u) << alignment;
    EXPECT_TRUE(a->Owns(s.address));
  }
  // The whole-chunk alignment needs a chunk with no allocation at its base.
  const SmallAllocation whole = Alloc(*a, 256, kChunk);
  EXPECT_EQ(whole.address % kChunk, 0u);
  EXPECT_TRUE(NeedsChunk(*a, 256, kChunk));
  EXPECT_TRUE(a->CheckInvariants().ok()) << a->CheckInvariants();
}

TEST(SmallAllocatorTest, BestFitPrefersTheTightestHole) {
  auto a = Make();
  ASSERT_TRUE(a->AddChunk(kBase, kChunk).ok());
  const SmallAllocation s1 = Alloc(*a, 4096);
  Alloc(*a, 256);
  const SmallAllocation s3 = Alloc(*a, 1024);
  Alloc(*a, 256);
  ASSERT_TRUE(a->Free(s1.address).ok());  // 4 KiB hole
  ASSERT_TRUE(a->Free(s3.address).ok());  // 1 KiB hole
  EXPECT_EQ(Alloc(*a, 1000).address, s3.address);
  EXPECT_EQ(Alloc(*a, 2000).address, s1.address);
}

TEST(SmallAllocatorTest, FreeErrorsChangeNothing) {
  auto a = Make();
  absl::StatusOr<SmallAllocation> s = a->AddChunkAndAllocate(kBase, kChunk, 4096);
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(a->Free(s->address + 256).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a->Free(kBase + kChunk).status().code(), absl::StatusCode::kNotFound);
  absl::StatusOr<SmallFreeResult> f = a->Free(s->address);
  ASSERT_TRUE(f.ok());
  EXPECT_EQ(f->chunk_base, kBase);
  EXPECT_EQ(f->size, 4096u);
  EXPECT_TRUE(f->chunk_empty);
  EXPECT_EQ(a->Free(s->address).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(a->stats().bytes_in_use, 0u);
  EXPECT_TRUE(a->CheckInvariants().ok()) << a->CheckInvariants();
}

TEST(SmallAllocatorTest, EmptyChunksBeyondTheSpareAreReleasable) {
  auto a = Make();  // spare_chunks = 1
  std::vector<SmallAllocation> live;
  for (uint64_t c = 0; c < 3; ++c) {
    absl::StatusOr<SmallAllocation> s = a->AddChunkAndAllocate(kBase + c * kChunk, kChunk, kMiB);
    ASSERT_TRUE(s.ok());
    live.push_back(*s);
    live.push_back(Alloc(*a, kMiB));
    EXPECT_EQ(live.back().chunk_base, kBase + c * kChunk);
  }
  EXPECT_TRUE(a->TakeReleasableChunks().empty());
  // Chunk 1 empties after its second free, not its first.
  absl::StatusOr<SmallFreeResult> f = a->Free(live[2].address);
  ASSERT_TRUE(f.ok());
  EXPECT_FALSE(f->chunk_empty);
  f = a->Free(live[3].address);
  ASSERT_TRUE(f.ok());
  EXPECT_TRUE(f->chunk_empty);
  EXPECT_EQ(f->chunk_base, kBase + kChunk);
  EXPECT_TRUE(a->TakeReleasableChunks().empty()) << "one empty chunk is the spare";
  for (int i : {0, 1, 4, 5}) ASSERT_TRUE(a->Free(live[i].address).ok());
  EXPECT_EQ(a->stats().empty_chunks, 3u);
  // The highest addresses go first; one spare stays.
  EXPECT_THAT(a->TakeReleasableChunks(), ElementsAre(kBase + 2 * kChunk, kBase + kChunk));
  EXPECT_EQ(a->stats().chunks_held, 1u);
  EXPECT_TRUE(a->Owns(kBase));
  EXPECT_FALSE(a->Owns(kBase + kChunk));
  // The spare serves the next request without a new chunk.
  EXPECT_EQ(Alloc(*a, 256).chunk_base, kBase);
  EXPECT_TRUE(a->CheckInvariants().ok()) << a->CheckInvariants();
}

TEST(SmallAllocatorTest, NoSpareReleasesEveryEmptyChunk) {
  auto a = Make({.spare_chunks = 0});
  ASSERT_TRUE(a->AddChunk(kBase, kChunk).ok());
  EXPECT_THAT(a->TakeReleasableChunks(), ElementsAre(kBase));
  EXPECT_EQ(a->stats().chunks_held, 0u);
  EXPECT_TRUE(NeedsChunk(*a, 256));
}

TEST(SmallAllocatorTest, AdjacentChunksDoNotMerge) {
  auto a = Make({.max_small_bytes = kChunk, .spare_chunks = 0});
  ASSERT_TRUE(a->AddChunk(kBase, kChunk).ok());
  ASSERT_TRUE(a->AddChunk(kBase + kChunk, kChunk).ok());
  // Leave the top of chunk 0 and the bottom of chunk 1 free: adjacent in addresses.
  const SmallAllocation low = Alloc(*a, kChunk - kMiB, kChunk);
  EXPECT_EQ(low.address, kBase);
  const SmallAllocation high = Alloc(*a, kMiB, kMiB);
  EXPECT_EQ(high.address, kBase + kMiB);  // best fit: the exact 1 MiB hole in chunk 0
  ASSERT_TRUE(a->Free(high.address).ok());
  EXPECT_EQ(a->stats().free_runs, 2u);  // chunk 0's top, chunk 1 whole, not merged
  // A request straddling the two chunks never fits.
  const SmallAllocation in1 = Alloc(*a, kChunk - kMiB / 2);
  EXPECT_EQ(in1.chunk_base, kBase + kChunk);
  ASSERT_TRUE(a->Free(in1.address).ok());
  ASSERT_TRUE(a->Free(low.address).ok());
  EXPECT_THAT(a->TakeReleasableChunks(), UnorderedElementsAre(kBase, kBase + kChunk));
}

// A stand-in for the daemon: hands out chunk-aligned bases and takes them back.
class FakeChunkSource {
 public:
  uint64_t Get() {
    absl::MutexLock lock(&mu_);
    if (!returned_.empty()) {
      const uint64_t base = *returned_.begin();
      returned_.erase(returned_.begin());
      return base;
    }
    return kBase + next_++ * kChunk;
  }
  void Put(uint64_t base) {
    absl::MutexLock lock(&mu_);
    EXPECT_TRUE(returned_.insert(base).second) << "chunk returned twice";
  }

 private:
  absl::Mutex mu_;
  std::set<uint64_t> returned_ ABSL_GUARDED_BY(mu_);
  uint64_t next_ ABSL_GUARDED_BY(mu_) = 0;
};

// The documented calling pattern: try, and on "needs a chunk" get one with no lock held.
SmallAllocation AllocateWithChunks(SmallAllocator& a, FakeChunkSource& source, uint64_t bytes,
                                   uint64_t alignment) {
  absl::StatusOr<std::optional<SmallAllocation>> r = a.TryAllocate(bytes, alignment);
  EXPECT_TRUE(r.ok()) << r.status();
  if (r.ok() && r->has_value()) return **r;
  const uint64_t chunk = source.Get();
  absl::StatusOr<SmallAllocation> s = a.AddChunkAndAllocate(chunk, kChunk, bytes, alignment);
  EXPECT_TRUE(s.ok()) << s.status();
  return s.value_or(SmallAllocation{0, 0, 0});
}

uint64_t RandomSize(std::mt19937_64& rng) {
  switch (rng() % 8) {
    case 0:
      return 1 + rng() % kMiB;  // up to the limit
    case 1:
    case 2:
      return 1 + rng() % 65536;
    default:
      return 1 + rng() % 2048;
  }
}

uint64_t RandomAlignment(std::mt19937_64& rng) {
  return rng() % 10 == 0 ? uint64_t{256} << (rng() % 13) : 0;  // up to 1 MiB
}

TEST(SmallAllocatorTest, RandomStressKeepsAllocationsDisjointAndInsideHeldChunks) {
  auto a = Make();
  FakeChunkSource source;
  std::map<uint64_t, SmallAllocation> live;  // by address
  std::set<uint64_t> held;
  uint64_t in_use = 0;
  std::mt19937_64 rng(7);
  for (int step = 0; step < 30000; ++step) {
    // Phases of growth and shrinkage, so chunks fill up and empty out.
    const bool grow = (step / 3000) % 2 == 0 ? rng() % 100 < 65 : rng() % 100 < 35;
    if (live.empty() || grow) {
      const uint64_t bytes = RandomSize(rng);
      const uint64_t alignment = RandomAlignment(rng);
      const SmallAllocation s = AllocateWithChunks(*a, source, bytes, alignment);
      held.insert(s.chunk_base);
      ASSERT_GE(s.size, bytes);
      ASSERT_EQ(s.address % std::max<uint64_t>(alignment, 256), 0u);
      ASSERT_GE(s.address, s.chunk_base);
      ASSERT_LE(s.address + s.size, s.chunk_base + kChunk);
      ASSERT_TRUE(a->Owns(s.address) && a->Owns(s.address + s.size - 1));
      auto next = live.lower_bound(s.address);
      if (next != live.end()) {
        ASSERT_LE(s.address + s.size, next->first) << step;
      }
      if (next != live.begin()) {
        const SmallAllocation& prev = std::prev(next)->second;
        ASSERT_LE(prev.address + prev.size, s.address) << step;
      }
      live.emplace(s.address, s);
      in_use += s.size;
    } else {
      auto it = live.lower_bound(kBase + rng() % (64 * kChunk));
      if (it == live.end()) it = live.begin();
      absl::StatusOr<SmallFreeResult> f = a->Free(it->first);
      ASSERT_TRUE(f.ok()) << f.status();
      ASSERT_EQ(f->chunk_base, it->second.chunk_base);
      ASSERT_EQ(f->size, it->second.size);
      in_use -= it->second.size;
      live.erase(it);
      const bool chunk_has_live = std::any_of(live.begin(), live.end(), [&](const auto& e) {
        return e.second.chunk_base == f->chunk_base;
      });
      ASSERT_EQ(f->chunk_empty, !chunk_has_live) << step;
      if (f->chunk_empty) {
        for (uint64_t base : a->TakeReleasableChunks()) {
          for (const auto& [addr, s] : live) {
            ASSERT_NE(s.chunk_base, base) << "released in use";
          }
          held.erase(base);
          source.Put(base);
        }
        ASSERT_LE(a->stats().empty_chunks, 1u);
      }
    }
    if (step % 500 == 0) {
      ASSERT_TRUE(a->CheckInvariants().ok()) << step << ": " << a->CheckInvariants();
      const SmallAllocatorStats s = a->stats();
      ASSERT_EQ(s.bytes_in_use, in_use);
      ASSERT_EQ(s.live_allocations, live.size());
      ASSERT_EQ(s.chunks_held, held.size());
    }
  }
  for (const auto& [addr, s] : live) ASSERT_TRUE(a->Free(addr).ok());
  EXPECT_EQ(a->TakeReleasableChunks().size(), held.size() - 1);
  EXPECT_TRUE(a->CheckInvariants().ok()) << a->CheckInvariants();
}

TEST(SmallAllocatorTest, ConcurrentAllocateAndFree) {
  auto a = Make();
  FakeChunkSource source;
  constexpr int kThreads = 4;
  std::vector<std::vector<SmallAllocation>> kept(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      std::mt19937_64 rng(100 + t);
      std::vector<SmallAllocation> mine;
      for (int i = 0; i < 4000; ++i) {
        if (mine.empty() || rng() % 100 < 55) {
          mine.push_back(AllocateWithChunks(*a, source, RandomSize(rng), RandomAlignment(rng)));
        } else {
          const size_t k = rng() % mine.size();
          EXPECT_TRUE(a->Free(mine[k].address).ok());
          mine[k] = mine.back();
          mine.pop_back();
          for (uint64_t base : a->TakeReleasableChunks()) source.Put(base);
        }
      }
      kept[t] = std::move(mine);
    });
  }
  for (std::thread& th : threads) th.join();
  ASSERT_TRUE(a->CheckInvariants().ok()) << a->CheckInvariants();
  std::vector<SmallAllocation> all;
  for (const auto& v : kept) all.insert(all.end(), v.begin(), v.end());
  std::sort(all.begin(), all.end(), [](const SmallAllocation& x, const SmallAllocation& y) {
    return x.address < y.address;
  });
  for (size_t i = 1; i < all.size(); ++i) {
    ASSERT_LE(all[i - 1].address + all[i - 1].size, all[i].address);
  }
  EXPECT_EQ(a->stats().live_allocations, all.size());
  for (const SmallAllocation& s : all) ASSERT_TRUE(a->Free(s.address).ok());
  EXPECT_EQ(a->stats().bytes_in_use, 0u);
  a->TakeReleasableChunks();
  EXPECT_EQ(a->stats().chunks_held, 1u);
}

}  // namespace
}  // namespace missile::shim
