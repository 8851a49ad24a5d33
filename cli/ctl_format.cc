#include "ctl_format.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <string_view>

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

}  // namespace

std::string Printable(const std::string& text) {
  std::string out = text;
  for (char& c : out) {
    if (std::iscntrl(static_cast<unsigned char>(c))) c = '?';
  }
  return out;
}

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
                    ", cached ", FormatSize(pool.cached_bytes()));
    if (pool.released_mapped_bytes() > 0) {
      absl::StrAppend(&out, ", released (may still be mapped) ",
                      FormatSize(pool.released_mapped_bytes()));
    }
    out += '\n';
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
        {"CLASS", "PRIO", "WEIGHT", "TENANT QUOTA", "CLASS QUOTA", "BUDGET"}};
    for (const v1::ClassPolicy& c : status.classes()) {
      // LS: the class's latency budget, or the pacing policy's it follows without one.
      std::string budget = "-";
      if (c.tenant_class() == v1::LATENCY_SENSITIVE && c.budget_pct() != 0) {
        budget = absl::StrCat(c.budget_pct(), "%");
      } else if (c.tenant_class() == v1::LATENCY_SENSITIVE && status.has_pacing() &&
                 status.pacing().ls_budget_pct() != 0) {
        budget = absl::StrCat(status.pacing().ls_budget_pct(), "% (pacing)");
      }
      rows.push_back({ClassName(c.tenant_class()), absl::StrCat(c.priority()),
                      absl::StrCat(c.weight()), FormatSize(c.tenant_quota_bytes()),
                      FormatSize(c.class_quota_bytes()), std::move(budget)});
    }
    absl::StrAppend(&out, "\n", FormatTable(rows));
  }
  if (status.has_pacing()) absl::StrAppend(&out, "\n", FormatPacingPolicy(status.pacing()), "\n");
  if (status.has_mps()) absl::StrAppend(&out, FormatMps(status.mps()));
  return out;
}

std::string FormatMps(const v1::MpsStatus& mps) {
  if (!mps.tenants_on_mps()) return "MPS: off, tenants are time-sliced\n";
  return absl::StrCat(
      "MPS: on, tenants are MPS clients (control daemon in ", Printable(mps.pipe_directory()),
      mps.managed_by_missiled() ? ", compute.mps = start" : ", not started by missiled", ")\n",
      "warning: MPS clients share fate: a fault in one tenant (an illegal address) can end every "
      "other tenant's work on that GPU\n");
}

std::string FormatPacingPolicy(const v1::PacingPolicy& p) {
  return absl::StrCat("pacing: ", p.pacing() ? "on" : "off", ", window ", p.window_items(),
                      " items / ", p.window_us(), " us, LS idle ", p.ls_idle_us(), " us, stale ",
                      p.ls_stale_ms(), " ms, ",
                      p.max_hold_ms() == 0 ? std::string("no max hold")
                                           : absl::StrCat("max hold ", p.max_hold_ms(), " ms"),
                      ", unknown ", p.unknown_us(), " us, share slack ", p.share_slack_us(),
                      " us, refill ", p.refill_us(), " us",
                      p.ls_reserve_tpcs() == 0
                          ? std::string()
                          : absl::StrCat(", LS reserve ", p.ls_reserve_tpcs(), " TPCs on MPS"),
                      p.ls_budget_pct() <= 100
                          ? std::string()
                          : absl::StrCat(", LS budget ", p.ls_budget_pct(), "%"),
                      p.ls_rest_ms() == 0 ? std::string()
                                          : absl::StrCat(", LS rest ", p.ls_rest_ms(), " ms"));
}

namespace {

// An LS tenant's latency budget after its busy share, where one is set: "; budget 125%: stretch
// 1.18, BE share 20%" (", BE window x4" once it is widened; "BE not held" for the share at
// the last step), or "learning", "unmet: stretch 1.31 with no BE share"), then what the newest
// measured period took against its alone duration (", last 1.31 ms of 1.12 alone", "... alone on
// MPS" where its shim is an MPS client: the yardstick the budget is kept against); "(own)"
// after the percentage when it is the tenant's own (`own`: TenantInfo.budget_pct), which shows
// even at 100.
std::string FormatBudget(const v1::ComputeUse& c, uint32_t own) {
  if (c.budget_pct() <= 100 && own == 0) return "";
  const std::string head =
      absl::StrCat("; budget ", c.budget_pct(), "%", own != 0 ? " (own)" : "");
  const std::string last =
      c.period_ms() > 0 && c.alone_ms() > 0
          ? absl::StrFormat(", last %.2f ms of %.2f alone%s", c.period_ms(), c.alone_ms(),
                            c.mps_client() ? " on MPS" : "")
          : std::string();
  switch (c.budget()) {
    case v1::ComputeUse::BUDGET_OFF:
      return head;
    case v1::ComputeUse::BUDGET_SPENDING:
      return absl::StrCat(head, absl::StrFormat(": stretch %.2f, ", c.stretch()),
                          std::isinf(c.be_share())
                              ? std::string("BE not held")
                              : absl::StrCat("BE share ", Percent(c.be_share()), "%"),
                          c.be_window_scale() > 1
                              ? absl::StrCat(", BE window x", c.be_window_scale())
                              : std::string(),
                          last, c.resting() ? ", resting" : "");
    case v1::ComputeUse::BUDGET_UNMET:
      return absl::StrFormat("%s unmet: stretch %.2f with no BE share%s", head, c.stretch(), last);
    default:
      return head + " learning" + last;
  }
}

// A BE's LS reserve of TPCs after its time held: "; reserve 8 TPCs", or why there is none.
std::string FormatReserve(const v1::ComputeUse& c) {
  switch (c.reserve()) {
    case v1::ComputeUse::RESERVE_ACTIVE:
      return absl::StrCat("; reserve ", c.reserve_tpcs(), " TPCs");
    case v1::ComputeUse::RESERVE_NOT_MPS:
      return "; no reserve (not MPS)";
    case v1::ComputeUse::RESERVE_UNAVAILABLE:
      return "; no reserve (masks unavailable)";
    default:
      return "";
  }
}

}  // namespace

std::string FormatHeld(double ms) {
  if (!(ms > 0)) return "0 ms";
  if (ms < 1000) return absl::StrFormat("%.0f ms", ms);
  return absl::StrFormat("%.1f s", ms / 1000);
}

namespace {

bool HasPod(const v1::TenantInfo* t) {
  return !t->k8s_pod().empty() || !t->k8s_namespace().empty() || !t->k8s_container().empty();
}

// "namespace/pod/container", "-" for a part not known, "-" alone for a tenant outside Kubernetes.
std::string PodOf(const v1::TenantInfo* t) {
  if (!HasPod(t)) return "-";
  auto part = [](const std::string& s) { return s.empty() ? std::string("-") : Printable(s); };
  return absl::StrCat(part(t->k8s_namespace()), "/", part(t->k8s_pod()), "/",
                      part(t->k8s_container()));
}

}  // namespace

std::string FormatTenants(const v1::ListTenantsResponse& response) {
  if (response.tenants_size() == 0) return "no tenants\n";
  std::vector<const v1::TenantInfo*> tenants;
  for (const v1::TenantInfo& t : response.tenants()) tenants.push_back(&t);
  std::stable_sort(
      tenants.begin(), tenants.end(),
      [](const v1::TenantInfo* a, const v1::TenantInfo* b) { return a->pid() < b->pid(); });
  std::vector<std::vector<std::string>> rows = {{"PID", "NAME", "CLASS", "PRIO", "WEIGHT", "GPU",
                                                 "USED/QUOTA", "PCIE H2D / D2H (SHARE)", "HELD",
                                                 "IN FLIGHT", "LS BUSY", "AGE"}};
  // The Kubernetes identity, only where some tenant has one.
  const bool pods = std::any_of(tenants.begin(), tenants.end(), HasPod);
  if (pods) rows[0].push_back("POD");
  for (const v1::TenantInfo* t : tenants) {
    // The GPUs the tenant appears on, in index order; one row each.
    std::vector<uint32_t> gpus;
    for (const v1::Usage& u : t->usage()) gpus.push_back(u.gpu_index());
    for (const v1::PcieUse& p : t->pcie()) gpus.push_back(p.gpu_index());
    for (const v1::ComputeUse& c : t->compute()) gpus.push_back(c.gpu_index());
    std::sort(gpus.begin(), gpus.end());
    gpus.erase(std::unique(gpus.begin(), gpus.end()), gpus.end());
    const bool ls = t->tenant_class() == v1::LATENCY_SENSITIVE;
    auto row = [&](std::string gpu) {
      return std::vector<std::string>{absl::StrCat(t->pid()),      Printable(t->name()),
                                      ClassName(t->tenant_class()), absl::StrCat(t->priority()),
                                      absl::StrCat(t->weight()),   std::move(gpu),
                                      "-",                          "-",
                                      "-",                          "-",
                                      "-",                          FormatDuration(t->connected_s())};
    };
    enum Column { kUse = 6, kPcie, kHeld, kInflight, kBusy };
    if (gpus.empty()) rows.push_back(row("-"));
    if (gpus.empty() && pods) rows.back().push_back(PodOf(t));
    for (uint32_t g : gpus) {
      std::vector<std::string> r = row(absl::StrCat(g));
      if (pods) r.push_back(PodOf(t));
      for (const v1::Usage& u : t->usage()) {
        if (u.gpu_index() != g) continue;
        r[kUse] = absl::StrCat(FormatSize(u.used_bytes()), " / ", FormatSize(u.quota_bytes()));
      }
      for (const v1::PcieUse& p : t->pcie()) {
        if (p.gpu_index() != g) continue;
        r[kPcie] = absl::StrCat(FormatSize(p.h2d_bytes()), " (", Percent(p.h2d_share()), "%) / ",
                                FormatSize(p.d2h_bytes()), " (", Percent(p.d2h_share()), "%)");
      }
      for (const v1::ComputeUse& c : t->compute()) {
        if (c.gpu_index() != g) continue;
        if (ls) {
          r[kBusy] =
              absl::StrCat(Percent(c.ls_busy_share()), "%", FormatBudget(c, t->budget_pct()));
        } else {
          r[kHeld] = absl::StrCat(FormatHeld(c.held_ms()), " (", Percent(c.held_share()), "%)",
                                  FormatReserve(c));
          r[kInflight] = absl::StrCat(c.inflight());
        }
      }
      rows.push_back(std::move(r));
    }
  }
  return FormatTable(rows);
}

std::string FormatSetPolicy(const v1::SetPolicyResponse& response) {
  return absl::StrCat("changed ", response.tenants_changed(), " tenant(s)\n");
}

namespace {

// An LS tenant's latency budget for `set`'s report: the one in force on its first paced GPU
// (else its own), "(own)" when it is its own: "150% (own)"; "-" when neither is known.
std::string BudgetOf(const v1::TenantInfo& t) {
  const uint32_t pct = t.compute_size() > 0 ? t.compute(0).budget_pct() : t.budget_pct();
  if (pct == 0) return "-";
  return absl::StrCat(pct, "%", t.budget_pct() != 0 ? " (own)" : "");
}

}  // namespace

std::string FormatSetPolicy(const v1::SetPolicyResponse& response,
                            const v1::SetPolicyRequest& request,
                            const v1::ListTenantsResponse& before,
                            const v1::ListTenantsResponse& after) {
  std::string out = FormatSetPolicy(response);
  auto targeted = [&request](const v1::TenantInfo& t) {
    switch (request.target_case()) {
      case v1::SetPolicyRequest::kPid: return t.pid() == request.pid();
      case v1::SetPolicyRequest::kName: return t.name() == request.name();
      case v1::SetPolicyRequest::kTenantClass: return t.tenant_class() == request.tenant_class();
      default: return false;
    }
  };
  std::vector<const v1::TenantInfo*> now;
  for (const v1::TenantInfo& t : after.tenants()) {
    if (targeted(t)) now.push_back(&t);
  }
  std::stable_sort(now.begin(), now.end(), [](const v1::TenantInfo* a, const v1::TenantInfo* b) {
    return a->pid() < b->pid();
  });
  for (const v1::TenantInfo* t : now) {
    const v1::TenantInfo* was = nullptr;
    for (const v1::TenantInfo& b : before.tenants()) {
      if (b.session_id() == t->session_id()) was = &b;
    }
    std::vector<std::string> changes;
    auto change = [&changes](const std::string& what, const std::string& from,
                             const std::string& to) {
      if (from != to) changes.push_back(absl::StrCat(what, " ", from, " -> ", to));
    };
    if (was == nullptr) {
      changes.push_back(absl::StrCat("class ", ClassName(t->tenant_class()), ", priority ",
                                     t->priority(), ", weight ", t->weight()));
    } else {
      change("class", ClassName(was->tenant_class()), ClassName(t->tenant_class()));
      change("priority", absl::StrCat(was->priority()), absl::StrCat(t->priority()));
      change("weight", absl::StrCat(was->weight()), absl::StrCat(t->weight()));
      if (was->tenant_class() == v1::LATENCY_SENSITIVE &&
          t->tenant_class() == v1::LATENCY_SENSITIVE) {
        change("budget", BudgetOf(*was), BudgetOf(*t));
      }
      for (const v1::Usage& u : t->usage()) {
        for (const v1::Usage& w : was->usage()) {
          if (w.gpu_index() != u.gpu_index()) continue;
          change(absl::StrCat("quota ", u.gpu_index(), ":"), FormatSize(w.quota_bytes()),
                 FormatSize(u.quota_bytes()));
        }
      }
    }
    absl::StrAppend(&out, t->pid(), " ", Printable(t->name()), ": ",
                    changes.empty() ? std::string("unchanged") : absl::StrJoin(changes, ", "),
                    "\n");
  }
  return out;
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
  number("ls_reserve_tpcs", was.ls_reserve_tpcs(), now.ls_reserve_tpcs());
  number("ls_budget_pct", was.ls_budget_pct(), now.ls_budget_pct());
  if (out.empty()) out = "pacing unchanged\n";
  absl::StrAppend(&out, FormatPacingPolicy(now), "\n");
  return out;
}

absl::StatusOr<std::string> ToJson(const google::protobuf::Message& message) {
  google::protobuf::util::JsonPrintOptions options;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  const google::protobuf::util::Status status =
      google::protobuf::util::MessageToJsonString(message, &json, options);
  if (!status.ok()) {
    return absl::InternalError("cannot print the answer as JSON: " + status.ToString());
  }
  json += '\n';
  return json;
}

}  // namespace missile::cli
