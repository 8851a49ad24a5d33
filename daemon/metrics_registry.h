// The Prometheus text exposition format (version 0.0.4), pure: metric families with HELP and
// TYPE lines, samples with labels, histograms with cumulative buckets. No I/O, no clock.
//
// Use: Declare each family once, Add its samples, then Format. Names are checked against
// Prometheus's grammar (metric [a-zA-Z_:][a-zA-Z0-9_:]*, label [a-zA-Z_][a-zA-Z0-9_]*, labels
// starting "__" are reserved, "le" is reserved in histograms); label values may hold any text and
// are escaped (backslash, double quote, newline). A bad call returns an error and changes nothing.
// Families are written in the order declared, samples in the order added.
// Thread-safety: none; one Exposition per scrape, on one thread.
#ifndef MISSILE_DAEMON_METRICS_REGISTRY_H_
#define MISSILE_DAEMON_METRICS_REGISTRY_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace missile::daemon::metrics {

enum class MetricType { kCounter, kGauge, kHistogram };

using Labels = std::vector<std::pair<std::string, std::string>>;

// A histogram's observations: counts[i] observations were <= bounds[i] and above bounds[i - 1];
// counts[bounds.size()] were above the last bound. Bounds ascend strictly and are finite.
struct HistogramValue {
  std::vector<double> bounds;
  std::vector<uint64_t> counts;  // bounds.size() + 1 entries, not cumulative
  double sum = 0;
};

class Exposition {
 public:
  // INVALID_ARGUMENT for a bad name; ALREADY_EXISTS for a name declared before.
  absl::Status Declare(std::string_view name, MetricType type, std::string_view help);
  // A counter's or gauge's sample. NOT_FOUND for an undeclared family, FAILED_PRECONDITION for
  // a histogram family, INVALID_ARGUMENT for a bad or repeated label name or a negative or NaN
  // counter, ALREADY_EXISTS for a label set the family already has.
  absl::Status Add(std::string_view name, const Labels& labels, double value);
  // A histogram's sample: as Add, plus INVALID_ARGUMENT for bounds that do not ascend or counts
  // of the wrong length.
  absl::Status AddHistogram(std::string_view name, const Labels& labels,
                            const HistogramValue& value);
  // The whole exposition, ending with a newline.
  std::string Format() const;

 private:
  struct Sample {
    Labels labels;
    double value = 0;
    HistogramValue histogram;
  };
  struct Family {
    std::string name;
    MetricType type;
    std::string help;
    std::vector<Sample> samples;
  };
  // The family to add a sample with `labels` to, after every check.
  absl::Status Check(std::string_view name, MetricType want, const Labels& labels,
                     Family** family);

  std::vector<Family> families_;
};

// Label value escaping: \ -> \\, " -> \", newline -> \n.
std::string EscapeLabelValue(std::string_view value);
// A sample value as Prometheus writes it: integers without a fraction, "+Inf", "-Inf", "NaN".
std::string FormatValue(double value);

}  // namespace missile::daemon::metrics

#endif  // MISSILE_DAEMON_METRICS_REGISTRY_H_
