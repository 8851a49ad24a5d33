// The calibration measurements, over a MeasureDevice (a GPU, or a model in tests). Each
// appends its results to an Evidence list ({name, value, unit}); RunCalibration runs them all
// and decides the verdict.
//
// Measurements (see docs in each function):
// 1. MeasureBandwidth: streaming read bandwidth of chunk sets, all SMs, GB/s.
// 2. MeasureSplits + MeasureClassification: interference. A victim on a quarter of the SMs'
//    worth of blocks reads set A while an aggressor on the rest streams a disjoint set B, both in
//    one context on two non-blocking streams; slowdown = 1 - bw_under / bw_alone.
// 3. MeasureLatency: single-thread L2-hit pointer chase by address, cycles per load.
//
// Contract: errors from the device pass through unchanged (the caller stops); classifier
// failures that only mean "no clean answer" (too many classes, budget spent) become a verdict
// of 1 colour with the reason. Not thread-safe: one thread, one device.

#ifndef MISSILE_COLORER_CALIBRATE_MEASURE_H_
#define MISSILE_COLORER_CALIBRATE_MEASURE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"
#include "args.h"
#include "chunk_sets.h"
#include "measure_device.h"
#include "missile/colorer/classifier.h"
#include "report.h"
#include "verdict.h"

namespace missile::calibrate {

// Receives one progress line per step (for the log); may be empty.
using Progress = std::function<void(const std::string&)>;

// Sets smaller than this many L2 sizes are read with L2 discards so they still measure DRAM
// (the H200's L2 is 60 MB, docs/hardware/h200.md, "The machine").
inline constexpr uint64_t kDiscardBelowL2Multiple = 4;

struct InterferenceSample {
  double alone_gbps = 0;
  double under_gbps = 0;
  double slowdown = 0;  // 1 - under / alone (medians)
};

// Runs victim-alone / victim-under-aggression pairs. The victim gets victim_sms * blocks_per_sm
// blocks and the aggressor the rest of the GPU's resident blocks, so both are resident at once.
// Blocks are not pinned to SMs (that would need green contexts): the split bounds each reader's
// concurrency, which is what limits its bandwidth.
class InterferenceMeter {
 public:
  // victim_sms: a quarter of the SMs (33 of 132 on the H200, as in docs/hardware/h200.md,
  // "VRAM channels").
  static absl::StatusOr<InterferenceMeter> Create(MeasureDevice& device, double target_ms,
                                                  int repeats);

  int victim_sms() const { return victim_sms_; }
  int victim_blocks() const { return victim_blocks_; }
  int aggressor_blocks() const { return aggressor_blocks_; }

  // `repeats` interleaved alone/under pairs after one warm-up; medians.
  absl::StatusOr<InterferenceSample> Measure(const ChunkList& victim_set,
                                             const ChunkList& aggressor_set, bool discard);
  // The victim alone (median of `repeats`), GB/s.
  absl::StatusOr<double> AloneGbps(const ChunkList& victim_set, bool discard);

 private:
  InterferenceMeter(MeasureDevice& device, double target_ms, int repeats, int victim_sms,
                    int victim_blocks, int aggressor_blocks)
      : device_(&device),
        target_ms_(target_ms),
        repeats_(repeats),
        victim_sms_(victim_sms),
        victim_blocks_(victim_blocks),
        aggressor_blocks_(aggressor_blocks) {}
  absl::StatusOr<ReadLaunch> VictimLaunch(size_t set_chunks, bool discard);
  // Reads of one key run at about the same speed: 0 plain DRAM-sized, 1 plain cache-sized,
  // 2 with discards.
  int EstimateKey(size_t set_chunks, bool discard) const;

  MeasureDevice* device_;
  double target_ms_;
  int repeats_;
  int victim_sms_;
  int victim_blocks_;
  int aggressor_blocks_;
  std::map<int, double> estimate_gbps_;  // by EstimateKey: the last victim-alone GB/s
};

// The classifier's oracle on the GPU: index i of a chunk list means sample[i].
class GpuInterferenceOracle final : public colorer::InterferenceOracle {
 public:
  GpuInterferenceOracle(InterferenceMeter& meter, ChunkList sample)
      : meter_(meter), sample_(std::move(sample)) {}
  // INVALID_ARGUMENT for an index outside the sample; otherwise the meter's slowdown with L2
  // discards (the sets are a few chunks, far smaller than the L2).
  absl::StatusOr<double> Slowdown(const std::vector<colorer::ChunkIndex>& a,
                                  const std::vector<colorer::ChunkIndex>& b) override;
  int64_t calls() const { return calls_; }

 private:
  InterferenceMeter& meter_;
  ChunkList sample_;
  int64_t calls_ = 0;
};

// Picks the read (steps) that covers `set_chunks` once and lasts about target_ms at `gbps`.
uint64_t StepsFor(uint64_t set_bytes, int blocks, double gbps, double target_ms);
// The median of a non-empty list.
double Median(std::vector<double> v);

absl::Status MeasureBandwidth(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                              const Progress& progress);
absl::Status MeasureSplits(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                           const Progress& progress);
// Calibrates the classifier threshold, checks the oracle reaches DRAM, runs ClassifyChunks on
// plan.sample chunks and returns the verdict's table.
absl::StatusOr<VerdictInput> MeasureClassification(MeasureDevice& device, const Plan& plan,
                                                   Evidence& evidence, const Progress& progress);
absl::Status MeasureLatency(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                            const Progress& progress);

// All of the above, then the verdict (also added to the evidence).
absl::StatusOr<Verdict> RunCalibration(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                                       const Progress& progress);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_MEASURE_H_
