#include "ctl_format.h"

#include <algorithm>
#include <cctype>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "flags.h"
#include "google/protobuf/util/json_util.h"
#include "missile/common/size.h"

namespace missile::cli {

namespace {

int Percent(double share) { return static_cast<int>(share * 100 + 0.5); }

// Daemon-supplied text goes to a terminal: control characters become '?'.
std::string Printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (std::iscntrl(static_cast<unsigned char>(c))) c = '?';
  }
  return out;
}

}  // namespace

std::string FormatTable(const std::vector<std::vector<std::string>>& rows) {
  std::vector<size_t> widths;
  for (const auto& row : rows) {
    if (row.size() > widths.size()) widths.resize(row.size(), 0);
    for (size_t i = 0; i < row.size(); ++i) widths[i] = std::max(widths[i], row[i].size());
  }
  std::string out;
  for (const auto& row : rows) {
    std::string line;
    for (size_t i = 0; i < row.size(); ++i) {
      if (i > 0) line += "  ";
      line += row[i];
      if (i + 1 < row.size()) line.append(widths[i] - row[i].size(), ' ');
    }
    while (!line.empty() && line.back() == ' ') line.pop_back();
    out += line;
    out += '\n';
  }
  return out;
}

std::string FormatDuration(uint64_t s) {
  if (s < 60) return absl::StrFormat("%ds", s);
  if (s < 3600) return absl::StrFormat("%dm%02ds", s / 60, s % 60);
  if (s < 86400) return absl::StrFormat("%dh%02dm", s / 3600, s % 3600 / 60);
  return absl::StrFormat("%dd%02dh", s / 86400, s % 86400 / 3600);
}

std::string FormatStatus(const v1::StatusResponse& status) {
  std::string out = absl::StrCat("missiled ", Printable(status.version()), ", up ",
                                 FormatDuration(status.uptime_s()), ", ", status.tenants(),
                                 " tenant(s), ", status.pools_size(), " GPU(s)\n");
  for (const v1::PoolStatus& pool : status.pools()) {
    const v1::GpuInfo& gpu = pool.gpu();
    absl::StrAppend(&out, "\nGPU ", gpu.index(), ": ", Printable(gpu.name()), " (",
                    Printable(gpu.uuid()), "), ", FormatSize(gpu.total_bytes()), ", blocks of ",
                    FormatSize(gpu.granularity_bytes()), "\n");
    absl::StrAppend(&out, "  pool: capacity ", FormatSize(pool.capacity_bytes()), ", created ",
                    FormatSize(pool.created_bytes()), ", leased ", FormatSize(pool.leased_bytes()),
                    ", cached ", FormatSize(pool.cached_bytes()), "\n");
    absl::StrAppend(&out, "  tenants: ", pool.tenants(), "\n");
    absl::StrAppend(&out, "  colours: ", pool.colours_size());
    if (!pool.colour_note().empty())
      absl::StrAppend(&out, " (", Printable(pool.colour_note()), ")");
    out += '\n';
    // With one colour its row repeats the pool line; the table helps only with several.
    if (pool.colours_size() > 1) {
      std::vector<std::vector<std::string>> rows = {{"COLOUR", "CAPACITY", "USED", "RESERVED"}};
      for (const v1::ColourUse& c : pool.colours()) {
        rows.push_back({absl::StrCat(c.colour()), FormatSize(c.capacity_bytes()),
                        FormatSize(c.used_bytes()), Printable(c.reserved_for())});
      }
      for (absl::string_view line : absl::StrSplit(FormatTable(rows), '\n', absl::SkipEmpty())) {
        absl::StrAppend(&out, "    ", line, "\n");
      }
    }
  }
  if (status.classes_size() > 0) {
    std::vector<std::vector<std::string>> rows = {
        {"CLASS", "PRIO", "WEIGHT", "TENANT QUOTA", "CLASS QUOTA"}};
    for (const v1::ClassPolicy& c : status.classes()) {
      rows.push_back({ClassName(c.tenant_class()), absl::StrCat(c.priority()),
                      absl::StrCat(c.weight()), FormatSize(c.tenant_quota_bytes()),
                      FormatSize(c.class_quota_bytes())});
    }
    absl::StrAppend(&out, "\n", FormatTable(rows));
  }
  if (status.has_pacing()) absl::StrAppend(&out, "\n", FormatPacingPolicy(status.pacing()), "\n");
  return out;
}

std::string FormatPacingPolicy(const v1::PacingPolicy& p) {
  return absl::StrCat("pacing: ", p.pacing() ? "on" : "off", ", window ", p.window_items(),
                      " items / ", p.window_us(), " us, LS idle ", p.ls_idle_us(), " us, stale ",
                      p.ls_stale_ms(), " ms, ",
                      p.max_hold_ms() == 0 ? std::string("no max hold")
                                           : absl::StrCat("max hold ", p.max_hold_ms(), " ms"),
                      ", unknown ", p.unknown_us(), " us, share slack ", p.share_slack_us(),
                      " us, refill ", p.refill_us(), " us");
}

std::string FormatHeld(double ms) {
  if (!(ms > 0)) return "0 ms";
  if (ms < 1000) return absl::StrFormat("%.0f ms", ms);
  return absl::StrFormat("%.1f s", ms / 1000);
}

std::string FormatTenants(const v1::ListTenantsResponse& response) {
  if (response.tenants_size() == 0) return "no tenants\n";
  std::vector<const v1::TenantInfo*> tenants;
  for (const v1::TenantInfo& t : response.tenants()) tenants.push_back(&t);
  std::stable_sort(
      tenants.begin(), tenants.end(),
      [](const v1::TenantInfo* a, const v1::TenantInfo* b) { return a->pid() < b->pid(); });
  std::vector<std::vector<std::string>> rows = {{"PID", "NAME", "CLASS", "PRIO", "WEIGHT",
                                                 "USED/QUOTA", "PCIE H2D / D2H (SHARE)", "HELD",
                                                 "IN FLIGHT", "LS BUSY", "AGE"}};
  for (const v1::TenantInfo* t : tenants) {
    std::vector<std::string> use;
    for (const v1::Usage& u : t->usage()) {
      use.push_back(absl::StrCat(u.gpu_index(), ": ", FormatSize(u.used_bytes()), " / ",
                                 FormatSize(u.quota_bytes())));
    }
    std::vector<std::string> pcie;
    for (const v1::PcieUse& p : t->pcie()) {
      pcie.push_back(absl::StrCat(p.gpu_index(), ": ", FormatSize(p.h2d_bytes()), " (",
                                  static_cast<int>(p.h2d_share() * 100 + 0.5), "%) / ",
                                  FormatSize(p.d2h_bytes()), " (",
                                  static_cast<int>(p.d2h_share() * 100 + 0.5), "%)"));
    }
    const bool ls = t->tenant_class() == v1::LATENCY_SENSITIVE;
    std::vector<std::string> held, inflight, busy;
    for (const v1::ComputeUse& c : t->compute()) {
      if (ls) {
        busy.push_back(absl::StrCat(c.gpu_index(), ": ", Percent(c.ls_busy_share()), "%"));
      } else {
        held.push_back(absl::StrCat(c.gpu_index(), ": ", FormatHeld(c.held_ms()), " (",
                                    Percent(c.held_share()), "%)"));
        inflight.push_back(absl::StrCat(c.gpu_index(), ": ", c.inflight()));
      }
    }
    auto cell = [](const std::vector<std::string>& parts) {
      return parts.empty() ? std::string("-") : absl::StrJoin(parts, ", ");
    };
    rows.push_back({absl::StrCat(t->pid()), Printable(t->name()), ClassName(t->tenant_class()),
                    absl::StrCat(t->priority()), absl::StrCat(t->weight()), cell(use), cell(pcie),
                    cell(held), cell(inflight), cell(busy), FormatDuration(t->connected_s())});
  }
  return FormatTable(rows);
}

std::string FormatSetPolicy(const v1::SetPolicyResponse& response) {
  return absl::StrCat("changed ", response.tenants_changed(), " tenant(s)\n");
}

std::string FormatSetPacing(const v1::SetPacingResponse& response) {
  const v1::PacingPolicy& was = response.previous();
  const v1::PacingPolicy& now = response.pacing();
  std::string out;
  if (was.pacing() != now.pacing()) {
    absl::StrAppend(&out, "pacing: ", was.pacing() ? "on" : "off", " -> ",
                    now.pacing() ? "on" : "off", "\n");
  }
  auto number = [&out](const char* field, uint64_t from, uint64_t to) {
    if (from != to) absl::StrAppend(&out, field, ": ", from, " -> ", to, "\n");
  };
  number("window_items", was.window_items(), now.window_items());
  number("window_us", was.window_us(), now.window_us());
  number("ls_idle_us", was.ls_idle_us(), now.ls_idle_us());
  number("ls_stale_ms", was.ls_stale_ms(), now.ls_stale_ms());
  number("max_hold_ms", was.max_hold_ms(), now.max_hold_ms());
  number("unknown_us", was.unknown_us(), now.unknown_us());
  number("share_slack_us", was.share_slack_us(), now.share_slack_us());
  number("refill_us", was.refill_us(), now.refill_us());
  if (out.empty()) out = "pacing unchanged\n";
  absl::StrAppend(&out, FormatPacingPolicy(now), "\n");
  return out;
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  auto status = google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) return absl::InternalError("cannot print JSON: " + status.ToString());
  json += '\n';
  return json;
}

}  // namespace missile::cli
