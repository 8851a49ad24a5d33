// The exposition format: HELP/TYPE lines, labels and their escaping, histograms, and every
// refusal leaving the exposition as it was.
#include "metrics_registry.h"

#include <cmath>
#include <limits>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon::metrics {
namespace {

using ::testing::HasSubstr;

TEST(MetricsRegistryTest, CountersAndGaugesWithLabels) {
  Exposition e;
  ASSERT_TRUE(e.Declare("jobs_total", MetricType::kCounter, "Jobs done.").ok());
  ASSERT_TRUE(e.Declare("temp", MetricType::kGauge, "Heat.").ok());
  ASSERT_TRUE(e.Add("jobs_total", {{"name", "a"}, {"gpu", "0"}}, 3).ok());
  ASSERT_TRUE(e.Add("jobs_total", {{"name", "b"}, {"gpu", "0"}}, 1e20).ok());
  ASSERT_TRUE(e.Add("temp", {}, -1.5).ok());
  EXPECT_EQ(e.Format(),
            "# HELP jobs_total Jobs done.\n"
            "# TYPE jobs_total counter\n"
            "jobs_total{name=\"a\",gpu=\"0\"} 3\n"
            "jobs_total{name=\"b\",gpu=\"0\"} 1e+20\n"
            "# HELP temp Heat.\n"
            "# TYPE temp gauge\n"
            "temp -1.5\n");
}

TEST(MetricsRegistryTest, EscapesLabelValuesAndHelp) {
  EXPECT_EQ(EscapeLabelValue("a\"b\\c\nd"), "a\\\"b\\\\c\\nd");
  Exposition e;
  ASSERT_TRUE(e.Declare("m", MetricType::kGauge, "two\nlines \\ here").ok());
  ASSERT_TRUE(e.Add("m", {{"name", "x\"y"}}, 1).ok());
  EXPECT_EQ(e.Format(),
            "# HELP m two\\nlines \\\\ here\n# TYPE m gauge\nm{name=\"x\\\"y\"} 1\n");
}

TEST(MetricsRegistryTest, FormatsSpecialValues) {
  EXPECT_EQ(FormatValue(0), "0");
  EXPECT_EQ(FormatValue(42), "42");
  EXPECT_EQ(FormatValue(0.25), "0.25");
  EXPECT_EQ(FormatValue(std::numeric_limits<double>::infinity()), "+Inf");
  EXPECT_EQ(FormatValue(-std::numeric_limits<double>::infinity()), "-Inf");
  EXPECT_EQ(FormatValue(std::nan("")), "NaN");
}

TEST(MetricsRegistryTest, HistogramBucketsAreCumulative) {
  Exposition e;
  ASSERT_TRUE(e.Declare("wait_seconds", MetricType::kHistogram, "Waits.").ok());
  HistogramValue h{{0.001, 0.01}, {2, 0, 1}, 0.5};
  ASSERT_TRUE(e.AddHistogram("wait_seconds", {{"dir", "h2d"}}, h).ok());
  EXPECT_EQ(e.Format(),
            "# HELP wait_seconds Waits.\n"
            "# TYPE wait_seconds histogram\n"
            "wait_seconds_bucket{dir=\"h2d\",le=\"0.001\"} 2\n"
            "wait_seconds_bucket{dir=\"h2d\",le=\"0.01\"} 2\n"
            "wait_seconds_bucket{dir=\"h2d\",le=\"+Inf\"} 3\n"
            "wait_seconds_sum{dir=\"h2d\"} 0.5\n"
            "wait_seconds_count{dir=\"h2d\"} 3\n");
}

TEST(MetricsRegistryTest, RefusesBadNamesAndSamplesChangingNothing) {
  Exposition e;
  EXPECT_EQ(e.Declare("9lives", MetricType::kGauge, "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Declare("a-b", MetricType::kGauge, "").code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Declare("", MetricType::kGauge, "").code(), absl::StatusCode::kInvalidArgument);
  ASSERT_TRUE(e.Declare("ns:ok_total", MetricType::kCounter, "c").ok());
  ASSERT_TRUE(e.Declare("h", MetricType::kHistogram, "h").ok());
  EXPECT_EQ(e.Declare("h", MetricType::kGauge, "").code(), absl::StatusCode::kAlreadyExists);
  const std::string before = e.Format();

  EXPECT_EQ(e.Add("missing", {}, 1).code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(e.Add("h", {}, 1).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(e.Add("ns:ok_total", {}, -1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Add("ns:ok_total", {}, std::nan("")).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Add("ns:ok_total", {{"__x", "1"}}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Add("ns:ok_total", {{"a:b", "1"}}, 1).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Add("ns:ok_total", {{"a", "1"}, {"a", "2"}}, 1).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.AddHistogram("h", {{"le", "1"}}, {{1}, {0, 0}, 0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.AddHistogram("h", {}, {{1, 1}, {0, 0, 0}, 0}).code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.AddHistogram("h", {}, {{1}, {0}, 0}).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(e.Format(), before);

  ASSERT_TRUE(e.Add("ns:ok_total", {{"a", "1"}, {"b", "2"}}, 1).ok());
  absl::Status again = e.Add("ns:ok_total", {{"b", "2"}, {"a", "1"}}, 2);
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(again.message(), HasSubstr("same labels"));
}

}  // namespace
}  // namespace missile::daemon::metrics
