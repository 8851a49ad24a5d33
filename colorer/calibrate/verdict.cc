#include "verdict.h"

#include <algorithm>
#include <cmath>
#include <limits>

#include "absl/strings/str_format.h"

namespace missile::calibrate {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

void AddFinite(std::vector<double>& out, double v) {
  if (std::isfinite(v)) out.push_back(v);
}

}  // namespace

Verdict DecideColours(const VerdictInput& in, const VerdictRule& rule) {
  Verdict v;
  v.min_same =
      in.same_class.empty() ? kNaN : *std::min_element(in.same_class.begin(), in.same_class.end());
  v.max_different = in.different_class.empty()
                        ? kNaN
                        : *std::max_element(in.different_class.begin(), in.different_class.end());
  auto one = [&](std::string reason) {
    v.colours = 1;
    v.reason = std::move(reason);
    return v;
  };
  if (!in.classified) return one("1 colour: no classification (" + in.failure + ")");
  if (in.classes <= 1) {
    return one(absl::StrFormat(
        "1 colour: every sampled chunk interfered with every other (lowest same-class "
        "slowdown %.3f)",
        v.min_same));
  }
  if (!in.oracle_reaches_dram) {
    return one(absl::StrFormat(
        "1 colour: %d classes found, but the interference probe was served by the L2, not "
        "DRAM, so they say nothing about memory channels",
        in.classes));
  }
  if (in.merged_classes > 0 || in.split_suspects > 0) {
    return one(absl::StrFormat(
        "1 colour: %d classes found, but the confirmation pass merged %d and found %d "
        "internally non-interfering: the classes are not stable",
        in.classes, in.merged_classes, in.split_suspects));
  }
  if (in.confidence < rule.min_confidence) {
    return one(absl::StrFormat("1 colour: %d classes found with confidence %.2f < %.2f", in.classes,
                               in.confidence, rule.min_confidence));
  }
  if (in.same_class.empty() || in.different_class.empty()) {
    return one(absl::StrFormat(
        "1 colour: %d classes found but no same/different-class pairs to compare", in.classes));
  }
  const bool separated = v.max_different <= rule.max_ratio * v.min_same &&
                         v.min_same - v.max_different >= rule.min_gap;
  if (!separated) {
    return one(absl::StrFormat(
        "1 colour: %d classes found, but different-class slowdowns (max %.3f) are not well "
        "below same-class ones (min %.3f)",
        in.classes, v.max_different, v.min_same));
  }
  v.colours = in.classes;
  v.reason = absl::StrFormat(
      "%d colours: different-class slowdown at most %.3f vs same-class at least %.3f "
      "(confidence %.2f)",
      in.classes, v.max_different, v.min_same, in.confidence);
  return v;
}

VerdictInput VerdictInputFrom(const colorer::ClassificationResult& result) {
  VerdictInput in;
  in.classified = true;
  in.classes = static_cast<int>(result.classes.size());
  const colorer::ClassifierEvidence& ev = result.evidence;
  in.merged_classes = ev.merged_classes;
  in.split_suspects = ev.split_suspects;
  in.confidence = ev.confidence;
  AddFinite(in.same_class, ev.min_same);
  for (double x : ev.intra_class) AddFinite(in.same_class, x);
  AddFinite(in.different_class, ev.max_different);
  for (const auto& row : ev.cross_class) {
    for (double x : row) AddFinite(in.different_class, x);
  }
  return in;
}

}  // namespace missile::calibrate
