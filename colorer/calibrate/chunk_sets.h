// Which chunks each calibration measurement reads: seeded, reproducible selections over the
// chunk indices 0..n-1 (allocation order). Pure logic, no CUDA.
//
// Contract:
// - Every selection is a sorted list of distinct indices below n, except SampleChunks (random
//   order: the classifier visits a sample in the order given).
// - Randomness comes from a seeded SplitMix64 stream and an explicit Fisher-Yates shuffle, not
//   from <random> distributions, so a seed picks the same chunks with every standard library.
// - Sets that would be empty are left out of the lists (tiny n); the two sides of a split are
//   disjoint and non-empty.
// - Free functions over values: safe from any thread.

#ifndef MISSILE_COLORER_CALIBRATE_CHUNK_SETS_H_
#define MISSILE_COLORER_CALIBRATE_CHUNK_SETS_H_

#include <cstdint>
#include <string>
#include <vector>

namespace missile::calibrate {

using ChunkList = std::vector<uint32_t>;

// A deterministic 64-bit generator (SplitMix64).
class SeededRng {
 public:
  explicit SeededRng(uint64_t seed) : state_(seed) {}
  uint64_t Next();
  // Uniform in [0, bound), bound > 0, without modulo bias.
  uint64_t Below(uint64_t bound);

 private:
  uint64_t state_;
};

// A permutation of 0..n-1 chosen by `seed`.
std::vector<uint32_t> SeededPermutation(uint32_t n, uint64_t seed);

// The first n / denominator entries of SeededPermutation(n, seed), sorted. Empty when
// denominator is 0 or larger than n.
ChunkList RandomSubset(uint32_t n, uint32_t denominator, uint64_t seed);
// Indices offset, offset + k, offset + 2k, ... below n (k >= 1).
ChunkList EveryKth(uint32_t n, uint32_t k, uint32_t offset);
// [begin, begin + length) clipped to n.
ChunkList ContiguousRun(uint32_t n, uint32_t begin, uint32_t length);
// `count` distinct indices (min(count, n)) in seeded random order.
ChunkList SampleChunks(uint32_t n, uint32_t count, uint64_t seed);

struct NamedSet {
  std::string name;  // evidence key fragment, e.g. "random_1_4"
  ChunkList chunks;
};

// The streaming-bandwidth sets: all chunks; random 1/2, 1/4, 1/8, 1/16; every 2nd, 4th, 8th,
// 16th chunk by allocation order; contiguous runs of run_length chunks at the start, the middle
// and a seeded random position.
std::vector<NamedSet> BandwidthSets(uint32_t n, uint64_t seed, uint32_t run_length);

struct NamedSplit {
  std::string name;  // e.g. "even_odd"
  ChunkList victim;
  ChunkList aggressor;
};

// The interference splits: one random half/half split per seed ("random_half_s<seed>"),
// even/odd, low/high halves, and i % 4 == 0 vs i % 4 == 2 (a quarter each).
std::vector<NamedSplit> InterferenceSplits(uint32_t n, const std::vector<uint64_t>& seeds);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_CHUNK_SETS_H_
