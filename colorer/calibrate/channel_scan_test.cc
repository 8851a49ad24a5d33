#include "channel_scan.h"

#include <bit>
#include <cmath>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "channel_report.h"
#include "gtest/gtest.h"
#include "missile/colorer/channel_map_file.h"
#include "missile/colorer/hash_fit.h"

namespace missile::calibrate {
namespace {

constexpr uint64_t kChunk = uint64_t{2} << 20;
constexpr uint64_t kBase = uint64_t{0x7f12} << 21;  // a chunk-aligned device address

// A model GPU whose channel groups follow known XOR hashes (one for DRAM reads, one for L2
// reads): a reader's bandwidth is the per-group bandwidth times the groups its subset touches,
// and a victim loses 60 % of its bandwidth on the groups an aggressor shares with it.
class ModelGpu : public ChannelProbeDevice {
 public:
  // exponent < 1: bandwidth grows less than in proportion to the groups touched (a partial
  // channel limit: half the groups give 2^-exponent of the bandwidth).
  ModelGpu(std::vector<uint64_t> dram, std::vector<uint64_t> l2, double noise,
           double exponent = 1.0)
      : dram_(std::move(dram)), l2_(std::move(l2)), noise_(noise), exponent_(exponent) {}

  int sm_count() const override { return 132; }
  int blocks_per_sm() const override { return 8; }
  uint64_t chunk_bytes() const override { return kChunk; }
  absl::Status SetChunks(int list, const std::vector<uint64_t>& chunks) override {
    if (list < 0 || list >= kLists || chunks.size() != 1 || chunks[0] % kChunk != 0) {
      return absl::InvalidArgumentError("model: one chunk-aligned chunk per list");
    }
    base_ = chunks[0];
    return absl::OkStatus();
  }
  absl::StatusOr<double> TimeSubset(const SubsetLaunch& r) override {
    // The GPU's check of the launch (channel_gpu.cc), so a malformed subset fails here too.
    SubsetParams p{};
    if (absl::Status s = FillSubsetConstraints(r.subset, 21 - r.granule_shift, p); !s.ok()) {
      return s;
    }
    ++launches_;
    const double gbps = 40.0 * std::pow(static_cast<double>(GroupCount(r)), exponent_);
    const double bytes = static_cast<double>(SubsetBytes(kChunk, 1, r.subset) * r.rounds);
    return bytes / gbps / 1e6 * Noise();
  }
  absl::StatusOr<double> TimeSubsetUnder(const SubsetLaunch& victim,
                                         const SubsetLaunch& aggressor) override {
    if (no_overlap_) return absl::FailedPreconditionError("the readers did not overlap");
    absl::StatusOr<double> alone = TimeSubset(victim);
    if (!alone.ok()) return alone;
    const std::set<uint64_t> v = Groups(victim), a = Groups(aggressor);
    int shared = 0;
    for (uint64_t g : v) shared += a.count(g) ? 1 : 0;
    const double overlap = static_cast<double>(shared) / static_cast<double>(v.size());
    return *alone / (1.0 - 0.6 * overlap);
  }
  int launches() const { return launches_; }
  void set_no_overlap() { no_overlap_ = true; }

 private:
  // How many groups the subset touches, by linear algebra: the subset is a coset of the
  // constraints' kernel, and the hash maps it onto 2^(rank - dim(hash rows meet constraints))
  // groups (bits 21 and up only shift the groups of a chunk).
  uint64_t GroupCount(const SubsetLaunch& r) const {
    const std::vector<uint64_t>& hash = r.discard ? dram_ : l2_;
    colorer::Gf2Basis rows, constraints, both;
    for (uint64_t m : hash) {
      rows.Add((m & (kChunk - 1)) >> r.granule_shift);
      both.Add((m & (kChunk - 1)) >> r.granule_shift);
    }
    for (uint32_t m : r.subset.masks) {
      constraints.Add(m);
      both.Add(m);
    }
    const int shared = rows.rank() + constraints.rank() - both.rank();
    return uint64_t{1} << (rows.rank() - shared);
  }
  // The groups the subset's granules fall in (enumerated: 8192 granules at most).
  std::set<uint64_t> Groups(const SubsetLaunch& r) const {
    const std::vector<uint64_t>& hash = r.discard ? dram_ : l2_;
    std::set<uint64_t> groups;
    for (uint32_t g = 0; g < (kChunk >> r.granule_shift); ++g) {
      bool in = true;
      for (size_t j = 0; j < r.subset.masks.size(); ++j) {
        in = in && colorer::Parity(g & r.subset.masks[j]) == int((r.subset.parities >> j) & 1);
      }
      if (!in) continue;
      const uint64_t address = base_ + (uint64_t{g} << r.granule_shift);
      uint64_t group = 0;
      for (size_t i = 0; i < hash.size(); ++i) {
        group |= uint64_t(colorer::Parity(address & hash[i])) << i;
      }
      groups.insert(group);
    }
    if (groups.empty()) groups.insert(0);
    return groups;
  }
  double Noise() { return 1.0 + std::normal_distribution<double>(0, noise_)(rng_); }

  std::vector<uint64_t> dram_, l2_;
  double noise_;
  double exponent_;
  uint64_t base_ = 0;
  std::mt19937_64 rng_{11};
  int launches_ = 0;
  bool no_overlap_ = false;
};

// An H200-like map: 32 DRAM channel groups from masks over many bits below 21 (and bit 21+,
// which only shifts a chunk's groups), L2 slices finer still.
std::vector<uint64_t> DramHash() {
  return colorer::Gf2Basis({0x21A500, 0x40C900, 0x12A00, 0x805300, 0x08C00}).rows();
}
std::vector<uint64_t> L2Hash() {
  return colorer::Gf2Basis({0x21A500, 0x40C900, 0x12A00, 0x805300, 0x08C00, 0x4100, 0x1300}).rows();
}

TEST(ChannelScanTest, RecoversTheModelsHashesInsideAChunk) {
  ModelGpu gpu(DramHash(), L2Hash(), 0.05);
  ChannelPlan plan = MakeChannelPlan(/*quick=*/true, 1);
  std::vector<std::string> lines;
  absl::StatusOr<ChannelScanResult> r =
      RunChannelScan(gpu, kBase, plan, [&](const std::string& l) { lines.push_back(l); });
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->sources.size(), 2u);
  const uint64_t in_chunk = kChunk - 1;
  std::vector<uint64_t> dram_low, l2_low;
  for (uint64_t m : DramHash()) dram_low.push_back(m & in_chunk);
  for (uint64_t m : L2Hash()) l2_low.push_back(m & in_chunk);
  // Only bits below 21 are visible inside a chunk: the fit is the hash's row space there.
  EXPECT_EQ(r->sources[0].fit.masks, colorer::Gf2Basis(dram_low).rows());
  EXPECT_EQ(r->sources[1].fit.masks, colorer::Gf2Basis(l2_low).rows());
  EXPECT_GT(r->sources[0].cv_accuracy, 0.99);
  EXPECT_EQ(r->sources[0].folds_matching, r->sources[0].folds);
  EXPECT_EQ(r->sources[0].observations.size(), 8191u);
  EXPECT_FALSE(lines.empty());
  // Contention: 4 colours from 2 rows in quick mode; same colour conflicts, others do not.
  EXPECT_EQ(r->pair_rows, 2);
  EXPECT_EQ(r->pairs.size(), 16u);
  EXPECT_DOUBLE_EQ(r->pair_accuracy, 1.0);
  for (const PairMeasurement& p : r->pairs) {
    EXPECT_EQ(p.measured_conflict, p.victim_colour == p.aggressor_colour);
  }

  GpuIdentity id{"Model GPU", "GPU-00000000-0000-0000-0000-000000000001", "CUDA 13.0", kChunk};
  absl::StatusOr<colorer::ChannelMapFile> file =
      BuildChannelMapFile(id, *r, plan, "2026-12-01T00:00:00Z", "missile-calibrate test", 12.5);
  ASSERT_TRUE(file.ok()) << file.status();
  EXPECT_EQ(file->fit.groups(), r->sources[r->primary].fit.groups());
  absl::StatusOr<std::string> text = colorer::FormatChannelMapFile(*file);
  ASSERT_TRUE(text.ok());
  absl::StatusOr<colorer::ChannelMapFile> parsed = colorer::ParseChannelMapFile(*text);
  ASSERT_TRUE(parsed.ok()) << parsed.status();
  EXPECT_EQ(*parsed, *file);
  const std::string report = ChannelReport(*file, *r);
  EXPECT_TRUE(absl::StrContains(report, "2 MiB chunks: 1 colour")) << report;
  EXPECT_TRUE(absl::StrContains(report, "ratios: median ")) << report;
  EXPECT_TRUE(absl::StrContains(report, "cross-validation")) << report;
  EXPECT_TRUE(absl::StrContains(PairsCsv(*r), "victim_colour,aggressor_colour")) << PairsCsv(*r);
  const std::string scan_csv = ScanCsv(*r);
  EXPECT_EQ(std::count(scan_csv.begin(), scan_csv.end(), '\n'), 1 + 2 * 8191);
}

TEST(ChannelScanTest, AGpuWithoutStructureInsideAChunkGivesOneGroup) {
  // Every channel bit depends only on bits 21 and up: nothing changes inside a chunk.
  ModelGpu gpu({uint64_t{1} << 22, uint64_t{1} << 23}, {uint64_t{1} << 24}, 0.03);
  absl::StatusOr<ChannelScanResult> r = RunChannelScan(gpu, kBase, MakeChannelPlan(true, 2), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sources[0].fit.rank(), 0);
  EXPECT_EQ(r->sources[1].fit.rank(), 0);
  EXPECT_TRUE(r->pairs.empty());
  EXPECT_EQ(r->pair_accuracy, -1);
}

TEST(ChannelScanTest, ReadersThatDoNotOverlapLeaveOutOnlyTheMatrix) {
  ModelGpu gpu(DramHash(), L2Hash(), 0.02);
  gpu.set_no_overlap();
  absl::StatusOr<ChannelScanResult> r = RunChannelScan(gpu, kBase, MakeChannelPlan(true, 3), {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->sources[0].fit.rank(), 5);
  EXPECT_TRUE(r->pairs.empty());
  EXPECT_EQ(r->pair_accuracy, -1);
}

TEST(ChannelScanTest, APartialLossShowsInTheSecondLookOnly) {
  // Half the groups give 80 % of the bandwidth: below the halving rule, above the noise.
  ModelGpu gpu(DramHash(), L2Hash(), 0.005, 0.32);
  absl::StatusOr<ChannelScanResult> r = RunChannelScan(gpu, kBase, MakeChannelPlan(true, 4), {});
  ASSERT_TRUE(r.ok()) << r.status();
  const SourceResult& dram = r->sources[0];
  EXPECT_EQ(dram.fit.rank(), 0);
  ASSERT_EQ(dram.sensitive_rank, 5);
  EXPECT_GT(dram.sensitive_threshold, 0.85);
  EXPECT_GT(dram.sensitive_cv_accuracy, 0.99);
}

TEST(ChannelScanTest, RejectsBadPlans) {
  ModelGpu gpu(DramHash(), L2Hash(), 0.0);
  ChannelPlan plan = MakeChannelPlan(true, 1);
  plan.sources = {"hbm"};
  EXPECT_EQ(RunChannelScan(gpu, kBase, plan, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  plan = MakeChannelPlan(true, 1);
  plan.granule_shift = 4;
  EXPECT_EQ(RunChannelScan(gpu, kBase, plan, {}).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(gpu.launches(), 0);
  EXPECT_EQ(RunChannelScan(gpu, kBase + 4096, MakeChannelPlan(true, 1), {}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(ChannelScanTest, ColourSubsetsCarryTheirParitiesThroughTheReduction) {
  const std::vector<uint32_t> rows = {0b0110, 0b1001};
  const int split = SplitBit(rows, 4);
  ASSERT_GE(split, 0);
  for (uint32_t colour = 0; colour < 4; ++colour) {
    for (int half = 0; half < 2; ++half) {
      absl::StatusOr<Subset> s = ColourSubset(rows, colour, split, half);
      ASSERT_TRUE(s.ok()) << s.status();
      for (uint32_t g = 0; g < 16; ++g) {
        bool in = true;
        for (size_t j = 0; j < s->masks.size(); ++j) {
          in = in && colorer::Parity(g & s->masks[j]) == int((s->parities >> j) & 1);
        }
        const bool want = colorer::Parity(g & rows[0]) == int(colour & 1) &&
                          colorer::Parity(g & rows[1]) == int(colour >> 1) &&
                          int((g >> split) & 1) == half;
        EXPECT_EQ(in, want) << "colour " << colour << " half " << half << " g " << g;
      }
    }
  }
  EXPECT_FALSE(ColourSubset({0b11, 0b11}, 0, -1, 0).ok());
  EXPECT_FALSE(ColourSubset({1, 2, 4, 8}, 0, 5, 0).ok());  // five constraints
  EXPECT_EQ(SplitBit({1, 2, 4, 8}, 4), -1);
  EXPECT_DOUBLE_EQ(LargestGapThreshold({0.1, 0.12, 0.6, 0.62}), 0.36);
}

}  // namespace
}  // namespace missile::calibrate

namespace missile::calibrate {
namespace {

// The kernel's enumeration (SubsetGranule) visits every granule of the subset exactly once and
// nothing else, for random reduced constraint sets of up to four masks: what the GPU reads.
TEST(SubsetGranuleTest, EnumeratesExactlyTheSubset) {
  std::mt19937_64 rng(8);
  constexpr int kBits = 13;
  for (int trial = 0; trial < 200; ++trial) {
    const int k = trial % 5;
    colorer::Gf2Basis basis;
    while (basis.rank() < k) basis.Add(rng() & ((1u << kBits) - 1));
    Subset subset;
    for (uint64_t row : basis.rows()) subset.masks.push_back(static_cast<uint32_t>(row));
    subset.parities = static_cast<uint32_t>(rng() & ((1u << k) - 1));
    SubsetParams p{};
    ASSERT_TRUE(FillSubsetConstraints(subset, kBits, p).ok());
    std::vector<int> seen(1 << kBits, 0);
    for (unsigned n = 0; n < (1u << (kBits - k)); ++n) {
      const unsigned g = SubsetGranule(p, n);
      ASSERT_LT(g, 1u << kBits);
      ++seen[g];
    }
    for (unsigned g = 0; g < (1u << kBits); ++g) {
      bool in = true;
      for (int j = 0; j < k; ++j) {
        in = in && colorer::Parity(g & subset.masks[j]) == int((subset.parities >> j) & 1);
      }
      ASSERT_EQ(seen[g], in ? 1 : 0) << "trial " << trial << " granule " << g;
    }
  }
  SubsetParams p{};
  EXPECT_FALSE(FillSubsetConstraints({{0b11, 0b10}, 0}, kBits, p).ok());      // shared pivot
  EXPECT_FALSE(FillSubsetConstraints({{0b100, 0b1}, 0}, kBits, p).ok());      // not ascending
  EXPECT_FALSE(FillSubsetConstraints({{1u << kBits}, 0}, kBits, p).ok());     // outside the chunk
  EXPECT_FALSE(FillSubsetConstraints({{1, 2, 4, 8, 16}, 0}, kBits, p).ok());  // five masks
  EXPECT_FALSE(FillSubsetConstraints({{0}, 0}, kBits, p).ok());
}

TEST(LatencySignatureTest, FindsTheNearFarParity) {
  // 258 cycles near, 312 far, far when bits 9 and 12 of the offset differ; 5 % of granules
  // measured on the wrong side.
  std::mt19937_64 rng(4);
  std::vector<double> cycles(8192);
  for (size_t g = 0; g < cycles.size(); ++g) {
    const uint64_t offset = g << 8;
    bool far = colorer::Parity(offset & 0x1200) == 1;
    if (std::uniform_real_distribution<double>(0, 1)(rng) < 0.05) far = !far;
    cycles[g] = (far ? 312 : 258) + std::normal_distribution<double>(0, 3)(rng);
  }
  absl::StatusOr<LatencySignature> s = LatencySignatureOf(cycles, 8);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(s->mask, 0x1200u);
  EXPECT_NEAR(s->agreement, 0.95, 0.02);
  EXPECT_LT(s->runner_up, 0.6);
  EXPECT_NEAR(s->min, 250, 10);
  EXPECT_FALSE(LatencySignatureOf({1, 2, 3}, 8).ok());

  ChannelScanResult r;
  r.latency = *s;
  const std::string csv = LatencyCsv(r, 8);
  EXPECT_EQ(csv.rfind("offset,cycles_per_load\n0,", 0), 0u);
  EXPECT_EQ(std::count(csv.begin(), csv.end(), '\n'), 1 + 8192);
}

}  // namespace
}  // namespace missile::calibrate
