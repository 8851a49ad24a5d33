#include "startup_summary.h"

#include <cstdio>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "missile/common/size.h"

namespace missile::daemon {
namespace {

std::string Class(const char* name, const ClassSection& c) {
  return absl::StrCat(name, " priority ", c.priority, ", tenant quota ",
                      FormatSizeOrPercent(c.tenant_quota), ", class quota ",
                      FormatSizeOrPercent(c.class_quota));
}

std::string Octal(uint32_t mode) {
  char buf[8];
  snprintf(buf, sizeof(buf), "%04o", mode & 07777);
  return buf;
}

}  // namespace

std::vector<std::string> StartupSummary(const DaemonConfig& config, const std::string& config_path,
                                        const std::string& state_file) {
  const DaemonSection& d = config.daemon;
  const GpuSection& g = config.gpu;
  const ComputeSection& c = config.compute;
  std::string devices = "all GPUs";
  if (g.devices) devices = absl::StrCat("GPUs [", absl::StrJoin(*g.devices, ", "), "]");
  std::vector<std::string> lines = {
      absl::StrCat("configuration: ", config_path.empty() ? "built-in defaults" : config_path,
                   ", log level ", d.log_level),
      absl::StrCat("sockets: ", d.socket, " and ", d.FdSocketPath(), ", mode ",
                   Octal(d.socket_mode), ", group ",
                   d.socket_group.empty() ? "of the daemon" : d.socket_group, "; policy changes: ",
                   d.admin_group.empty() ? "root only" : "root and group " + d.admin_group),
      absl::StrCat(devices, ": pool limit ", FormatSizeOrPercent(g.pool_limit), ", prealloc ",
                   FormatSizeOrPercent(g.prealloc), ", cache ", FormatSize(g.cache_limit),
                   ", scrub ", g.scrub_on_release ? "on" : "off"),
      absl::StrCat("classes: ", Class("ls", config.classes.ls), "; ",
                   Class("be", config.classes.be)),
      absl::StrCat("PCIe: chunk ", FormatSize(config.pcie.chunk), " (BE alone ",
                   FormatSize(config.pcie.be_chunk), ", while the LS rests ",
                   FormatSize(config.pcie.be_rest_chunk), "), LS first ",
                   config.pcie.ls_first ? "on" : "off", "; pacing ",
                   c.pacing ? absl::StrCat("on (", c.window_items, " items, ", c.window_us,
                                           " us in flight per BE tenant)")
                            : "off",
                   "; MPS ", c.mps),
      absl::StrCat("policy set at run time: ",
                   state_file.empty() ? "not kept across restarts" : "kept in " + state_file,
                   "; every effective value: missiled --check-config"),
  };
  if (c.mps == "start") {
    lines.push_back(absl::StrCat(
        "MPS: missiled and the tenants started after it are MPS clients (pipe directory ",
        c.mps_pipe_directory, "); MPS clients share fate: a fault in one tenant (an illegal "
        "address) can end every other tenant's work on that GPU (docs/pacing.md)"));
  }
  return lines;
}

}  // namespace missile::daemon
