// Measurement 2: interference between concurrent readers, and the colour classification.

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "measure.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {
namespace {

// The classifier runs only when a sample's two halves slow each other down by at least this
// much: a fifth of full sharing on the H200 (0.5: 639 GB/s alone, 322 GB/s under aggression,
// docs/hardware/h200.md, "VRAM channels"). Below it there is no contention to sort chunks by.
constexpr double kMinReferenceSlowdown = 0.10;
// A single 2 MiB chunk read with L2 discards must not beat a DRAM-bound set of half the chunks
// by more than this factor; a cached read on the H200 has about half the latency of a DRAM read
// (L2 hit ~280 cycles, docs/hardware/h200.md, "VRAM channels"), so an L2-served victim would
// read about 2x faster.
constexpr double kDramRatioLimit = 1.5;
// Steps are capped so that a wrong bandwidth estimate cannot make one launch run for minutes.
constexpr uint64_t kMaxSteps = uint64_t{1} << 24;

uint64_t SetBytes(const MeasureDevice& device, size_t chunks) {
  return device.info().identity.granularity_bytes * chunks;
}

double Gbps(uint64_t bytes, double ms) { return ms > 0 ? bytes / (ms * 1e6) : 0; }

}  // namespace

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  if (n == 0) return 0;
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

uint64_t StepsFor(uint64_t set_bytes, int blocks, double gbps, double target_ms) {
  const double per_step = double{kUnroll} * kVecBytes * kBlockThreads * std::max(blocks, 1);
  const double target = std::max(static_cast<double>(set_bytes), gbps * 1e6 * target_ms);
  const double steps = std::ceil(target / per_step);
  return static_cast<uint64_t>(std::clamp(steps, 1.0, static_cast<double>(kMaxSteps)));
}

absl::StatusOr<InterferenceMeter> InterferenceMeter::Create(MeasureDevice& device, double target_ms,
                                                            int repeats) {
  const int sms = device.info().sm_count;
  const int per_sm = device.blocks_per_sm();
  if (sms < 2 || per_sm < 1) {
    return absl::FailedPreconditionError(
        absl::StrCat("interference needs two SM shares; the device has ", sms, " SMs and ", per_sm,
                     " resident blocks per SM"));
  }
  const int victim_sms = std::clamp((sms + 2) / 4, 1, sms - 1);
  return InterferenceMeter(device, target_ms, std::max(repeats, 1), victim_sms, victim_sms * per_sm,
                           (sms - victim_sms) * per_sm);
}

int InterferenceMeter::EstimateKey(size_t set_chunks, bool discard) const {
  if (discard) return 2;
  const uint64_t cached_below = kDiscardBelowL2Multiple * device_->info().l2_bytes;
  return SetBytes(*device_, set_chunks) < cached_below ? 1 : 0;
}

absl::StatusOr<ReadLaunch> InterferenceMeter::VictimLaunch(size_t set_chunks, bool discard) {
  ReadLaunch launch{0, victim_blocks_, 1, discard};
  const uint64_t bytes = SetBytes(*device_, set_chunks);
  auto it = estimate_gbps_.find(EstimateKey(set_chunks, discard));
  if (it == estimate_gbps_.end()) {
    // First use of this kind of read: one pass, at least ~1 ms at 100 GB/s, for an estimate.
    launch.steps = StepsFor(bytes, victim_blocks_, 100, 1);
    MISSILE_ASSIGN_OR_RETURN(double ms, device_->TimeRead(launch));
    it =
        estimate_gbps_.emplace(EstimateKey(set_chunks, discard), Gbps(BytesRead(launch), ms)).first;
  }
  launch.steps = StepsFor(bytes, victim_blocks_, it->second, target_ms_);
  return launch;
}

absl::StatusOr<double> InterferenceMeter::AloneGbps(const ChunkList& victim_set, bool discard) {
  MISSILE_RETURN_IF_ERROR(device_->SetList(0, victim_set));
  MISSILE_ASSIGN_OR_RETURN(ReadLaunch victim, VictimLaunch(victim_set.size(), discard));
  std::vector<double> gbps;
  for (int r = 0; r < repeats_; ++r) {
    MISSILE_ASSIGN_OR_RETURN(double ms, device_->TimeRead(victim));
    gbps.push_back(Gbps(BytesRead(victim), ms));
  }
  return Median(gbps);
}

absl::StatusOr<InterferenceSample> InterferenceMeter::Measure(const ChunkList& victim_set,
                                                              const ChunkList& aggressor_set,
                                                              bool discard) {
  MISSILE_RETURN_IF_ERROR(device_->SetList(0, victim_set));
  MISSILE_RETURN_IF_ERROR(device_->SetList(1, aggressor_set));
  MISSILE_ASSIGN_OR_RETURN(ReadLaunch victim, VictimLaunch(victim_set.size(), discard));
  const ReadLaunch aggressor{1, aggressor_blocks_, 0, discard};
  if (absl::StatusOr<double> warm = device_->TimeRead(victim); !warm.ok()) return warm.status();
  std::vector<double> alone, under;
  for (int r = 0; r < repeats_; ++r) {
    MISSILE_ASSIGN_OR_RETURN(double a, device_->TimeRead(victim));
    MISSILE_ASSIGN_OR_RETURN(double u, device_->TimeReadUnder(victim, aggressor));
    alone.push_back(Gbps(BytesRead(victim), a));
    under.push_back(Gbps(BytesRead(victim), u));
  }
  InterferenceSample s;
  s.alone_gbps = Median(alone);
  s.under_gbps = Median(under);
  s.slowdown = s.alone_gbps > 0 ? 1.0 - s.under_gbps / s.alone_gbps : 0;
  estimate_gbps_[EstimateKey(victim_set.size(), discard)] = s.alone_gbps;
  return s;
}

absl::StatusOr<double> GpuInterferenceOracle::Slowdown(const std::vector<colorer::ChunkIndex>& a,
                                                       const std::vector<colorer::ChunkIndex>& b) {
  auto map = [&](const std::vector<colorer::ChunkIndex>& in) -> absl::StatusOr<ChunkList> {
    ChunkList out;
    for (colorer::ChunkIndex i : in) {
      if (i >= sample_.size()) {
        return absl::InvalidArgumentError(
            absl::StrCat("oracle: chunk index ", i, " outside the sample of ", sample_.size()));
      }
      out.push_back(sample_[i]);
    }
    return out;
  };
  MISSILE_ASSIGN_OR_RETURN(ChunkList victim, map(a));
  MISSILE_ASSIGN_OR_RETURN(ChunkList aggressor, map(b));
  if (victim.empty() || aggressor.empty()) {
    return absl::InvalidArgumentError("oracle: empty chunk set");
  }
  ++calls_;
  MISSILE_ASSIGN_OR_RETURN(InterferenceSample s,
                           meter_.Measure(victim, aggressor, /*discard=*/true));
  return s.slowdown;
}

absl::Status MeasureSplits(MeasureDevice& device, const Plan& plan, Evidence& evidence,
                           const Progress& progress) {
  MISSILE_ASSIGN_OR_RETURN(InterferenceMeter meter,
                           InterferenceMeter::Create(device, plan.target_ms, plan.split_repeats));
  evidence.Add("interference_victim_sms", meter.victim_sms(), "SMs");
  evidence.Add("interference_victim_blocks", meter.victim_blocks(), "blocks");
  evidence.Add("interference_aggressor_blocks", meter.aggressor_blocks(), "blocks");
  const uint64_t discard_below = kDiscardBelowL2Multiple * device.info().l2_bytes;
  double lo = 1e9, hi = -1e9;
  for (const NamedSplit& split : InterferenceSplits(device.chunk_count(), plan.half_seeds)) {
    const bool discard =
        SetBytes(device, std::min(split.victim.size(), split.aggressor.size())) < discard_below;
    MISSILE_ASSIGN_OR_RETURN(InterferenceSample s,
                             meter.Measure(split.victim, split.aggressor, discard));
    const std::string key = absl::StrCat("split_", split.name);
    evidence.Add(key + "_victim_alone", s.alone_gbps, "GB/s");
    evidence.Add(key + "_victim_under", s.under_gbps, "GB/s");
    evidence.Add(key + "_slowdown", s.slowdown, "fraction");
    lo = std::min(lo, s.slowdown);
    hi = std::max(hi, s.slowdown);
    if (progress) {
      progress(
          absl::StrFormat("interference %s (%zu vs %zu chunks): alone %.0f GB/s, under %.0f "
                          "GB/s, slowdown %.3f",
                          split.name, split.victim.size(), split.aggressor.size(), s.alone_gbps,
                          s.under_gbps, s.slowdown));
    }
  }
  if (hi >= lo) {
    evidence.Add("split_slowdown_min", lo, "fraction");
    evidence.Add("split_slowdown_max", hi, "fraction");
  }
  return absl::OkStatus();
}

// long: one measurement pipeline (DRAM reach check, oracle calibration, classification),
// whose stages feed their numbers to the next and to the evidence in order.
absl::StatusOr<VerdictInput> MeasureClassification(MeasureDevice& device, const Plan& plan,
                                                   Evidence& evidence, const Progress& progress) {
  MISSILE_ASSIGN_OR_RETURN(
      InterferenceMeter meter,
      InterferenceMeter::Create(device, plan.oracle_target_ms, plan.oracle_repeats));
  const uint32_t n = device.chunk_count();
  const ChunkList sample = SampleChunks(n, plan.sample, plan.seed ^ 0x5a3c0fULL);
  if (sample.size() < 2) return absl::FailedPreconditionError("classification needs 2 chunks");

  // Does a one-chunk read with L2 discards reach DRAM? Compare with a large DRAM-bound set.
  MISSILE_ASSIGN_OR_RETURN(double one_plain, meter.AloneGbps({sample[0]}, false));
  MISSILE_ASSIGN_OR_RETURN(double one_discard, meter.AloneGbps({sample[0]}, true));
  MISSILE_ASSIGN_OR_RETURN(double large, meter.AloneGbps(RandomSubset(n, 2, plan.seed + 7), false));
  const double ratio = large > 0 ? one_discard / large : 0;
  evidence.Add("oracle_one_chunk_plain_alone", one_plain, "GB/s");
  evidence.Add("oracle_one_chunk_discard_alone", one_discard, "GB/s");
  evidence.Add("oracle_half_chunks_alone", large, "GB/s");
  evidence.Add("oracle_discard_to_dram_ratio", ratio, "ratio");

  VerdictInput input;
  input.oracle_reaches_dram = ratio < kDramRatioLimit;
  GpuInterferenceOracle oracle(meter, sample);
  // The slowdown of chunks that certainly share channels sets the threshold: the two halves of
  // the sample, and one chunk (the classifier's victim) against all the others; with a sample
  // much larger than the colour count, every colour is on both sides.
  std::vector<colorer::ChunkIndex> even, odd, others;
  for (colorer::ChunkIndex i = 0; i < sample.size(); ++i) (i % 2 == 0 ? even : odd).push_back(i);
  for (colorer::ChunkIndex i = 1; i < sample.size(); ++i) others.push_back(i);
  MISSILE_ASSIGN_OR_RETURN(double ref_halves, oracle.Slowdown(even, odd));
  MISSILE_ASSIGN_OR_RETURN(double ref_single, oracle.Slowdown({0}, others));
  const double reference = std::min(ref_halves, ref_single);
  evidence.Add("classifier_reference_halves_slowdown", ref_halves, "fraction");
  evidence.Add("classifier_reference_one_vs_rest_slowdown", ref_single, "fraction");
  if (progress) {
    progress(
        absl::StrFormat("oracle: one chunk %.0f GB/s plain, %.0f GB/s with discards, half "
                        "the chunks %.0f GB/s; reference slowdown %.3f / %.3f",
                        one_plain, one_discard, large, ref_halves, ref_single));
  }
  if (reference < kMinReferenceSlowdown) {
    input.failure = absl::StrFormat(
        "chunks that must share channels slow each other by only %.3f < %.2f: no contention "
        "to classify by",
        reference, kMinReferenceSlowdown);
    return input;
  }

  colorer::ClassifierOptions options;
  options.threshold = std::clamp(reference / 2, 0.05, 0.45);
  options.ambiguity = 0.4 * options.threshold;
  options.max_repeats = plan.classifier_max_repeats;
  options.probe_group_size = 4;
  options.max_classes = static_cast<int>(std::min<size_t>(64, sample.size()));
  options.max_oracle_calls = plan.max_oracle_calls;
  evidence.Add("classifier_sample_chunks", static_cast<double>(sample.size()), "chunks");
  evidence.Add("classifier_threshold", options.threshold, "fraction");
  const int64_t calls_before = oracle.calls();
  absl::StatusOr<colorer::ClassificationResult> result =
      colorer::ClassifyChunks(static_cast<int>(sample.size()), oracle, options);
  evidence.Add("classifier_oracle_calls", static_cast<double>(oracle.calls() - calls_before),
               "calls");
  if (!result.ok()) {
    const absl::StatusCode code = result.status().code();
    if (code != absl::StatusCode::kFailedPrecondition &&
        code != absl::StatusCode::kResourceExhausted) {
      return result.status();  // the device failed
    }
    input.failure = std::string(result.status().message());
    evidence.Add("classifier_finished", 0, "bool");
    return input;
  }
  const colorer::ClassifierEvidence& ev = result->evidence;
  evidence.Add("classifier_finished", 1, "bool");
  evidence.Add("classifier_classes", static_cast<double>(result->classes.size()), "classes");
  evidence.Add("classifier_call_bound", static_cast<double>(result->call_bound), "calls");
  evidence.Add("classifier_confidence", ev.confidence, "fraction");
  evidence.Add("classifier_decisions", ev.measurements, "decisions");
  evidence.Add("classifier_repeated_decisions", ev.repeated_measurements, "decisions");
  evidence.Add("classifier_ambiguous_decisions", ev.ambiguous_measurements, "decisions");
  evidence.Add("classifier_min_same_slowdown", ev.min_same, "fraction");
  evidence.Add("classifier_max_different_slowdown", ev.max_different, "fraction");
  evidence.Add("classifier_merged_classes", ev.merged_classes, "classes");
  evidence.Add("classifier_split_suspects", ev.split_suspects, "classes");
  for (size_t c = 0; c < result->classes.size() && c < 16; ++c) {
    evidence.Add(absl::StrCat("classifier_class_", c, "_size"),
                 static_cast<double>(result->classes[c].size()), "chunks");
  }
  VerdictInput classified = VerdictInputFrom(*result);
  classified.oracle_reaches_dram = input.oracle_reaches_dram;
  if (progress) {
    progress(absl::StrFormat(
        "classifier: %zu class(es) from %zu chunks, %d oracle calls, "
        "confidence %.2f",
        result->classes.size(), sample.size(), result->oracle_calls, ev.confidence));
  }
  return classified;
}

}  // namespace missile::calibrate
