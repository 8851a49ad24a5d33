// DescribeConfig: the effective configuration as TOML lines, for the start-up log.
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "daemon/config.h"
#include "daemon/internal/config_parser.h"
#include "missile/common/compute_settings.h"
#include "missile/common/pcie_settings.h"
#include "missile/common/quote.h"

namespace missile::daemon {

using config_internal::OctalMode;

namespace {

// The value of a settings table's entry `s` as TOML: true or false, a quoted size, a number;
// with what 0 means, where the table says, as a note.
template <typename T>
std::string Described(const settings::Setting& s, T v) {
  if constexpr (std::is_same_v<T, bool>) {
    return v ? "true" : "false";
  } else {
    std::string text = s.unit == settings::Unit::kBytes
                           ? QuoteString(FormatSizeExact(static_cast<uint64_t>(v)))
                           : absl::StrCat(v);
    if (v == 0 && s.zero != nullptr) absl::StrAppend(&text, "  # ", s.zero);
    return text;
  }
}

void DescribePcie(const PcieSection& p, std::vector<std::string>* out) {
  const settings::Setting* s = settings::kPcieSettings;
#define MISSILE_PCIE_SETTING(key, field, type, unit, min, max, multiple, zero, def, live, help) \
  out->push_back(absl::StrCat("pcie." #key " = ", Described(*s++, p.key)));
#include "missile/common/pcie_settings.inc"
#undef MISSILE_PCIE_SETTING
}

void DescribeCompute(const ComputeSection& c, std::vector<std::string>* out) {
  std::vector<std::string>& lines = *out;
  const settings::Setting* s = settings::kComputeSettings;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  lines.push_back(absl::StrCat("compute." #key " = ", Described(*s++, c.key)));
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  lines.push_back(absl::StrCat("compute.mps = ", QuoteString(c.mps)));
  lines.push_back(absl::StrCat("compute.mps_pipe_directory = ", QuoteString(c.mps_pipe_directory)));
  lines.push_back(absl::StrCat("compute.mps_log_directory = ", QuoteString(c.mps_log_directory)));
  lines.push_back(absl::StrCat("compute.mps_control = ", QuoteString(c.mps_control)));
}

}  // namespace

std::string DescribeConfig(const DaemonConfig& config) {
  const DaemonSection& d = config.daemon;
  const GpuSection& g = config.gpu;
  auto quoted = [](std::string_view s) { return QuoteString(s); };
  auto boolean = [](bool b) { return b ? "true" : "false"; };
  auto size = [](uint64_t bytes) { return QuoteString(FormatSizeExact(bytes)); };
  auto size_or_percent = [](const SizeOrFraction& v) { return QuoteString(FormatSizeOrPercent(v)); };
  std::string devices = "\"all\"";
  if (g.devices.has_value()) devices = absl::StrCat("[", absl::StrJoin(*g.devices, ", "), "]");
  std::vector<std::string> lines = {
      absl::StrCat("daemon.socket = ", quoted(d.socket)),
      absl::StrCat("daemon.fd_socket = ", quoted(d.FdSocketPath()),
                   d.fd_socket.empty() ? "  # daemon.socket + \".fd\"" : ""),
      absl::StrCat("daemon.socket_group = ", quoted(d.socket_group),
                   d.socket_group.empty() ? "  # the daemon's group" : ""),
      absl::StrCat("daemon.socket_mode = \"", OctalMode(d.socket_mode), "\""),
      absl::StrCat("daemon.admin_group = ", quoted(d.admin_group),
                   d.admin_group.empty() ? "  # root only" : ""),
      absl::StrCat("daemon.log_level = ", quoted(d.log_level)),
      absl::StrCat("daemon.state_file = ", quoted(d.state_file),
                   d.state_file.empty() ? "  # $STATE_DIRECTORY/policy.toml, if set" : ""),
      absl::StrCat("gpu.devices = ", devices),
      absl::StrCat("gpu.pool_limit = ", size_or_percent(g.pool_limit)),
      absl::StrCat("gpu.prealloc = ", size_or_percent(g.prealloc)),
      absl::StrCat("gpu.cache_limit = ", size(g.cache_limit)),
      absl::StrCat("gpu.scrub_on_release = ", boolean(g.scrub_on_release)),
      absl::StrCat("gpu.profile_dir = ", quoted(g.profile_dir),
                   g.profile_dir.empty() ? "  # none: one colour per GPU" : ""),
      absl::StrCat("gpu.ls_colours = ", g.ls_colours,
                   g.ls_colours == 0 ? "  # half of each GPU's colours" : ""),
  };
  for (const auto& [name, cls] :
       {std::pair<std::string, const ClassSection*>{"ls", &config.classes.ls},
        {"be", &config.classes.be}}) {
    lines.push_back(absl::StrCat("classes.", name, ".priority = ", cls->priority));
    lines.push_back(
        absl::StrCat("classes.", name, ".tenant_quota = ", size_or_percent(cls->tenant_quota)));
    lines.push_back(
        absl::StrCat("classes.", name, ".class_quota = ", size_or_percent(cls->class_quota)));
  }
  DescribePcie(config.pcie, &lines);
  DescribeCompute(config.compute, &lines);
  const MetricsSection& m = config.metrics;
  lines.push_back(absl::StrCat("metrics.enabled = ", boolean(m.enabled)));
  lines.push_back(absl::StrCat("metrics.address = ", QuoteString(m.address)));
  lines.push_back(absl::StrCat("metrics.port = ", m.port));
  const LimitsSection& l = config.limits;
  lines.push_back(absl::StrCat("limits.max_sessions_per_uid = ", l.max_sessions_per_uid));
  lines.push_back(absl::StrCat("limits.max_connections_per_uid = ", l.max_connections_per_uid));
  lines.push_back(absl::StrCat("limits.max_connections = ", l.max_connections));
  lines.push_back(
      absl::StrCat("limits.max_side_connections_per_uid = ", l.max_side_connections_per_uid));
  lines.push_back(absl::StrCat("limits.idle_timeout_ms = ", l.idle_timeout_ms));
  lines.push_back(absl::StrCat("limits.admin_reserve_fds = ", l.admin_reserve_fds));
  const KubernetesSection& k = config.kubernetes;
  lines.push_back(absl::StrCat("kubernetes.pod_resources_socket = ",
                               QuoteString(k.pod_resources_socket),
                               k.pod_resources_socket.empty() ? "  # the kubelet is not asked" : ""));
  return absl::StrJoin(lines, "\n");
}

}  // namespace missile::daemon
