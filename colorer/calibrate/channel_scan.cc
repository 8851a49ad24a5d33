#include "channel_scan.h"

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <limits>
#include <numeric>
#include <random>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {
namespace {

using Clock = std::chrono::steady_clock;

double Median(std::vector<double> v) {
  if (v.empty()) return 0;
  const size_t mid = v.size() / 2;
  std::nth_element(v.begin(), v.begin() + static_cast<std::ptrdiff_t>(mid), v.end());
  return v[mid];
}

double SecondsSince(Clock::time_point t) {
  return std::chrono::duration<double>(Clock::now() - t).count();
}

// Per measurement i (in the order taken): the median of its neighbours' times within `window`
// on each side, divided by its own time. Most masks are neutral, so the median is a neutral
// reference taken at the same moment.
std::vector<double> NeighbourRatios(const std::vector<double>& times, int window) {
  std::vector<double> ratios(times.size(), 1.0);
  const int n = static_cast<int>(times.size());
  std::vector<double> around;
  for (int i = 0; i < n; ++i) {
    around.clear();
    for (int j = std::max(0, i - window); j <= std::min(n - 1, i + window); ++j) {
      if (j != i) around.push_back(times[j]);
    }
    if (!around.empty() && times[i] > 0) ratios[i] = Median(around) / times[i];
  }
  return ratios;
}

struct SweepContext {
  ChannelProbeDevice& device;
  const ChannelPlan& plan;
  const ChannelProgress& progress;
  Clock::time_point begin;
  int bits = 0;        // granule-index bits in a chunk
  int all_blocks = 0;  // the whole GPU's resident blocks
};

void Say(const ChannelProgress& progress, const std::string& line) {
  if (progress) progress(line);
}

// GB/s of `bytes` read in `ms`.
double Gbps(uint64_t bytes, double ms) {
  return ms > 0 ? static_cast<double>(bytes) / ms / 1e6 : 0;
}

// The report's second look at a threshold just outside the noise (SourceResult).
absl::Status SensitiveLook(const SweepContext& cx, SourceResult& out,
                           colorer::ScanFitOptions options) {
  std::vector<double> ratios;
  for (const colorer::MaskObservation& o : out.observations) ratios.push_back(o.ratio);
  const double median = Median(ratios);
  std::vector<double> deviations;
  for (double r : ratios) deviations.push_back(std::fabs(r - median));
  const double threshold = median - 8 * 1.4826 * Median(deviations);
  if (threshold <= out.threshold + 0.02) return absl::OkStatus();
  options.threshold = threshold;
  MISSILE_ASSIGN_OR_RETURN(
      colorer::ScanCrossValidation cv,
      colorer::CrossValidateScan(out.observations, options, cx.plan.folds, cx.plan.seed));
  out.sensitive_threshold = threshold;
  out.sensitive_fit = cv.fit;
  out.sensitive_cv_accuracy = cv.accuracy;
  out.sensitive_rank = cv.fit.rank();
  return absl::OkStatus();
}

// long: the scan of one source is a fixed sequence (warm-up, sizing, sweeps, split, fit) whose
// steps share the per-mask tables; kept in one place so the order of measurement is visible.
absl::StatusOr<SourceResult> ScanSource(SweepContext& cx, const std::string& name,
                                        double budget_end_s) {
  SourceResult out;
  out.name = name;
  out.discard = name == "dram";
  const uint64_t chunk_bytes = cx.device.chunk_bytes();
  SubsetLaunch whole{.list = 0,
                     .subset = {},
                     .blocks = cx.all_blocks,
                     .rounds = 16,
                     .discard = out.discard,
                     .granule_shift = cx.plan.granule_shift};
  // Sizing: a warm-up, a short launch, then one of about the target's length (a short launch
  // is mostly launch overhead and would understate the bandwidth).
  absl::StatusOr<double> ms = cx.device.TimeSubset(whole);
  if (ms.ok()) ms = cx.device.TimeSubset(whole);
  if (ms.ok() && *ms > 0) {
    whole.rounds = static_cast<uint64_t>(
        std::clamp(2 * cx.plan.target_ms / *ms * static_cast<double>(whole.rounds), 1.0, 1e6));
    ms = cx.device.TimeSubset(whole);
  }
  if (!ms.ok()) return ms.status();
  out.full_chunk_gbps = Gbps(chunk_bytes * whole.rounds, *ms);
  const uint64_t half_bytes = chunk_bytes / 2;
  const double rounds_f = cx.plan.target_ms * 1e6 * out.full_chunk_gbps / half_bytes;
  const uint64_t rounds = static_cast<uint64_t>(std::clamp(rounds_f, 1.0, 1e6));
  Say(cx.progress,
      absl::StrFormat("%s: whole chunk %.0f GB/s; scanning %d masks over bits %d-%d, %d passes "
                      "per launch",
                      name, out.full_chunk_gbps, (1 << cx.bits) - 1, cx.plan.granule_shift,
                      cx.plan.granule_shift + cx.bits - 1, rounds));

  const uint32_t mask_count = (uint32_t{1} << cx.bits) - 1;
  std::vector<std::vector<double>> ratios(mask_count + 1);
  std::vector<double> all_times;
  for (int sweep = 0; sweep < cx.plan.repeats; ++sweep) {
    std::vector<uint32_t> order(mask_count);
    std::iota(order.begin(), order.end(), 1u);
    std::mt19937_64 rng(cx.plan.seed * 1000003 + static_cast<uint64_t>(sweep) + name.size());
    std::shuffle(order.begin(), order.end(), rng);
    std::vector<double> times;
    times.reserve(order.size());
    for (uint32_t m : order) {
      SubsetLaunch r{.list = 0,
                     .subset = {{m}, static_cast<uint32_t>(sweep % 2)},
                     .blocks = cx.all_blocks,
                     .rounds = rounds,
                     .discard = out.discard,
                     .granule_shift = cx.plan.granule_shift};
      MISSILE_ASSIGN_OR_RETURN(double t, cx.device.TimeSubset(r));
      times.push_back(t);
    }
    const std::vector<double> r = NeighbourRatios(times, cx.plan.neighbour_window);
    for (size_t i = 0; i < order.size(); ++i) ratios[order[i]].push_back(r[i]);
    all_times.insert(all_times.end(), times.begin(), times.end());
    out.sweeps = sweep + 1;
    const double median_ms = Median(times);
    Say(cx.progress,
        absl::StrFormat("%s: sweep %d done at %.1f s: median %.3f ms = %.0f GB/s", name, sweep + 1,
                        SecondsSince(cx.begin), median_ms, Gbps(half_bytes * rounds, median_ms)));
    if (SecondsSince(cx.begin) > budget_end_s) {
      Say(cx.progress,
          absl::StrFormat("%s: time budget reached after %d sweep(s)", name, sweep + 1));
      break;
    }
  }
  out.half_gbps = Gbps(half_bytes * rounds, Median(all_times));

  for (uint32_t m = 1; m <= mask_count; ++m) {
    out.observations.push_back({uint64_t{m} << cx.plan.granule_shift, Median(ratios[m])});
  }
  colorer::ScanFitOptions options;
  options.low_bit = cx.plan.granule_shift;
  options.high_bit = cx.plan.granule_shift + cx.bits;
  MISSILE_ASSIGN_OR_RETURN(
      colorer::ScanCrossValidation cv,
      colorer::CrossValidateScan(out.observations, options, cx.plan.folds, cx.plan.seed));
  out.fit = cv.fit;
  out.threshold = colorer::ScanThreshold(out.observations, options);
  out.cv_accuracy = cv.accuracy;
  out.cv_predictions = cv.predictions;
  out.folds = cv.folds;
  out.folds_matching = cv.folds_matching;
  MISSILE_RETURN_IF_ERROR(SensitiveLook(cx, out, options));
  Say(cx.progress,
      absl::StrFormat("%s: fit rank %d (%d groups), threshold %.3f, agreement %.4f, confidence "
                      "%.3f; %d-fold held-back accuracy %.4f (%d/%d fold fits equal)",
                      name, out.fit.rank(), out.fit.groups(), out.threshold, out.fit.agreement,
                      out.fit.confidence, out.folds, out.cv_accuracy, out.folds_matching,
                      out.folds));
  return out;
}

// long: the contention matrix, one victim/aggressor pair per colour pair, with sizing first and
// classification last; the pieces share the subsets and the launch shapes.
absl::Status MeasurePairs(SweepContext& cx, ChannelScanResult& result) {
  const SourceResult& src = result.sources[result.primary];
  const int k = std::min(src.fit.rank(), cx.plan.pair_rows);
  result.pair_rows = k;
  if (k == 0) {
    Say(cx.progress, "pairs: the fit has one channel group; no colour pairs to measure");
    return absl::OkStatus();
  }
  std::vector<uint32_t> rows;
  for (int i = 0; i < k; ++i) {
    rows.push_back(static_cast<uint32_t>(src.fit.masks[i] >> cx.plan.granule_shift));
  }
  const int split = SplitBit(rows, cx.bits);
  if (split < 0) return absl::InternalError("no granule bit outside the fitted rows");
  const int victim_blocks = std::max(1, cx.all_blocks / 4);
  const int aggressor_blocks = std::max(1, cx.all_blocks - victim_blocks);
  const uint64_t chunk_bytes = cx.device.chunk_bytes();

  MISSILE_ASSIGN_OR_RETURN(Subset probe, ColourSubset(rows, 0, split, 0));
  SubsetLaunch sizing{.list = 0,
                      .subset = probe,
                      .blocks = victim_blocks,
                      .rounds = 16,
                      .discard = src.discard,
                      .granule_shift = cx.plan.granule_shift};
  absl::StatusOr<double> ms = cx.device.TimeSubset(sizing);
  if (ms.ok()) ms = cx.device.TimeSubset(sizing);
  if (ms.ok() && *ms > 0) {
    sizing.rounds = static_cast<uint64_t>(
        std::clamp(cx.plan.pair_target_ms / *ms * static_cast<double>(sizing.rounds), 1.0, 1e7));
    ms = cx.device.TimeSubset(sizing);
  }
  if (!ms.ok()) return ms.status();
  const uint64_t subset_bytes = SubsetBytes(chunk_bytes, 1, probe);
  const double gbps = Gbps(subset_bytes * sizing.rounds, *ms);
  const uint64_t rounds = static_cast<uint64_t>(
      std::clamp(cx.plan.pair_target_ms * 1e6 * gbps / subset_bytes, 1.0, 1e7));

  for (int cv = 0; cv < (1 << k); ++cv) {
    for (int ca = 0; ca < (1 << k); ++ca) {
      absl::StatusOr<Subset> v = ColourSubset(rows, cv, split, 0);
      absl::StatusOr<Subset> a = ColourSubset(rows, ca, split, 1);
      if (!v.ok()) return v.status();
      if (!a.ok()) return a.status();
      SubsetLaunch victim{.list = 0,
                          .subset = *v,
                          .blocks = victim_blocks,
                          .rounds = rounds,
                          .discard = src.discard,
                          .granule_shift = cx.plan.granule_shift};
      SubsetLaunch aggressor{.list = 1,
                             .subset = *a,
                             .blocks = aggressor_blocks,
                             .rounds = 1,
                             .discard = src.discard,
                             .granule_shift = cx.plan.granule_shift};
      std::vector<double> alone, under;
      for (int r = 0; r < cx.plan.pair_repeats; ++r) {
        MISSILE_ASSIGN_OR_RETURN(double t1, cx.device.TimeSubset(victim));
        MISSILE_ASSIGN_OR_RETURN(double t2, cx.device.TimeSubsetUnder(victim, aggressor));
        alone.push_back(t1);
        under.push_back(t2);
      }
      PairMeasurement p;
      p.victim_colour = cv;
      p.aggressor_colour = ca;
      p.predicted_conflict = cv == ca;
      const double t_alone = Median(alone), t_under = Median(under);
      p.alone_gbps = Gbps(subset_bytes * rounds, t_alone);
      p.under_gbps = Gbps(subset_bytes * rounds, t_under);
      p.slowdown = t_under > 0 ? 1.0 - t_alone / t_under : 0;
      result.pairs.push_back(p);
    }
  }
  std::vector<double> slowdowns;
  for (const PairMeasurement& p : result.pairs) slowdowns.push_back(p.slowdown);
  result.pair_threshold = LargestGapThreshold(slowdowns);
  int right = 0;
  for (PairMeasurement& p : result.pairs) {
    p.measured_conflict = p.slowdown > result.pair_threshold;
    if (p.measured_conflict == p.predicted_conflict) ++right;
  }
  result.pair_accuracy = static_cast<double>(right) / static_cast<double>(result.pairs.size());
  Say(cx.progress,
      absl::StrFormat("pairs: %d colour pairs, slowdown threshold %.3f, accuracy "
                      "%.3f",
                      result.pairs.size(), result.pair_threshold, result.pair_accuracy));
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<LatencySignature> LatencySignatureOf(std::vector<double> cycles, int granule_shift) {
  if (cycles.size() < 2 || !std::has_single_bit(cycles.size())) {
    return absl::InvalidArgumentError("latency signature needs a power-of-two granule count");
  }
  LatencySignature out;
  out.measured = true;
  out.cycles = std::move(cycles);
  out.median = Median(out.cycles);
  out.min = *std::min_element(out.cycles.begin(), out.cycles.end());
  out.max = *std::max_element(out.cycles.begin(), out.cycles.end());
  std::vector<int> far(out.cycles.size());
  for (size_t g = 0; g < far.size(); ++g) far[g] = out.cycles[g] > out.median ? 1 : 0;
  MISSILE_ASSIGN_OR_RETURN(colorer::ParityFit fit, colorer::FitParityLabels(far));
  out.mask = fit.mask << granule_shift;
  out.agreement = fit.agreement;
  out.runner_up = fit.runner_up;
  return out;
}

ChannelPlan MakeChannelPlan(bool quick, uint64_t seed) {
  ChannelPlan p;
  p.seed = seed;
  if (quick) {
    p.repeats = 1;
    p.target_ms = 0.3;
    p.pair_rows = 2;
    p.pair_repeats = 1;
    p.pair_target_ms = 1;
    p.time_budget_s = 40;
  }
  return p;
}

absl::Status FillSubsetConstraints(const Subset& subset, int log2_granules, SubsetParams& p) {
  if (log2_granules < 1 || log2_granules > 24) {
    return absl::InvalidArgumentError(absl::StrCat(log2_granules, " granule-index bits"));
  }
  if (subset.masks.size() > kMaxSubsetConstraints) {
    return absl::InvalidArgumentError(
        absl::StrCat(subset.masks.size(), " subset constraints; at most ", kMaxSubsetConstraints));
  }
  int previous_pivot = -1;
  for (size_t j = 0; j < subset.masks.size(); ++j) {
    const uint32_t m = subset.masks[j];
    const int pivot = m == 0 ? -1 : 31 - std::countl_zero(m);
    if (pivot < 0 || pivot >= log2_granules || pivot <= previous_pivot) {
      return absl::InvalidArgumentError(
          "subset masks must be a reduced basis inside the chunk, ordered by pivot");
    }
    for (size_t i = 0; i < subset.masks.size(); ++i) {
      if (i != j && ((subset.masks[i] >> pivot) & 1u) != 0) {
        return absl::InvalidArgumentError("subset masks share a pivot bit");
      }
    }
    p.masks[j] = m;
    p.pivots[j] = static_cast<unsigned>(pivot);
    previous_pivot = pivot;
  }
  p.parities = subset.parities;
  p.num_constraints = static_cast<unsigned>(subset.masks.size());
  p.log2_granules = static_cast<unsigned>(log2_granules);
  return absl::OkStatus();
}

absl::StatusOr<Subset> ColourSubset(const std::vector<uint32_t>& rows, uint32_t colour,
                                    int split_bit, int half) {
  // Gaussian elimination over (mask, wanted parity) pairs, so the parities follow the rows.
  std::vector<std::pair<uint32_t, uint32_t>> constraints;
  for (size_t i = 0; i < rows.size(); ++i) constraints.push_back({rows[i], (colour >> i) & 1u});
  if (split_bit >= 0) constraints.push_back({1u << split_bit, static_cast<uint32_t>(half & 1)});
  if (constraints.size() > kMaxSubsetConstraints) {
    return absl::InvalidArgumentError(
        absl::StrCat(constraints.size(), " constraints; at most ", kMaxSubsetConstraints));
  }
  std::vector<std::pair<uint32_t, uint32_t>> reduced;
  for (auto c : constraints) {
    for (const auto& r : reduced) {
      if (c.first & std::bit_floor(r.first)) c.first ^= r.first, c.second ^= r.second;
    }
    if (c.first == 0) {
      return absl::InvalidArgumentError("colour subset constraints are linearly dependent");
    }
    const uint32_t pivot = std::bit_floor(c.first);
    for (auto& r : reduced) {
      if (r.first & pivot) r.first ^= c.first, r.second ^= c.second;
    }
    reduced.push_back(c);
  }
  std::sort(reduced.begin(), reduced.end());  // the pivot is the highest bit: ascending pivots
  Subset s;
  for (size_t j = 0; j < reduced.size(); ++j) {
    s.masks.push_back(reduced[j].first);
    s.parities |= reduced[j].second << j;
  }
  return s;
}

int SplitBit(const std::vector<uint32_t>& rows, int bits) {
  colorer::Gf2Basis basis(std::vector<uint64_t>(rows.begin(), rows.end()));
  for (int b = 0; b < bits; ++b) {
    if (!basis.Contains(uint64_t{1} << b)) return b;
  }
  return -1;
}

double LargestGapThreshold(std::vector<double> values) {
  std::sort(values.begin(), values.end());
  double best_gap = 0, threshold = std::numeric_limits<double>::infinity();
  for (size_t i = 1; i < values.size(); ++i) {
    if (values[i] - values[i - 1] > best_gap) {
      best_gap = values[i] - values[i - 1];
      threshold = (values[i] + values[i - 1]) / 2;
    }
  }
  return threshold;
}

absl::StatusOr<ChannelScanResult> RunChannelScan(ChannelProbeDevice& device, uint64_t chunk_address,
                                                 const ChannelPlan& plan,
                                                 const ChannelProgress& progress) {
  const uint64_t chunk_bytes = device.chunk_bytes();
  if (!std::has_single_bit(chunk_bytes) || plan.granule_shift < 7 || plan.granule_shift > 12) {
    return absl::InvalidArgumentError("chunk size must be a power of two; granules 128 B..4 KiB");
  }
  const int bits = std::countr_zero(chunk_bytes) - plan.granule_shift;
  if (bits < 3 || bits > 16) {
    return absl::InvalidArgumentError(
        absl::StrCat(bits, " granule-index bits per chunk; the scan needs 3..16"));
  }
  if (plan.sources.empty() || plan.repeats < 1) {
    return absl::InvalidArgumentError("no source or no sweep to run");
  }
  SweepContext cx{device,       plan, progress,
                  Clock::now(), bits, device.sm_count() * device.blocks_per_sm()};
  if (cx.all_blocks < 2) return absl::FailedPreconditionError("fewer than two resident blocks");
  for (int list = 0; list < ChannelProbeDevice::kLists; ++list) {
    MISSILE_RETURN_IF_ERROR(device.SetChunks(list, {chunk_address}));
  }
  ChannelScanResult result;
  const double per_source = 0.8 * plan.time_budget_s / static_cast<double>(plan.sources.size());
  for (size_t i = 0; i < plan.sources.size(); ++i) {
    if (plan.sources[i] != "dram" && plan.sources[i] != "l2") {
      return absl::InvalidArgumentError(absl::StrCat("unknown source '", plan.sources[i], "'"));
    }
    absl::StatusOr<SourceResult> r =
        ScanSource(cx, plan.sources[i], per_source * static_cast<double>(i + 1));
    if (!r.ok()) return r.status();
    result.sources.push_back(*std::move(r));
  }
  // The function the file carries: the first source (DRAM, what colouring is about) whose fit
  // found structure with confidence >= 0.8; else the most confident fit with structure; else
  // the first source.
  int chosen = -1;
  for (size_t i = 0; i < result.sources.size() && chosen < 0; ++i) {
    const colorer::XorHashFit& f = result.sources[i].fit;
    if (f.rank() > 0 && f.confidence >= 0.8) chosen = static_cast<int>(i);
  }
  for (size_t i = 0; i < result.sources.size() && chosen < 0; ++i) {
    const colorer::XorHashFit& f = result.sources[i].fit;
    const colorer::XorHashFit& best = result.sources[result.primary].fit;
    if (f.rank() > 0 && (best.rank() == 0 || f.confidence > best.confidence)) {
      result.primary = static_cast<int>(i);
    }
  }
  if (chosen >= 0) result.primary = chosen;
  if (absl::Status s = MeasurePairs(cx, result); !s.ok()) {
    // Readers that did not overlap spoil only the contention matrix: the fitted function and
    // its cross-validation stand. Anything else may have left the device unusable.
    if (!absl::IsFailedPrecondition(s)) return s;
    Say(progress, absl::StrCat("pairs: not measured: ", s.message()));
    result.pairs.clear();
    result.pair_accuracy = -1;
  }
  result.seconds = SecondsSince(cx.begin);
  return result;
}

}  // namespace missile::calibrate
