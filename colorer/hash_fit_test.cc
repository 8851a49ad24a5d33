#include "missile/colorer/hash_fit.h"

#include <bit>
#include <cmath>
#include <memory>
#include <random>
#include <vector>

#include "gtest/gtest.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::colorer {
namespace {

// k random independent masks over bits [low, high), each with many bits set (as the published
// hashes have), in reduced form.
std::vector<uint64_t> RandomHash(int k, int low, int high, std::mt19937_64& rng) {
  const uint64_t range =
      (high >= 64 ? ~uint64_t{0} : (uint64_t{1} << high) - 1) & ~((uint64_t{1} << low) - 1);
  Gf2Basis basis;
  while (basis.rank() < k) basis.Add(rng() & range);
  return basis.rows();
}

// A simulated GPU's parity-subset scan over bits [low, high): every non-zero mask, `repeats`
// measurements each (median), relative Gaussian noise `sigma` (5-10 %), and a fraction `flips`
// of the measurements replaced by the other class's level (wild outliers: a conflict that is
// not there, or one that is missed). With a few channel groups the true conflicts are only
// 2^rank - 1 of 8191 masks, so the outlier rate a low rank can survive is lower: a triangle of
// false conflicts looks exactly like a rank-2 row space.
std::vector<MaskObservation> SimulateScan(const std::vector<uint64_t>& truth, int low, int high,
                                          double sigma, double flips, int repeats,
                                          std::mt19937_64& rng) {
  const Gf2Basis span(truth);
  std::normal_distribution<double> noise(0, sigma);
  std::uniform_real_distribution<double> unit(0, 1);
  std::vector<MaskObservation> out;
  for (uint64_t g = 1; g < (uint64_t{1} << (high - low)); ++g) {
    const uint64_t mask = g << low;
    const bool in = span.Contains(mask);
    std::vector<double> r;
    for (int i = 0; i < repeats; ++i) {
      const bool flipped = unit(rng) < flips;
      const double level = (in != flipped) ? 0.5 : 1.0;
      r.push_back(level * (1 + noise(rng)));
    }
    std::sort(r.begin(), r.end());
    out.push_back({mask, r[r.size() / 2]});
  }
  return out;
}

TEST(Gf2BasisTest, SpanRankAndCanonicalForm) {
  Gf2Basis a({0b1100, 0b0110});
  EXPECT_EQ(a.rank(), 2);
  EXPECT_TRUE(a.Contains(0b1010));
  EXPECT_TRUE(a.Contains(0));
  EXPECT_FALSE(a.Contains(0b0001));
  EXPECT_FALSE(a.Add(0b1010));
  Gf2Basis b({0b1010, 0b0110});  // the same span from other vectors
  EXPECT_EQ(a, b);
  for (uint64_t row : a.rows()) {
    for (uint64_t other : a.rows()) {
      if (row != other) {
        EXPECT_EQ(other & std::bit_floor(row), 0u);
      }
    }
  }
}

struct ScanCase {
  int rank;
  double sigma;
  double flips;
};

class ScanFitTest : public ::testing::TestWithParam<ScanCase> {};

TEST_P(ScanFitTest, RecoversTheHashAndPredictsHeldBackMasks) {
  const ScanCase c = GetParam();
  std::mt19937_64 rng(1234 + c.rank);
  const std::vector<uint64_t> truth = RandomHash(c.rank, 8, 21, rng);
  const std::vector<MaskObservation> all = SimulateScan(truth, 8, 21, c.sigma, c.flips, 3, rng);

  ScanFitOptions options;  // bits 8..20, threshold 0.75 x the median ratio
  absl::StatusOr<ScanCrossValidation> cv = CrossValidateScan(all, options, 5, 42);
  ASSERT_TRUE(cv.ok()) << cv.status();
  EXPECT_EQ(cv->fit.masks, Gf2Basis(truth).rows());
  EXPECT_EQ(cv->fit.groups(), uint64_t{1} << c.rank);
  EXPECT_GT(cv->fit.agreement, 0.97);
  EXPECT_GT(cv->fit.confidence, 0.9);
  EXPECT_EQ(cv->predictions, static_cast<int>(all.size()));
  EXPECT_GT(cv->accuracy, 0.97);

  // A plain 80/20 split agrees: masks never fitted are predicted.
  std::vector<MaskObservation> shuffled = all;
  std::shuffle(shuffled.begin(), shuffled.end(), rng);
  const size_t held = shuffled.size() / 5;
  const std::vector<MaskObservation> held_out(shuffled.begin(), shuffled.begin() + held);
  const std::vector<MaskObservation> fitted(shuffled.begin() + held, shuffled.end());
  absl::StatusOr<XorHashFit> fit = FitRowSpaceFromScan(fitted, options);
  ASSERT_TRUE(fit.ok());
  absl::StatusOr<double> accuracy = ScanAccuracy(*fit, held_out, ScanThreshold(fitted, options));
  ASSERT_TRUE(accuracy.ok());
  EXPECT_GT(*accuracy, 0.97);
}

INSTANTIATE_TEST_SUITE_P(SimulatedGpus, ScanFitTest,
                         ::testing::Values(ScanCase{1, 0.05, 0.0}, ScanCase{2, 0.10, 0.01},
                                           ScanCase{3, 0.10, 0.02}, ScanCase{4, 0.08, 0.03},
                                           ScanCase{5, 0.10, 0.05}, ScanCase{6, 0.05, 0.05}));

TEST(ScanFitTest, NoStructureGivesOneGroup) {
  std::mt19937_64 rng(7);
  std::vector<MaskObservation> all = SimulateScan({}, 8, 21, 0.05, 0.0, 3, rng);
  absl::StatusOr<XorHashFit> fit = FitRowSpaceFromScan(all, {});
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->rank(), 0);
  EXPECT_EQ(fit->groups(), 1u);
  EXPECT_GT(fit->agreement, 0.99);
}

TEST(ScanFitTest, RejectsBadInput) {
  std::vector<MaskObservation> few(7, {0x100, 1.0});
  EXPECT_EQ(FitRowSpaceFromScan(few, {}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<MaskObservation> outside(16, {0x100, 1.0});
  outside[3].mask = 0x80;  // below bit 8
  EXPECT_EQ(FitRowSpaceFromScan(outside, {}).status().code(), absl::StatusCode::kInvalidArgument);
  std::vector<MaskObservation> zero(16, {0x100, 1.0});
  zero[0].mask = 0;
  EXPECT_EQ(FitRowSpaceFromScan(zero, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(
      CrossValidateScan(std::vector<MaskObservation>(16, {0x100, 1.0}), {}, 5, 1).status().code(),
      absl::StatusCode::kInvalidArgument);
  std::vector<MaskObservation> nan(16, {0x100, 1.0});
  nan[1].ratio = std::nan("");
  EXPECT_EQ(FitRowSpaceFromScan(nan, {}).status().code(), absl::StatusCode::kInvalidArgument);
  ScanFitOptions inverted;
  inverted.low_bit = 21;
  inverted.high_bit = 8;
  EXPECT_EQ(
      FitRowSpaceFromScan(std::vector<MaskObservation>(16, {0x100, 1.0}), inverted).status().code(),
      absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(ScanAccuracy(XorHashFit{}, {}, 0.75).ok());
}

// A simulated GPU answering pair questions about an XOR hash, wrong with probability `noise`.
struct NoisyXorGpu {
  std::vector<uint64_t> masks;
  double noise;
  std::mt19937_64 rng;
  int questions = 0;

  uint64_t Channel(uint64_t a) const {
    uint64_t c = 0;
    for (size_t i = 0; i < masks.size(); ++i) c |= uint64_t(Parity(a & masks[i])) << i;
    return c;
  }
  bool Conflict(uint64_t a, uint64_t b) {
    ++questions;
    const bool truth = Channel(a) == Channel(b);
    return std::uniform_real_distribution<double>(0, 1)(rng) < noise ? !truth : truth;
  }
};

struct OracleCase {
  int rank;
  double noise;
};

class OracleFitTest : public ::testing::TestWithParam<OracleCase> {};

TEST_P(OracleFitTest, RecoversMasksOverFortyBits) {
  const OracleCase c = GetParam();
  std::mt19937_64 rng(99 + c.rank);
  // Masks over bits 6..45 (40 address bits), like published Pascal/Volta hashes but wider.
  auto gpu = std::make_shared<NoisyXorGpu>(
      NoisyXorGpu{RandomHash(c.rank, 6, 46, rng), c.noise, std::mt19937_64(5)});
  OracleFitOptions options;
  options.low_bit = 6;
  options.high_bit = 46;
  options.votes = 5;
  absl::StatusOr<XorHashFit> fit =
      FitWithConflictOracle([gpu](uint64_t a, uint64_t b) { return gpu->Conflict(a, b); }, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  EXPECT_EQ(fit->masks, Gf2Basis(gpu->masks).rows());
  EXPECT_EQ(fit->rank(), c.rank);

  // Held-back pairs, never asked during the fit: predicted up to the measurement noise.
  std::vector<PairObservation> pairs;
  for (int i = 0; i < 2000; ++i) {
    const uint64_t a = rng() & ((uint64_t{1} << 46) - 1);
    // Half the pairs differ by a kernel vector (same channel), half at random.
    uint64_t b = rng() & ((uint64_t{1} << 46) - 1);
    if (i % 2 == 0) {
      for (int tries = 0; tries < 1000 && gpu->Channel(a) != gpu->Channel(b); ++tries) {
        b = rng() & ((uint64_t{1} << 46) - 1);
      }
    }
    pairs.push_back({a, b, gpu->Conflict(a, b)});
  }
  absl::StatusOr<double> accuracy = PairAccuracy(*fit, pairs);
  ASSERT_TRUE(accuracy.ok());
  EXPECT_GT(*accuracy, 1.0 - c.noise - 0.03);
  EXPECT_LT(*accuracy, 1.0 - c.noise + 0.03);  // it cannot beat the noise of the answers
}

INSTANTIATE_TEST_SUITE_P(SimulatedGpus, OracleFitTest,
                         ::testing::Values(OracleCase{1, 0.05}, OracleCase{3, 0.05},
                                           OracleCase{4, 0.10}, OracleCase{5, 0.08},
                                           OracleCase{6, 0.10}));

TEST(OracleFitTest, ModuloThreeIsNotTakenForAnXorHash) {
  // Six stacks' worth of channels chosen modulo 3 on top of one XOR bit: no GF(2)-linear
  // function explains it, so the fit must not claim one.
  auto channel = [](uint64_t a) {
    return ((a >> 8) % 3) * 2 + static_cast<uint64_t>(Parity(a & 0x12340));
  };
  OracleFitOptions options;
  options.low_bit = 8;
  options.high_bit = 30;
  absl::StatusOr<XorHashFit> fit = FitWithConflictOracle(
      [&](uint64_t a, uint64_t b) { return channel(a) == channel(b); }, options);
  if (fit.ok()) {
    EXPECT_LT(fit->agreement, 0.9) << "rank " << fit->rank();
  } else {
    EXPECT_EQ(fit.status().code(), absl::StatusCode::kFailedPrecondition);
  }
}

TEST(OracleFitTest, RejectsBadOptions) {
  ConflictOracle always = [](uint64_t, uint64_t) { return true; };
  OracleFitOptions even;
  even.votes = 4;
  EXPECT_EQ(FitWithConflictOracle(always, even).status().code(),
            absl::StatusCode::kInvalidArgument);
  OracleFitOptions empty;
  empty.low_bit = 10;
  empty.high_bit = 10;
  EXPECT_EQ(FitWithConflictOracle(always, empty).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FitWithConflictOracle(nullptr, {}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_FALSE(PairAccuracy(XorHashFit{}, {}).ok());
}

TEST(ParityLabelsTest, FindsTheParityBehindNoisyLabels) {
  std::mt19937_64 rng(17);
  const uint64_t mask = 0b1011000101101;  // 13 index bits: 256-byte granules of 2 MiB
  std::vector<int> labels(1 << 13);
  for (size_t g = 0; g < labels.size(); ++g) {
    labels[g] = Parity(g & mask) ^ 1 ^ (std::uniform_real_distribution<double>(0, 1)(rng) < 0.08);
  }
  absl::StatusOr<ParityFit> fit = FitParityLabels(labels);
  ASSERT_TRUE(fit.ok());
  EXPECT_EQ(fit->mask, mask);
  EXPECT_EQ(fit->constant, 1);
  EXPECT_NEAR(fit->agreement, 0.92, 0.02);
  EXPECT_LT(fit->runner_up, 0.6);

  std::vector<int> noise(1 << 10);
  for (int& l : noise) l = static_cast<int>(rng() & 1);
  absl::StatusOr<ParityFit> none = FitParityLabels(noise);
  ASSERT_TRUE(none.ok());
  EXPECT_LT(none->agreement, 0.6);

  EXPECT_FALSE(FitParityLabels(std::vector<int>(3, 0)).ok());
  EXPECT_FALSE(FitParityLabels({0, 2}).ok());
}

TEST(GranularityTest, H200LikeHashGivesOneColourAtTwoMiBAndSaysWhy) {
  XorHashFit fit;
  fit.low_bit = 8;
  fit.high_bit = 21;
  fit.masks = Gf2Basis({0x1A500, 0x0C900, 0x12A00, 0x05300, 0x08C00}).rows();
  absl::StatusOr<GranularityColours> c = ColoursAtGranularity(fit, uint64_t{2} << 20);
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->colours, 1);
  EXPECT_FALSE(c->merging_bits.empty());
  EXPECT_TRUE(c->above_observed_range);  // bits 21+ are the chunk-level measurements' business
  EXPECT_NE(c->reason.find("2 MiB chunks: 1 colour"), std::string::npos) << c->reason;
  EXPECT_NE(c->reason.find("bits 8"), std::string::npos) << c->reason;
}

TEST(GranularityTest, AgreesWithTheXorChannelMapOnEveryGranularity) {
  std::mt19937_64 rng(3);
  for (int trial = 0; trial < 20; ++trial) {
    XorHashFit fit;
    fit.low_bit = 8;
    fit.high_bit = 24;
    fit.masks = RandomHash(1 + trial % 5, 8, 24, rng);
    // Sparse masks too, so some granularities keep colours.
    if (trial % 2) fit.masks = Gf2Basis({0x800000, 0x400100 & ~(trial % 4 ? 0x100ull : 0)}).rows();
    absl::StatusOr<std::unique_ptr<XorChannelMap>> map = XorChannelMap::Create(fit.masks);
    ASSERT_TRUE(map.ok());
    for (int log2 = 8; log2 <= 24; ++log2) {
      absl::StatusOr<GranularityColours> c = ColoursAtGranularity(fit, uint64_t{1} << log2);
      absl::StatusOr<int> expected = DistinguishableColours(**map, uint64_t{1} << log2);
      ASSERT_TRUE(c.ok());
      ASSERT_TRUE(expected.ok());
      EXPECT_EQ(c->colours, *expected) << "trial " << trial << " granularity 2^" << log2;
    }
  }
}

TEST(GranularityTest, RejectsNonPowerOfTwo) {
  EXPECT_EQ(ColoursAtGranularity(XorHashFit{}, 3 << 20).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(FormatBitList({8, 9, 10, 13, 15, 16}), "8-10, 13, 15-16");
  EXPECT_EQ(FormatBitList({}), "none");
}

}  // namespace
}  // namespace missile::colorer
