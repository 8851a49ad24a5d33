#include "missile/colorer/classifier.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <random>
#include <set>
#include <vector>

#include "gtest/gtest.h"

namespace missile::colorer {
namespace {

// A model of two concurrent readers: reader a loses 0.5 * (the fraction of its chunks whose
// colour b also streams over), plus uniform noise in [-noise, +noise].
class SimulatedOracle : public InterferenceOracle {
 public:
  SimulatedOracle(std::vector<int> hidden_colour, double noise, uint32_t seed)
      : hidden_(std::move(hidden_colour)), noise_(noise), rng_(seed) {}

  absl::StatusOr<double> Slowdown(const std::vector<ChunkIndex>& a,
                                  const std::vector<ChunkIndex>& b) override {
    ++calls;
    EXPECT_FALSE(a.empty());
    EXPECT_FALSE(b.empty());
    std::set<int> b_colours;
    for (ChunkIndex c : b) {
      EXPECT_LT(c, hidden_.size());
      EXPECT_TRUE(std::find(a.begin(), a.end(), c) == a.end()) << "a and b overlap at " << c;
      b_colours.insert(hidden_[c]);
    }
    int shared = 0;
    for (ChunkIndex c : a) shared += b_colours.count(hidden_[c]) > 0 ? 1 : 0;
    std::uniform_real_distribution<double> noise(-noise_, noise_);
    return 0.5 * shared / static_cast<double>(a.size()) + (noise_ > 0 ? noise(rng_) : 0.0);
  }

  int64_t calls = 0;

 private:
  std::vector<int> hidden_;
  double noise_;
  std::mt19937 rng_;
};

// n chunks in k hidden colours of equal size, shuffled.
std::vector<int> ShuffledColours(int n, int k, uint32_t seed) {
  std::vector<int> colours(n);
  for (int i = 0; i < n; ++i) colours[i] = i % k;
  std::mt19937 rng(seed);
  std::shuffle(colours.begin(), colours.end(), rng);
  return colours;
}

// True when the classes are exactly the hidden colours (up to renaming).
bool SamePartition(const ClassificationResult& result, const std::vector<int>& hidden) {
  std::map<int, int> class_to_hidden, hidden_to_class;
  for (size_t i = 0; i < hidden.size(); ++i) {
    const int c = result.class_of[i];
    if (c < 0) return false;
    auto [it1, new1] = class_to_hidden.emplace(c, hidden[i]);
    auto [it2, new2] = hidden_to_class.emplace(hidden[i], c);
    if (it1->second != hidden[i] || it2->second != c) return false;
  }
  return class_to_hidden.size() == result.classes.size();
}

void ExpectConsistent(const ClassificationResult& result, int n) {
  ASSERT_EQ(result.class_of.size(), static_cast<size_t>(n));
  size_t total = 0;
  for (size_t c = 0; c < result.classes.size(); ++c) {
    total += result.classes[c].size();
    EXPECT_TRUE(std::is_sorted(result.classes[c].begin(), result.classes[c].end()));
    for (ChunkIndex chunk : result.classes[c])
      EXPECT_EQ(result.class_of[chunk], static_cast<int>(c));
  }
  EXPECT_EQ(total, static_cast<size_t>(n));
}

TEST(ClassifierTest, FindsFourHiddenColoursWithLowNoise) {
  constexpr int kN = 64, kK = 4;
  const std::vector<int> hidden = ShuffledColours(kN, kK, 1);
  SimulatedOracle oracle(hidden, 0.05, 2);
  auto result = ClassifyChunks(kN, oracle);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectConsistent(*result, kN);
  EXPECT_EQ(result->classes.size(), static_cast<size_t>(kK));
  EXPECT_TRUE(SamePartition(*result, hidden));
  EXPECT_EQ(result->oracle_calls, oracle.calls);
  // Noise (0.05) never reaches the ambiguity band (0.15..0.35): one call per decision, so at
  // most N*k assignment calls plus k*(k+1)/2 confirmation calls.
  EXPECT_LE(result->oracle_calls, kN * kK + kK * (kK + 1) / 2);
  EXPECT_LE(result->oracle_calls, result->call_bound);
  EXPECT_EQ(result->call_bound, ClassifierCallBound(kN, kK));
  const ClassifierEvidence& ev = result->evidence;
  EXPECT_EQ(ev.repeated_measurements, 0);
  EXPECT_EQ(ev.merged_classes, 0);
  EXPECT_EQ(ev.split_suspects, 0);
  EXPECT_DOUBLE_EQ(ev.confidence, 1.0);
  EXPECT_GE(ev.min_same, 0.45);
  EXPECT_LE(ev.max_different, 0.05);
  ASSERT_EQ(ev.intra_class.size(), static_cast<size_t>(kK));
  for (int c = 0; c < kK; ++c) EXPECT_GT(ev.intra_class[c], 0.4);
  EXPECT_LT(ev.cross_class[0][3], 0.1);
  EXPECT_TRUE(std::isnan(ev.cross_class[3][0]));
}

TEST(ClassifierTest, OneColourOracleGivesOneClass) {
  constexpr int kN = 64;
  SimulatedOracle oracle(std::vector<int>(kN, 0), 0.05, 3);
  auto result = ClassifyChunks(kN, oracle);
  ASSERT_TRUE(result.ok()) << result.status();
  ExpectConsistent(*result, kN);
  ASSERT_EQ(result->classes.size(), 1u);
  EXPECT_EQ(result->classes[0].size(), static_cast<size_t>(kN));
  // N-1 assignment calls and one half-vs-half confirmation.
  EXPECT_EQ(result->oracle_calls, kN);
  EXPECT_LE(result->oracle_calls, ClassifierCallBound(kN, 1));
  EXPECT_DOUBLE_EQ(result->evidence.confidence, 1.0);
  EXPECT_TRUE(std::isnan(result->evidence.max_different));
}

TEST(ClassifierTest, HeavyNoiseIsResolvedByRepeats) {
  constexpr int kN = 96, kK = 6;
  const std::vector<int> hidden = ShuffledColours(kN, kK, 4);
  SimulatedOracle oracle(hidden, 0.2, 5);
  auto result = ClassifyChunks(kN, oracle);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(SamePartition(*result, hidden));
  EXPECT_GT(result->evidence.repeated_measurements, 0);
  EXPECT_LE(result->oracle_calls, ClassifierCallBound(kN, kK));
  EXPECT_GT(result->evidence.confidence, 0.5);
}

TEST(ClassifierTest, UnequalClassesAndNoConfirmation) {
  std::vector<int> hidden;
  for (int c = 0; c < 5; ++c) hidden.insert(hidden.end(), 3 + 7 * c, c);  // 3, 10, 17, 24, 31
  std::mt19937 rng(6);
  std::shuffle(hidden.begin(), hidden.end(), rng);
  const int n = static_cast<int>(hidden.size());
  SimulatedOracle oracle(hidden, 0.05, 7);
  ClassifierOptions options;
  options.confirm = false;
  auto result = ClassifyChunks(n, oracle, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_TRUE(SamePartition(*result, hidden));
  EXPECT_LE(result->oracle_calls, n * 5);
  EXPECT_EQ(result->call_bound, ClassifierCallBound(n, 5, options));
}

// Misses chunk 5's interference whenever chunk 5 is probed alone: the assignment pass gives it a
// class of its own, and the group-vs-group confirmation must merge it back.
class FlakyOracle : public SimulatedOracle {
 public:
  using SimulatedOracle::SimulatedOracle;
  absl::StatusOr<double> Slowdown(const std::vector<ChunkIndex>& a,
                                  const std::vector<ChunkIndex>& b) override {
    absl::StatusOr<double> s = SimulatedOracle::Slowdown(a, b);
    if (a.size() == 1 && a[0] == 5) return 0.0;
    return s;
  }
};

TEST(ClassifierTest, ConfirmationMergesAClassSplitByAMissedProbe) {
  constexpr int kN = 32, kK = 2;
  std::vector<int> hidden(kN);
  for (int i = 0; i < kN; ++i) hidden[i] = i % kK;
  FlakyOracle oracle(hidden, 0.0, 8);
  auto result = ClassifyChunks(kN, oracle);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(result->evidence.merged_classes, 1);
  EXPECT_TRUE(SamePartition(*result, hidden));
  EXPECT_LT(result->evidence.confidence, 1.0);
  EXPECT_LE(result->oracle_calls, ClassifierCallBound(kN, kK + 1));
}

class FailingOracle : public InterferenceOracle {
 public:
  absl::StatusOr<double> Slowdown(const std::vector<ChunkIndex>&,
                                  const std::vector<ChunkIndex>&) override {
    if (++calls == 3) return absl::UnavailableError("GPU reset");
    return 0.5;
  }
  int calls = 0;
};

TEST(ClassifierTest, ErrorsAndLimits) {
  FailingOracle failing;
  auto failed = ClassifyChunks(10, failing);
  EXPECT_EQ(failed.status().code(), absl::StatusCode::kUnavailable);

  SimulatedOracle oracle(ShuffledColours(64, 4, 9), 0.05, 10);
  ClassifierOptions budget;
  budget.max_oracle_calls = 20;
  auto exhausted = ClassifyChunks(64, oracle, budget);
  EXPECT_EQ(exhausted.status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_EQ(oracle.calls, 20);

  ClassifierOptions too_few;
  too_few.max_classes = 3;
  auto overflow = ClassifyChunks(64, oracle, too_few);
  EXPECT_EQ(overflow.status().code(), absl::StatusCode::kFailedPrecondition);

  EXPECT_FALSE(ClassifyChunks(0, oracle).ok());
  for (auto mutate : std::vector<void (*)(ClassifierOptions&)>{
           [](ClassifierOptions& o) { o.threshold = 0; },
           [](ClassifierOptions& o) { o.threshold = 1; },
           [](ClassifierOptions& o) { o.ambiguity = -0.1; },
           [](ClassifierOptions& o) { o.max_repeats = -1; },
           [](ClassifierOptions& o) { o.probe_group_size = 0; },
           [](ClassifierOptions& o) { o.max_classes = 65; },
           [](ClassifierOptions& o) { o.max_oracle_calls = -1; }}) {
    ClassifierOptions o;
    mutate(o);
    EXPECT_EQ(ClassifyChunks(4, oracle, o).status().code(), absl::StatusCode::kInvalidArgument);
  }

  class NanOracle : public InterferenceOracle {
    absl::StatusOr<double> Slowdown(const std::vector<ChunkIndex>&,
                                    const std::vector<ChunkIndex>&) override {
      return std::nan("");
    }
  } nan_oracle;
  EXPECT_FALSE(ClassifyChunks(4, nan_oracle).ok());
}

TEST(ClassifierTest, SingleChunkIsItsOwnClassWithNoEvidence) {
  SimulatedOracle oracle({0}, 0.0, 11);
  auto result = ClassifyChunks(1, oracle);
  ASSERT_TRUE(result.ok());
  EXPECT_EQ(result->classes.size(), 1u);
  EXPECT_EQ(result->oracle_calls, 0);
  EXPECT_EQ(result->evidence.confidence, 0.0);
}

}  // namespace
}  // namespace missile::colorer
