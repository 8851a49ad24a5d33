#include "report.h"

#include <bit>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "missile/common/gpu_uuid.h"
#include "missile/common/quote.h"
#include "missile/common/status_macros.h"

namespace missile::calibrate {
namespace {

std::string JsonNumber(double v) {
  return std::isfinite(v) ? absl::StrFormat("%.6g", v) : std::string("null");
}

}  // namespace

bool Evidence::Add(std::string name, double value, std::string unit) {
  if (!std::isfinite(value) || name.empty()) return false;
  entries_.push_back({std::move(name), value, std::move(unit)});
  return true;
}

double Evidence::Find(absl::string_view name) const {
  for (const colorer::EvidenceEntry& e : entries_) {
    if (e.name == name) return e.value;
  }
  return std::numeric_limits<double>::quiet_NaN();
}

std::string FormatUuid(const std::array<uint8_t, 16>& b) { return FormatGpuUuid(b); }

std::string KernelModuleVersion(absl::string_view proc_text) {
  for (absl::string_view line : absl::StrSplit(proc_text, '\n')) {
    if (!absl::ConsumePrefix(&line, "NVRM version:")) continue;
    const size_t at = line.find("Kernel Module");
    if (at == absl::string_view::npos) continue;
    line.remove_prefix(at + absl::string_view("Kernel Module").size());
    for (absl::string_view word : absl::StrSplit(line, ' ', absl::SkipEmpty())) {
      // The first word that starts with a digit: "580.159.04".
      if (!word.empty() && word[0] >= '0' && word[0] <= '9') {
        return std::string(absl::StripAsciiWhitespace(word));
      }
    }
  }
  return "";
}

std::string FormatDriverVersion(int cuda_driver_version, absl::string_view module_version) {
  const std::string cuda =
      absl::StrCat("CUDA ", cuda_driver_version / 1000, ".", (cuda_driver_version % 1000) / 10);
  if (module_version.empty()) return cuda;
  return absl::StrCat(module_version, " (", cuda, ")");
}

std::string IsoDateUtc(std::time_t t) {
  std::tm tm{};
  gmtime_r(&t, &tm);
  return absl::StrFormat("%04d-%02d-%02dT%02d:%02d:%02dZ", tm.tm_year + 1900, tm.tm_mon + 1,
                         tm.tm_mday, tm.tm_hour, tm.tm_min, tm.tm_sec);
}

std::string ProfilePath(absl::string_view dir, absl::string_view uuid) {
  absl::string_view d = dir;
  while (d.size() > 1 && d.back() == '/') d.remove_suffix(1);
  if (d == "/") return absl::StrCat("/", uuid, ".toml");
  return absl::StrCat(d, "/", uuid, ".toml");
}

absl::StatusOr<colorer::ChannelMapSpec> MapForColours(int colours, uint64_t granularity_bytes) {
  if (colours < 1 || colours > 64) {
    return absl::InvalidArgumentError(absl::StrCat("colours = ", colours, " not in [1, 64]"));
  }
  if (!std::has_single_bit(granularity_bytes) || granularity_bytes >= (uint64_t{1} << 63)) {
    return absl::InvalidArgumentError(
        absl::StrCat("granularity ", granularity_bytes, " is not a power of two below 2^63"));
  }
  colorer::ChannelMapSpec spec;
  if (colours == 1) {
    spec.kind = colorer::ChannelMapSpec::Kind::kUniform;
    spec.channels = 1;
    return spec;
  }
  spec.kind = colorer::ChannelMapSpec::Kind::kLookupTable;
  spec.channels = 1;  // unused by this kind; left at its default
  spec.granule_shift = std::countr_zero(granularity_bytes);
  spec.table.resize(colours);
  std::iota(spec.table.begin(), spec.table.end(), 0);
  return spec;
}

absl::StatusOr<colorer::GpuColourProfile> BuildProfile(const GpuIdentity& gpu,
                                                      const Verdict& verdict,
                                                      const Evidence& evidence, std::string date,
                                                      std::string tool_version) {
  absl::StatusOr<colorer::ChannelMapSpec> map =
      MapForColours(verdict.colours, gpu.granularity_bytes);
  if (!map.ok()) return map.status();
  colorer::GpuColourProfile p;
  p.gpu_name = gpu.name;
  p.uuid = gpu.uuid;
  p.driver_version = gpu.driver_version;
  p.tool_version = std::move(tool_version);
  p.date = std::move(date);
  p.granularity_bytes = gpu.granularity_bytes;
  p.colours = verdict.colours;
  p.channel_map = *std::move(map);
  p.evidence = evidence.entries();
  MISSILE_RETURN_IF_ERROR(colorer::ValidateProfile(p));
  return p;
}

std::string FormatTable(const colorer::GpuColourProfile& p, const Verdict& verdict) {
  size_t width = 12;
  for (const colorer::EvidenceEntry& e : p.evidence) width = std::max(width, e.name.size());
  std::string out = absl::StrFormat("%s on %s (%s), driver %s, %s\n", p.tool_version, p.gpu_name,
                                    p.uuid, p.driver_version, p.date);
  out +=
      absl::StrFormat("%-*s  %14s  %s\n", static_cast<int>(width), "measurement", "value", "unit");
  out += std::string(width + 2 + 14 + 2 + 8, '-') + "\n";
  for (const colorer::EvidenceEntry& e : p.evidence) {
    out += absl::StrFormat("%-*s  %14.4f  %s\n", static_cast<int>(width), e.name, e.value, e.unit);
  }
  out += absl::StrFormat("verdict: %d colour(s) at %d MiB granularity. %s\n", verdict.colours,
                         static_cast<int>(p.granularity_bytes >> 20), verdict.reason);
  return out;
}

std::string SummaryJson(const colorer::GpuColourProfile& p, const Verdict& verdict,
                        absl::string_view profile_path) {
  std::string out = "{";
  absl::StrAppend(&out, "\"gpu_name\":", QuoteString(p.gpu_name));
  absl::StrAppend(&out, ",\"uuid\":", QuoteString(p.uuid));
  absl::StrAppend(&out, ",\"driver_version\":", QuoteString(p.driver_version));
  absl::StrAppend(&out, ",\"tool_version\":", QuoteString(p.tool_version));
  absl::StrAppend(&out, ",\"date\":", QuoteString(p.date));
  absl::StrAppend(&out, ",\"granularity_bytes\":", p.granularity_bytes);
  absl::StrAppend(&out, ",\"colours\":", p.colours);
  absl::StrAppend(&out, ",\"verdict\":", QuoteString(verdict.reason));
  absl::StrAppend(&out, ",\"profile_path\":", QuoteString(std::string_view(profile_path.data(), profile_path.size())));
  absl::StrAppend(&out, ",\"evidence\":[");
  for (size_t i = 0; i < p.evidence.size(); ++i) {
    const colorer::EvidenceEntry& e = p.evidence[i];
    absl::StrAppend(&out, i == 0 ? "" : ",", "{\"name\":", QuoteString(e.name),
                    ",\"value\":", JsonNumber(e.value), ",\"unit\":", QuoteString(e.unit), "}");
  }
  out += "]}";
  return out;
}

}  // namespace missile::calibrate
