#include "channel_report.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {
namespace {

std::vector<int> Bits(uint64_t v) {
  std::vector<int> bits;
  for (; v != 0; v &= v - 1) bits.push_back(std::countr_zero(v));
  return bits;
}

std::string MaskText(uint64_t m) {
  return absl::StrCat("0x", absl::Hex(m), " (bits ", colorer::FormatBitList(Bits(m)), ")");
}

// The spread of the ratios (1.4826 x their median absolute deviation: the noise of a neutral
// mask) and the masks with the lowest ratios, conflicts or not, so that a partial loss below
// the threshold is visible in the report.
void AppendLowest(std::string& out, const SourceResult& s) {
  if (s.observations.empty()) return;
  std::vector<colorer::MaskObservation> sorted = s.observations;
  std::sort(sorted.begin(), sorted.end(),
            [](const auto& a, const auto& b) { return a.ratio < b.ratio; });
  const double median = sorted[sorted.size() / 2].ratio;
  std::vector<double> deviations;
  for (const colorer::MaskObservation& o : sorted)
    deviations.push_back(std::fabs(o.ratio - median));
  std::nth_element(deviations.begin(), deviations.begin() + deviations.size() / 2,
                   deviations.end());
  absl::StrAppendFormat(&out, "  ratios: median %.3f, spread %.3f; lowest:", median,
                        1.4826 * deviations[deviations.size() / 2]);
  for (size_t i = 0; i < std::min<size_t>(8, sorted.size()); ++i) {
    absl::StrAppendFormat(&out, " 0x%x %.3f;", sorted[i].mask, sorted[i].ratio);
  }
  absl::StrAppend(&out, "\n");
}

}  // namespace

absl::StatusOr<colorer::ChannelMapFile> BuildChannelMapFile(
    const GpuIdentity& gpu, const ChannelScanResult& result, const ChannelPlan& plan,
    std::string date, std::string tool_version, double seconds) {
  if (result.sources.empty() || result.primary < 0 ||
      result.primary >= static_cast<int>(result.sources.size())) {
    return absl::InvalidArgumentError("channel scan result without a primary source");
  }
  const SourceResult& src = result.sources[result.primary];
  colorer::ChannelMapFile f;
  f.gpu_name = gpu.name;
  f.uuid = gpu.uuid;
  f.driver_version = gpu.driver_version;
  f.tool_version = std::move(tool_version);
  f.date = std::move(date);
  f.granularity_bytes = gpu.granularity_bytes;
  f.source = src.name;
  f.method = absl::StrFormat(
      "parity-subset bandwidth scan inside one %d KiB chunk, %d B granules, all SMs, %s, %d "
      "sweep(s) of %d masks; %d-fold cross-validation; contention of %d colour pairs",
      gpu.granularity_bytes >> 10, 1 << plan.granule_shift,
      src.discard ? "every line discarded from L2 after reading (DRAM)" : "L2-resident", src.sweeps,
      src.observations.size(), src.folds, result.pairs.size());
  f.fit = src.fit;
  f.verification_accuracy = src.cv_accuracy;
  f.verification_observations = src.cv_predictions;
  f.pair_accuracy = result.pair_accuracy;
  f.pair_observations = static_cast<int>(result.pairs.size());
  f.seconds = seconds;
  MISSILE_RETURN_IF_ERROR(colorer::ValidateChannelMapFile(f));
  return f;
}

std::string PairsCsv(const ChannelScanResult& result) {
  std::string out =
      "victim_colour,aggressor_colour,predicted_conflict,alone_gbps,under_gbps,slowdown,"
      "measured_conflict\n";
  for (const PairMeasurement& p : result.pairs) {
    absl::StrAppendFormat(&out, "%d,%d,%d,%.1f,%.1f,%.4f,%d\n", p.victim_colour, p.aggressor_colour,
                          p.predicted_conflict ? 1 : 0, p.alone_gbps, p.under_gbps, p.slowdown,
                          p.measured_conflict ? 1 : 0);
  }
  return out;
}

std::string ScanCsv(const ChannelScanResult& result) {
  std::string out = "source,mask,bits,ratio,conflict,in_fit_span\n";
  for (const SourceResult& s : result.sources) {
    const colorer::Gf2Basis basis(s.fit.masks);
    for (const colorer::MaskObservation& o : s.observations) {
      absl::StrAppendFormat(&out, "%s,0x%x,%d,%.4f,%d,%d\n", s.name, o.mask, std::popcount(o.mask),
                            o.ratio, o.ratio < s.threshold ? 1 : 0, basis.Contains(o.mask) ? 1 : 0);
    }
  }
  return out;
}

std::string LatencyCsv(const ChannelScanResult& result, int granule_shift) {
  std::string out = "offset,cycles_per_load\n";
  for (size_t g = 0; g < result.latency.cycles.size(); ++g) {
    absl::StrAppendFormat(&out, "%d,%.1f\n", g << granule_shift, result.latency.cycles[g]);
  }
  return out;
}

// long: a report is a fixed sequence of sections; each is a few formatted lines.
std::string ChannelReport(const colorer::ChannelMapFile& file, const ChannelScanResult& result) {
  std::string out =
      absl::StrFormat("channel map of %s %s (%s)\n", file.gpu_name, file.uuid, file.driver_version);
  absl::StrAppendFormat(&out, "method: %s\n", file.method);
  absl::StrAppendFormat(&out, "time taken: %.1f s\n\n", file.seconds);
  for (const SourceResult& s : result.sources) {
    absl::StrAppendFormat(&out,
                          "source %s: whole chunk %.0f GB/s, typical half %.0f GB/s, %d sweep(s)\n",
                          s.name, s.full_chunk_gbps, s.half_gbps, s.sweeps);
    absl::StrAppendFormat(&out,
                          "  fit: rank %d = %d channel groups over bits %d-%d; threshold %.3f; "
                          "agreement %.4f (%d of %d masks contradict); confidence %.3f\n",
                          s.fit.rank(), s.fit.groups(), s.fit.low_bit, s.fit.high_bit - 1,
                          s.threshold, s.fit.agreement, s.fit.disagreements, s.fit.observations,
                          s.fit.confidence);
    for (size_t i = 0; i < s.fit.masks.size(); ++i) {
      absl::StrAppendFormat(&out, "  group bit %d = parity of %s\n", i, MaskText(s.fit.masks[i]));
    }
    AppendLowest(out, s);
    if (s.sensitive_rank >= 0) {
      absl::StrAppendFormat(&out,
                            "  at the noise threshold %.3f instead (report only): rank %d, "
                            "agreement %.4f, cross-validated %.4f",
                            s.sensitive_threshold, s.sensitive_rank, s.sensitive_fit.agreement,
                            s.sensitive_cv_accuracy);
      for (uint64_t m : s.sensitive_fit.masks) absl::StrAppendFormat(&out, " 0x%x", m);
      absl::StrAppend(&out, "\n");
    }
    absl::StrAppendFormat(&out,
                          "  %d-fold cross-validation: %d masks predicted by fits that did not "
                          "see them, right: %.4f; %d of %d fold fits equal the function\n",
                          s.folds, s.cv_predictions, s.cv_accuracy, s.folds_matching, s.folds);
  }
  if (result.latency.measured) {
    const LatencySignature& l = result.latency;
    absl::StrAppendFormat(&out,
                          "L2-hit latency per granule, one thread: %.0f-%.0f cycles (median %.0f);"
                          " far (above the median) = parity of %s ^ c for %.4f of the granules "
                          "(next best mask %.4f)\n",
                          l.min, l.max, l.median, MaskText(l.mask), l.agreement, l.runner_up);
  }
  absl::StrAppendFormat(&out, "\nfunction carried by the map file: source %s\n", file.source);
  if (result.pairs.empty()) {
    absl::StrAppend(&out, "contention per colour pair: not measured (one channel group)\n");
  } else {
    absl::StrAppendFormat(&out,
                          "contention per colour pair (%d colours from the first %d group bits; "
                          "victim alone -> under aggressor, GB/s):\n",
                          1 << result.pair_rows, result.pair_rows);
    for (const PairMeasurement& p : result.pairs) {
      absl::StrAppendFormat(&out, "  victim %d aggressor %d: %7.0f -> %7.0f slowdown %.3f%s%s\n",
                            p.victim_colour, p.aggressor_colour, p.alone_gbps, p.under_gbps,
                            p.slowdown, p.predicted_conflict ? " (same colour)" : "",
                            p.measured_conflict != p.predicted_conflict ? " MISPREDICTED" : "");
    }
    absl::StrAppendFormat(&out, "  threshold %.3f, predictions right: %.3f\n",
                          result.pair_threshold, result.pair_accuracy);
  }
  absl::StrAppend(&out, "\ncolours per VMM granularity by the recovered function:\n");
  for (uint64_t g : {uint64_t{4} << 10, uint64_t{64} << 10, uint64_t{2} << 20}) {
    absl::StatusOr<colorer::GranularityColours> c = colorer::ColoursAtGranularity(file.fit, g);
    if (c.ok()) absl::StrAppendFormat(&out, "  %s\n", c->reason);
  }
  return out;
}

}  // namespace missile::calibrate
