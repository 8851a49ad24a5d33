// Measurement 1 (streaming read bandwidth of chunk sets) and RunCalibration, which runs all
// three measurements and decides the verdict.

#include <algorithm>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "measure.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {

absl::Status MeasureBandwidth(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                              const Progress& progress) {
  const int blocks = device.info().sm_count * device.blocks_per_sm();
  if (blocks < 1) return absl::FailedPreconditionError("bandwidth: no resident blocks");
  const uint64_t chunk_bytes = device.info().identity.granularity_bytes;
  const uint64_t discard_below = kDiscardBelowL2Multiple * device.info().l2_bytes;
  double lo = 1e18, hi = 0;
  for (const NamedSet& set : BandwidthSets(device.chunk_count(), plan.seed, plan.contiguous_run)) {
    MISSILE_RETURN_IF_ERROR(device.SetList(0, set.chunks));
    const uint64_t bytes = chunk_bytes * set.chunks.size();
    ReadLaunch launch{0, blocks, 1, bytes < discard_below};
    // Warm-up and estimate: one pass, at least ~0.5 ms at 1 TB/s.
    launch.steps = StepsFor(bytes, blocks, 1000, 0.5);
    MISSILE_ASSIGN_OR_RETURN(double warm, device.TimeRead(launch));
    const double estimate = warm > 0 ? BytesRead(launch) / (warm * 1e6) : 1000;
    launch.steps = StepsFor(bytes, blocks, estimate, plan.target_ms);
    std::vector<double> gbps;
    for (int r = 0; r < std::max(plan.bandwidth_repeats, 1); ++r) {
      MISSILE_ASSIGN_OR_RETURN(double ms, device.TimeRead(launch));
      if (ms > 0) gbps.push_back(BytesRead(launch) / (ms * 1e6));
    }
    if (gbps.empty()) return absl::InternalError("bandwidth: every timed launch took 0 ms");
    const double median = Median(gbps);
    lo = std::min(lo, median);
    hi = std::max(hi, median);
    evidence.Add(absl::StrCat("bw_", set.name), median, "GB/s");
    if (launch.discard) evidence.Add(absl::StrCat("bw_", set.name, "_l2_discard"), 1, "bool");
    if (progress) {
      progress(absl::StrFormat("bandwidth %-16s %5zu chunks: %7.0f GB/s%s", set.name,
                               set.chunks.size(), median, launch.discard ? " (L2 discards)" : ""));
    }
  }
  if (hi > 0) {
    evidence.Add("bw_min_over_sets", lo, "GB/s");
    evidence.Add("bw_max_over_sets", hi, "GB/s");
    evidence.Add("bw_spread_over_sets", (hi - lo) / hi, "fraction");
  }
  return absl::OkStatus();
}

absl::StatusOr<Verdict> RunCalibration(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                                       const Progress& progress) {
  const DeviceInfo& info = device.info();
  evidence.Add("device_sm_count", info.sm_count, "SMs");
  evidence.Add("device_l2_cache", static_cast<double>(info.l2_bytes) / (1 << 20), "MiB");
  evidence.Add("device_memory", static_cast<double>(info.total_bytes) / (1 << 30), "GiB");
  evidence.Add("device_sm_clock", info.clock_khz / 1e3, "MHz");
  evidence.Add("stream_blocks_per_sm", device.blocks_per_sm(), "blocks");
  evidence.Add("chunks_allocated", device.chunk_count(), "chunks");
  evidence.Add("seed", static_cast<double>(plan.seed), "");

  MISSILE_RETURN_IF_ERROR(MeasureBandwidth(device, plan, evidence, progress));
  MISSILE_RETURN_IF_ERROR(MeasureSplits(device, plan, evidence, progress));
  MISSILE_ASSIGN_OR_RETURN(VerdictInput input,
                           MeasureClassification(device, plan, evidence, progress));
  MISSILE_RETURN_IF_ERROR(MeasureLatency(device, plan, evidence, progress));

  Verdict verdict = DecideColours(input);
  evidence.Add("verdict_colours", verdict.colours, "colours");
  evidence.Add("verdict_min_same_class_slowdown", verdict.min_same, "fraction");
  evidence.Add("verdict_max_different_class_slowdown", verdict.max_different, "fraction");
  return verdict;
}

}  // namespace missile::calibrate
