// The measurement pipeline against a model GPU: H200-like numbers (docs/hardware/h200.md),
// chunks coloured by index, interference proportional to shared colours.

#include "measure.h"

#include <algorithm>
#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"

namespace missile::calibrate {
namespace {

constexpr uint64_t kChunk = uint64_t{2} << 20;
constexpr uint64_t kBase = uint64_t{0x7f0000000000};

class ModelDevice final : public MeasureDevice {
 public:
  struct Options {
    uint32_t chunks = 256;
    int colours = 1;                   // chunk i has colour i % colours
    double full_sharing = 0.5;         // slowdown when the aggressor covers the victim's colours
    bool discard_reaches_dram = true;  // false: small discarded sets are still L2 hits
    int fail_after_unders = -1;        // TimeReadUnder fails (INTERNAL) after this many calls
    bool overlap = true;               // false: the aggressor never overlaps the victim
  };

  explicit ModelDevice(Options o) : o_(o) {
    info_.identity = {"Model H200", "GPU-00000000-0000-0000-0000-000000000000", "model", kChunk};
    info_.sm_count = 132;
    info_.cc_major = 9;
    info_.l2_bytes = 60 << 20;
    info_.total_bytes = uint64_t{141} << 30;
    info_.clock_khz = 1980000;
  }

  const DeviceInfo& info() const override { return info_; }
  int blocks_per_sm() const override { return 6; }
  uint32_t chunk_count() const override { return o_.chunks; }
  uint64_t chunk_address(uint32_t c) const override { return kBase + uint64_t{c} * 2 * kChunk; }

  absl::Status SetList(int list, const ChunkList& chunks) override {
    if (list < 0 || list >= kLists || chunks.empty()) return absl::InvalidArgumentError("list");
    for (uint32_t c : chunks) {
      if (c >= o_.chunks) return absl::InvalidArgumentError("chunk");
    }
    lists_[list] = chunks;
    return absl::OkStatus();
  }

  absl::StatusOr<double> TimeRead(const ReadLaunch& r) override {
    ++reads_;
    absl::StatusOr<double> bw = Alone(r);
    if (!bw.ok()) return bw.status();
    return Ms(r, *bw);
  }

  absl::StatusOr<double> TimeReadUnder(const ReadLaunch& v, const ReadLaunch& a) override {
    if (o_.fail_after_unders >= 0 && unders_ >= o_.fail_after_unders) {
      return absl::InternalError("model: cuLaunchKernel failed");
    }
    ++unders_;
    if (!o_.overlap) return absl::FailedPreconditionError("model: no overlap");
    if (v.list == a.list || lists_[a.list].empty()) return absl::InvalidArgumentError("lists");
    absl::StatusOr<double> bw = Alone(v);
    if (!bw.ok()) return bw.status();
    std::set<int> victim, aggressor;
    for (uint32_t c : lists_[v.list]) victim.insert(static_cast<int>(c % o_.colours));
    for (uint32_t c : lists_[a.list]) aggressor.insert(static_cast<int>(c % o_.colours));
    int shared = 0;
    for (int c : victim) shared += aggressor.count(c) > 0;
    const double overlap = static_cast<double>(shared) / victim.size();
    return Ms(v, *bw * (1 - o_.full_sharing * overlap));
  }

  absl::StatusOr<std::vector<uint64_t>> ChaseCycles(const std::vector<uint64_t>& probes,
                                                    uint32_t iters) override {
    std::vector<uint64_t> out;
    for (uint64_t p : probes) {
      if (p % 8 != 0 || p < kBase) return absl::InvalidArgumentError("probe");
      // L2 hits of 258..312 cycles, changing every 256 bytes (docs/hardware/h200.md,
      // "VRAM channels").
      out.push_back(iters * (258 + 6 * ((p >> 8) % 10)));
    }
    return out;
  }

  int unders() const { return unders_; }

 private:
  absl::StatusOr<double> Alone(const ReadLaunch& r) const {
    if (r.list < 0 || r.list >= kLists || lists_[r.list].empty() || r.blocks < 1) {
      return absl::InvalidArgumentError("launch");
    }
    // 639 GB/s for 33 SMs' worth of blocks, 4.37 TB/s at most (docs/hardware/h200.md,
    // "VRAM channels").
    double bw = std::min(4370.0, 639.0 / (33 * 6) * r.blocks);
    const bool small = lists_[r.list].size() * kChunk < info_.l2_bytes;
    if (small && (!r.discard || !o_.discard_reaches_dram)) bw *= 2;
    return bw;
  }
  double Ms(const ReadLaunch& r, double gbps) {
    const double noise = 1 + 0.005 * std::sin(++calls_);  // deterministic jitter
    return BytesRead(r) / (gbps * 1e6) * noise;
  }

  Options o_;
  DeviceInfo info_;
  ChunkList lists_[kLists];
  int reads_ = 0;
  int unders_ = 0;
  int calls_ = 0;
};

Plan TestPlan(uint32_t chunks, uint32_t sample) {
  CalibrateArgs args;
  args.quick = true;
  args.chunks = chunks;
  args.sample = sample;
  return MakePlan(args);
}

absl::StatusOr<Verdict> Calibrate(ModelDevice& device, const Plan& plan, Evidence& evidence) {
  std::vector<std::string> lines;
  return RunCalibration(device, plan, evidence, [&](const std::string& l) { lines.push_back(l); });
}

TEST(RunCalibration, UniformGpuIsOneColour) {
  ModelDevice device({});
  Evidence e;
  absl::StatusOr<Verdict> v = Calibrate(device, TestPlan(256, 16), e);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->colours, 1);
  EXPECT_NE(v->reason.find("every sampled chunk"), std::string::npos) << v->reason;
  // The model scales 639 GB/s per 33 SMs' worth of blocks: 2556 GB/s with all 132.
  EXPECT_NEAR(e.Find("bw_all"), 2556, 30);
  EXPECT_NEAR(e.Find("bw_random_1_16"), 2556, 30);  // 32 MiB: read with discards
  EXPECT_EQ(e.Find("bw_random_1_16_l2_discard"), 1);
  EXPECT_NEAR(e.Find("split_even_odd_slowdown"), 0.5, 0.02);
  EXPECT_NEAR(e.Find("split_random_half_s1_victim_alone"), 639, 10);
  EXPECT_EQ(e.Find("interference_victim_sms"), 33);
  EXPECT_EQ(e.Find("classifier_classes"), 1);
  EXPECT_EQ(e.Find("classifier_finished"), 1);
  EXPECT_LE(e.Find("classifier_oracle_calls"), e.Find("classifier_call_bound"));
  EXPECT_EQ(e.Find("latency_constant_block"), 256);
  EXPECT_NEAR(e.Find("latency_scan_min"), 258, 0.5);
  EXPECT_GT(e.Find("latency_stride_256B_changes"), 0.5);
  EXPECT_EQ(e.Find("verdict_colours"), 1);
  EXPECT_LT(e.Find("oracle_discard_to_dram_ratio"), 1.5);
}

TEST(RunCalibration, FindsColoursWhereTheyExist) {
  for (int colours : {2, 4}) {
    ModelDevice::Options o;
    o.colours = colours;
    ModelDevice device(o);
    Evidence e;
    absl::StatusOr<Verdict> v = Calibrate(device, TestPlan(256, 32), e);
    ASSERT_TRUE(v.ok()) << v.status();
    EXPECT_EQ(v->colours, colours) << v->reason;
    EXPECT_EQ(e.Find("classifier_classes"), colours);
    EXPECT_NEAR(e.Find("split_random_half_s1_slowdown"), 0.5, 0.02);
    if (colours == 2) {
      EXPECT_NEAR(e.Find("split_even_odd_slowdown"), 0, 0.02);
    }
  }
}

TEST(RunCalibration, ColoursSeenThroughTheL2AreNotTrusted) {
  ModelDevice::Options o;
  o.colours = 2;
  o.discard_reaches_dram = false;
  ModelDevice device(o);
  Evidence e;
  absl::StatusOr<Verdict> v = Calibrate(device, TestPlan(256, 16), e);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->colours, 1);
  EXPECT_NE(v->reason.find("L2"), std::string::npos) << v->reason;
  EXPECT_GT(e.Find("oracle_discard_to_dram_ratio"), 1.5);
}

TEST(RunCalibration, NoContentionMeansNothingToClassify) {
  ModelDevice::Options o;
  o.full_sharing = 0.02;
  ModelDevice device(o);
  Evidence e;
  absl::StatusOr<Verdict> v = Calibrate(device, TestPlan(64, 8), e);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->colours, 1);
  EXPECT_NE(v->reason.find("no contention"), std::string::npos) << v->reason;
  EXPECT_TRUE(std::isnan(e.Find("classifier_classes")));
}

TEST(RunCalibration, DeviceErrorsStopIt) {
  ModelDevice::Options o;
  o.fail_after_unders = 4;
  ModelDevice device(o);
  Evidence e;
  absl::StatusOr<Verdict> v = Calibrate(device, TestPlan(64, 8), e);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kInternal);

  ModelDevice::Options apart;
  apart.overlap = false;
  ModelDevice device2(apart);
  v = Calibrate(device2, TestPlan(64, 8), e);
  EXPECT_EQ(v.status().code(), absl::StatusCode::kFailedPrecondition);
}

TEST(RunCalibration, OracleCallsAreBudgeted) {
  // Every chunk its own colour: the classifier runs out of budget, the verdict is 1.
  ModelDevice::Options o;
  o.colours = 64;
  ModelDevice device(o);
  Plan plan = TestPlan(64, 64);
  plan.max_oracle_calls = 40;
  Evidence e;
  absl::StatusOr<Verdict> v = Calibrate(device, plan, e);
  ASSERT_TRUE(v.ok()) << v.status();
  EXPECT_EQ(v->colours, 1);
  EXPECT_LE(device.unders(), 40 * plan.oracle_repeats + 200);
}

TEST(GpuInterferenceOracle, MapsSampleIndices) {
  ModelDevice::Options o;
  o.colours = 2;
  ModelDevice device(o);
  absl::StatusOr<InterferenceMeter> meter = InterferenceMeter::Create(device, 1, 3);
  ASSERT_TRUE(meter.ok());
  GpuInterferenceOracle oracle(*meter, {10, 12, 11});
  EXPECT_NEAR(*oracle.Slowdown({0}, {1}), 0.5, 0.02);  // chunks 10 and 12: same colour
  EXPECT_NEAR(*oracle.Slowdown({0}, {2}), 0.0, 0.02);  // 10 and 11: different
  EXPECT_EQ(oracle.Slowdown({0}, {3}).status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(oracle.calls(), 2);
}

TEST(Helpers, StepsForAndMedian) {
  const uint64_t per_step = uint64_t{kUnroll} * kVecBytes * kBlockThreads * 10;
  EXPECT_EQ(StepsFor(per_step * 5, 10, 0, 0), 5u);                // one pass at least
  const uint64_t timed = StepsFor(1, 10, 1, per_step / 1e6 * 7);  // target time at 1 GB/s
  EXPECT_TRUE(timed == 7 || timed == 8) << timed;
  EXPECT_EQ(StepsFor(1, 10, 1e30, 1e30), uint64_t{1} << 24);  // capped
  EXPECT_EQ(StepsFor(0, 0, 0, 0), 1u);
  EXPECT_DOUBLE_EQ(Median({3, 1, 2}), 2);
  EXPECT_DOUBLE_EQ(Median({4, 1, 2, 3}), 2.5);
  EXPECT_DOUBLE_EQ(Median({}), 0);
}

}  // namespace
}  // namespace missile::calibrate
