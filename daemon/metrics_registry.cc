#include "metrics_registry.h"

#include <charconv>
#include <cmath>
#include <system_error>
#include <set>

#include "absl/strings/str_cat.h"

namespace missile::daemon::metrics {
namespace {

bool ValidName(std::string_view name, bool colons) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' ||
                       (colons && c == ':');
    const bool digit = c >= '0' && c <= '9';
    if (!alpha && !(digit && i > 0)) return false;
  }
  return true;
}

std::string Quoted(std::string_view s) { return "'" + std::string(s.substr(0, 80)) + "'"; }

// HELP text escaping: \ -> \\, newline -> \n.
std::string EscapeHelp(std::string_view help) {
  std::string out;
  for (char c : help) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

// `{a="x",b="y"}` with `extra` (a histogram's le) last; "" when there is nothing to write.
std::string LabelText(const Labels& labels, const std::pair<std::string, std::string>* extra) {
  if (labels.empty() && extra == nullptr) return "";
  std::string out = "{";
  bool first = true;
  auto add = [&](const std::pair<std::string, std::string>& l) {
    if (!first) out += ",";
    first = false;
    absl::StrAppend(&out, l.first, "=\"", EscapeLabelValue(l.second), "\"");
  };
  for (const auto& l : labels) add(l);
  if (extra != nullptr) add(*extra);
  out += "}";
  return out;
}

const char* TypeName(MetricType type) {
  switch (type) {
    case MetricType::kCounter:
      return "counter";
    case MetricType::kGauge:
      return "gauge";
    case MetricType::kHistogram:
      return "histogram";
  }
  return "untyped";
}

}  // namespace

std::string EscapeLabelValue(std::string_view value) {
  std::string out;
  out.reserve(value.size());
  for (char c : value) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '"') {
      out += "\\\"";
    } else if (c == '\n') {
      out += "\\n";
    } else {
      out += c;
    }
  }
  return out;
}

std::string FormatValue(double value) {
  if (std::isnan(value)) return "NaN";
  if (std::isinf(value)) return value > 0 ? "+Inf" : "-Inf";
  if (value == std::floor(value) && std::fabs(value) < 1e15) {
    return absl::StrCat(static_cast<int64_t>(value));
  }
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof(buf), value);  // shortest that reads back
  return ec == std::errc() ? std::string(buf, end) : "NaN";
}

absl::Status Exposition::Declare(std::string_view name, MetricType type, std::string_view help) {
  if (!ValidName(name, /*colons=*/true)) {
    return absl::InvalidArgumentError(absl::StrCat("bad metric name ", Quoted(name)));
  }
  for (const Family& f : families_) {
    if (f.name == name) {
      return absl::AlreadyExistsError(absl::StrCat("metric ", Quoted(name), " declared twice"));
    }
  }
  families_.push_back({std::string(name), type, std::string(help), {}});
  return absl::OkStatus();
}

absl::Status Exposition::Check(std::string_view name, MetricType want, const Labels& labels,
                               Family** family) {
  Family* f = nullptr;
  for (Family& candidate : families_) {
    if (candidate.name == name) f = &candidate;
  }
  if (f == nullptr) {
    return absl::NotFoundError(absl::StrCat("metric ", Quoted(name), " was not declared"));
  }
  if ((f->type == MetricType::kHistogram) != (want == MetricType::kHistogram)) {
    return absl::FailedPreconditionError(
        absl::StrCat("metric ", Quoted(name), " is a ", TypeName(f->type)));
  }
  std::set<std::string> seen;
  for (const auto& [label, value] : labels) {
    if (!ValidName(label, /*colons=*/false) || label.rfind("__", 0) == 0 ||
        (want == MetricType::kHistogram && label == "le")) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", Quoted(name), ": bad label name ", Quoted(label)));
    }
    if (!seen.insert(label).second) {
      return absl::InvalidArgumentError(
          absl::StrCat("metric ", Quoted(name), ": label ", Quoted(label), " given twice"));
    }
  }
  for (const Sample& s : f->samples) {
    if (std::set<std::pair<std::string, std::string>>(s.labels.begin(), s.labels.end()) ==
        std::set<std::pair<std::string, std::string>>(labels.begin(), labels.end())) {
      return absl::AlreadyExistsError(
          absl::StrCat("metric ", Quoted(name), ": the same labels twice"));
    }
  }
  *family = f;
  return absl::OkStatus();
}

absl::Status Exposition::Add(std::string_view name, const Labels& labels, double value) {
  Family* f = nullptr;
  if (absl::Status s = Check(name, MetricType::kCounter, labels, &f); !s.ok()) return s;
  if (f->type == MetricType::kCounter && (std::isnan(value) || value < 0)) {
    return absl::InvalidArgumentError(
        absl::StrCat("counter ", Quoted(name), " must not be negative or NaN"));
  }
  f->samples.push_back({labels, value, {}});
  return absl::OkStatus();
}

absl::Status Exposition::AddHistogram(std::string_view name, const Labels& labels,
                                      const HistogramValue& value) {
  Family* f = nullptr;
  if (absl::Status s = Check(name, MetricType::kHistogram, labels, &f); !s.ok()) return s;
  if (value.counts.size() != value.bounds.size() + 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("histogram ", Quoted(name), ": needs one count per bound and one above"));
  }
  for (size_t i = 0; i < value.bounds.size(); ++i) {
    if (!std::isfinite(value.bounds[i]) || (i > 0 && value.bounds[i] <= value.bounds[i - 1])) {
      return absl::InvalidArgumentError(
          absl::StrCat("histogram ", Quoted(name), ": bounds must be finite and ascend"));
    }
  }
  f->samples.push_back({labels, 0, value});
  return absl::OkStatus();
}

std::string Exposition::Format() const {
  std::string out;
  for (const Family& f : families_) {
    absl::StrAppend(&out, "# HELP ", f.name, " ", EscapeHelp(f.help), "\n");
    absl::StrAppend(&out, "# TYPE ", f.name, " ", TypeName(f.type), "\n");
    for (const Sample& s : f.samples) {
      if (f.type != MetricType::kHistogram) {
        absl::StrAppend(&out, f.name, LabelText(s.labels, nullptr), " ", FormatValue(s.value),
                        "\n");
        continue;
      }
      const HistogramValue& h = s.histogram;
      uint64_t cumulative = 0;
      for (size_t i = 0; i <= h.bounds.size(); ++i) {
        cumulative += h.counts[i];
        const std::pair<std::string, std::string> le{
            "le", i < h.bounds.size() ? FormatValue(h.bounds[i]) : "+Inf"};
        absl::StrAppend(&out, f.name, "_bucket", LabelText(s.labels, &le), " ", cumulative, "\n");
      }
      absl::StrAppend(&out, f.name, "_sum", LabelText(s.labels, nullptr), " ",
                      FormatValue(h.sum), "\n");
      absl::StrAppend(&out, f.name, "_count", LabelText(s.labels, nullptr), " ", cumulative,
                      "\n");
    }
  }
  return out;
}

}  // namespace missile::daemon::metrics
