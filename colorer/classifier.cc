#include "missile/colorer/classifier.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "missile/common/status_macros.h"

namespace missile::colorer {
namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 == 1 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

absl::Status ValidateOptions(const ClassifierOptions& o) {
  if (!(o.threshold > 0.0 && o.threshold < 1.0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("classifier: threshold = ", o.threshold, " must be in (0, 1)"));
  }
  if (!(o.ambiguity >= 0.0) || !std::isfinite(o.ambiguity)) {
    return absl::InvalidArgumentError(
        absl::StrCat("classifier: ambiguity = ", o.ambiguity, " must be >= 0"));
  }
  if (o.max_repeats < 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("classifier: max_repeats = ", o.max_repeats, " must be >= 0"));
  }
  if (o.probe_group_size < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("classifier: probe_group_size = ", o.probe_group_size, " must be >= 1"));
  }
  if (o.max_classes < 1 || o.max_classes > 64) {
    return absl::InvalidArgumentError(
        absl::StrCat("classifier: max_classes = ", o.max_classes, " must be in [1, 64]"));
  }
  if (o.max_oracle_calls < 0) {
    return absl::InvalidArgumentError("classifier: max_oracle_calls must be >= 0");
  }
  return absl::OkStatus();
}

// One classification run: owns the call count and the evidence counters.
class Run {
 public:
  Run(InterferenceOracle& oracle, const ClassifierOptions& options, ClassificationResult& result)
      : oracle_(oracle), options_(options), result_(result) {}

  struct Decision {
    double value;  // median of the samples
    bool same;     // value >= threshold
    bool clear;    // outside the ambiguity band
  };

  // Measures Slowdown(a, b), repeating while the median stays near the threshold.
  absl::StatusOr<Decision> Decide(const std::vector<ChunkIndex>& a,
                                  const std::vector<ChunkIndex>& b) {
    std::vector<double> samples;
    double median = 0;
    do {
      MISSILE_ASSIGN_OR_RETURN(double s, Call(a, b));
      samples.push_back(s);
      median = Median(samples);
    } while (Near(median) && static_cast<int>(samples.size()) <= options_.max_repeats);
    ClassifierEvidence& ev = result_.evidence;
    ++ev.measurements;
    if (samples.size() > 1) ++ev.repeated_measurements;
    const bool clear = !Near(median);
    if (!clear) ++ev.ambiguous_measurements;
    return Decision{median, median >= options_.threshold, clear};
  }

  // Counts a decision towards the confidence.
  void Score(bool good) {
    if (good) ++good_decisions_;
  }
  double Confidence() const {
    const int n = result_.evidence.measurements;
    return n == 0 ? 0.0 : static_cast<double>(good_decisions_) / n;
  }

 private:
  bool Near(double v) const { return std::fabs(v - options_.threshold) < options_.ambiguity; }

  absl::StatusOr<double> Call(const std::vector<ChunkIndex>& a, const std::vector<ChunkIndex>& b) {
    if (options_.max_oracle_calls > 0 && result_.oracle_calls >= options_.max_oracle_calls) {
      return absl::ResourceExhaustedError(
          absl::StrCat("classifier: oracle call budget of ", options_.max_oracle_calls, " spent"));
    }
    ++result_.oracle_calls;
    absl::StatusOr<double> s = oracle_.Slowdown(a, b);
    if (!s.ok()) return s.status();
    if (!std::isfinite(*s)) {
      return absl::InternalError(absl::StrCat("classifier: oracle returned slowdown ", *s));
    }
    return s;
  }

  InterferenceOracle& oracle_;
  const ClassifierOptions& options_;
  ClassificationResult& result_;
  int good_decisions_ = 0;
};

void Track(ClassifierEvidence& ev, const Run::Decision& d) {
  double& slot = d.same ? ev.min_same : ev.max_different;
  if (std::isnan(slot)) {
    slot = d.value;
  } else {
    slot = d.same ? std::min(slot, d.value) : std::max(slot, d.value);
  }
}

}  // namespace

int64_t ClassifierCallBound(int64_t num_chunks, int64_t classes, const ClassifierOptions& options) {
  const int64_t decisions =
      num_chunks * classes + (options.confirm ? classes * (classes + 1) / 2 : 0);
  return (1 + static_cast<int64_t>(std::max(0, options.max_repeats))) * decisions;
}

// long: the classification passes (grouping, confirmation, final classes) over one Run state;
// each pass is commented and reads in order.
absl::StatusOr<ClassificationResult> ClassifyChunks(int num_chunks, InterferenceOracle& oracle,
                                                    const ClassifierOptions& options) {
  if (num_chunks < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("classifier: num_chunks = ", num_chunks, " must be >= 1"));
  }
  MISSILE_RETURN_IF_ERROR(ValidateOptions(options));

  ClassificationResult result;
  ClassifierEvidence& ev = result.evidence;
  ev.min_same = ev.max_different = kNaN;
  Run run(oracle, options, result);

  // Assignment pass: each chunk against the classes found so far, largest class first.
  std::vector<std::vector<ChunkIndex>> found;
  std::vector<size_t> order;
  for (int i = 0; i < num_chunks; ++i) {
    const auto chunk = static_cast<ChunkIndex>(i);
    order.resize(found.size());
    std::iota(order.begin(), order.end(), size_t{0});
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t x, size_t y) { return found[x].size() > found[y].size(); });
    bool joined = false;
    for (size_t c : order) {
      const size_t probe_size =
          std::min(found[c].size(), static_cast<size_t>(options.probe_group_size));
      const std::vector<ChunkIndex> probe(found[c].begin(), found[c].begin() + probe_size);
      MISSILE_ASSIGN_OR_RETURN(Run::Decision d, run.Decide({chunk}, probe));
      Track(ev, d);
      run.Score(d.clear);
      if (d.same) {
        found[c].push_back(chunk);
        joined = true;
        break;
      }
    }
    if (!joined) {
      if (static_cast<int>(found.size()) == options.max_classes) {
        return absl::FailedPreconditionError(absl::StrCat(
            "classifier: chunk ", i, " interferes with none of the ", options.max_classes,
            " classes found so far; the oracle is too noisy or the threshold is wrong"));
      }
      found.push_back({chunk});
    }
  }
  const int k = static_cast<int>(found.size());
  result.call_bound = ClassifierCallBound(num_chunks, k, options);

  // Confirmation pass: halves of a class must interfere, distinct classes must not.
  std::vector<int> parent(k);
  std::iota(parent.begin(), parent.end(), 0);
  auto find = [&](int c) {
    while (parent[c] != c) c = parent[c] = parent[parent[c]];
    return c;
  };
  ev.intra_class.assign(k, kNaN);
  ev.cross_class.assign(k, std::vector<double>(k, kNaN));
  if (options.confirm) {
    for (int c = 0; c < k; ++c) {
      if (found[c].size() < 2) continue;
      std::vector<ChunkIndex> halves[2];
      for (size_t j = 0; j < found[c].size(); ++j) halves[j % 2].push_back(found[c][j]);
      MISSILE_ASSIGN_OR_RETURN(Run::Decision d, run.Decide(halves[0], halves[1]));
      ev.intra_class[c] = d.value;
      if (!d.same) ++ev.split_suspects;
      run.Score(d.clear && d.same);
    }
    for (int p = 0; p < k; ++p) {
      for (int q = p + 1; q < k; ++q) {
        MISSILE_ASSIGN_OR_RETURN(Run::Decision d, run.Decide(found[p], found[q]));
        ev.cross_class[p][q] = d.value;
        run.Score(d.clear && !d.same);
        if (d.same && find(p) != find(q)) {
          parent[find(q)] = find(p);
          ++ev.merged_classes;
        }
      }
    }
  }
  ev.confidence = run.Confidence();

  // Final classes: merged groups, each sorted, ordered by their first chunk.
  std::vector<std::vector<ChunkIndex>> merged(k);
  for (int c = 0; c < k; ++c) {
    auto& into = merged[find(c)];
    into.insert(into.end(), found[c].begin(), found[c].end());
  }
  for (auto& group : merged) {
    if (group.empty()) continue;
    std::sort(group.begin(), group.end());
    result.classes.push_back(std::move(group));
  }
  std::sort(result.classes.begin(), result.classes.end(),
            [](const auto& x, const auto& y) { return x.front() < y.front(); });
  result.class_of.assign(num_chunks, -1);
  for (size_t c = 0; c < result.classes.size(); ++c) {
    for (ChunkIndex chunk : result.classes[c]) result.class_of[chunk] = static_cast<int>(c);
  }
  return result;
}

}  // namespace missile::colorer
