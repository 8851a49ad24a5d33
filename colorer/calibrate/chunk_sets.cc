#include "chunk_sets.h"

#include <algorithm>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"

namespace missile::calibrate {

uint64_t SeededRng::Next() {
  uint64_t z = (state_ += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

uint64_t SeededRng::Below(uint64_t bound) {
  // Rejection sampling: draws below `limit` map evenly onto [0, bound).
  const uint64_t limit = UINT64_MAX - UINT64_MAX % bound;
  uint64_t x;
  do {
    x = Next();
  } while (x >= limit);
  return x % bound;
}

std::vector<uint32_t> SeededPermutation(uint32_t n, uint64_t seed) {
  std::vector<uint32_t> p(n);
  std::iota(p.begin(), p.end(), 0u);
  SeededRng rng(seed);
  for (uint32_t i = n; i > 1; --i) {
    std::swap(p[i - 1], p[rng.Below(i)]);
  }
  return p;
}

ChunkList RandomSubset(uint32_t n, uint32_t denominator, uint64_t seed) {
  if (denominator == 0 || denominator > n) return {};
  std::vector<uint32_t> p = SeededPermutation(n, seed);
  ChunkList out(p.begin(), p.begin() + n / denominator);
  std::sort(out.begin(), out.end());
  return out;
}

ChunkList EveryKth(uint32_t n, uint32_t k, uint32_t offset) {
  ChunkList out;
  if (k == 0) return out;
  for (uint64_t i = offset; i < n; i += k) out.push_back(static_cast<uint32_t>(i));
  return out;
}

ChunkList ContiguousRun(uint32_t n, uint32_t begin, uint32_t length) {
  ChunkList out;
  for (uint64_t i = begin; i < n && i < uint64_t{begin} + length; ++i) {
    out.push_back(static_cast<uint32_t>(i));
  }
  return out;
}

ChunkList SampleChunks(uint32_t n, uint32_t count, uint64_t seed) {
  std::vector<uint32_t> p = SeededPermutation(n, seed);
  p.resize(std::min(count, n));
  return p;
}

std::vector<NamedSet> BandwidthSets(uint32_t n, uint64_t seed, uint32_t run_length) {
  std::vector<NamedSet> sets;
  auto add = [&](std::string name, ChunkList chunks) {
    if (!chunks.empty()) sets.push_back({std::move(name), std::move(chunks)});
  };
  add("all", ContiguousRun(n, 0, n));
  for (uint32_t d : {2u, 4u, 8u, 16u}) {
    add(absl::StrCat("random_1_", d), RandomSubset(n, d, seed + d));
  }
  for (uint32_t k : {2u, 4u, 8u, 16u}) add(absl::StrCat("every_", k), EveryKth(n, k, 0));
  const uint32_t run = std::min(run_length, n);
  if (run > 0) {
    add(absl::StrCat("run_", run, "_start"), ContiguousRun(n, 0, run));
    add(absl::StrCat("run_", run, "_middle"), ContiguousRun(n, (n - run) / 2, run));
    SeededRng rng(seed ^ 0x5bd1e995ULL);
    const uint32_t begin = static_cast<uint32_t>(rng.Below(uint64_t{n} - run + 1));
    add(absl::StrCat("run_", run, "_random"), ContiguousRun(n, begin, run));
  }
  return sets;
}

std::vector<NamedSplit> InterferenceSplits(uint32_t n, const std::vector<uint64_t>& seeds) {
  std::vector<NamedSplit> splits;
  auto add = [&](std::string name, ChunkList victim, ChunkList aggressor) {
    if (!victim.empty() && !aggressor.empty()) {
      splits.push_back({std::move(name), std::move(victim), std::move(aggressor)});
    }
  };
  for (uint64_t seed : seeds) {
    std::vector<uint32_t> p = SeededPermutation(n, seed);
    ChunkList a(p.begin(), p.begin() + n / 2), b(p.begin() + n / 2, p.end());
    std::sort(a.begin(), a.end());
    std::sort(b.begin(), b.end());
    add(absl::StrCat("random_half_s", seed), std::move(a), std::move(b));
  }
  add("even_odd", EveryKth(n, 2, 0), EveryKth(n, 2, 1));
  add("low_high", ContiguousRun(n, 0, n / 2), ContiguousRun(n, n / 2, n - n / 2));
  add("mod4_0_vs_2", EveryKth(n, 4, 0), EveryKth(n, 4, 2));
  return splits;
}

}  // namespace missile::calibrate
