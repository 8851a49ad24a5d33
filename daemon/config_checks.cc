// The checks of values already read: absolute paths, group names, and the rules between
// fields, which are meaningful only once every field parsed cleanly.
#include <algorithm>
#include <string>
#include <utility>

#include "absl/strings/str_cat.h"
#include "daemon/internal/config_parser.h"
#include "missile/common/quote.h"

namespace missile::daemon::config_internal {

bool Parser::CheckAbsolutePath(const toml::node& node, const std::string& key,
                               const std::string& path, bool allow_empty, size_t max_bytes) {
  if (path.empty() && allow_empty) return true;
  if (path.empty() || path[0] != '/') {
    Fail(node, key,
         absl::StrCat("must be an absolute path", allow_empty ? " or \"\"" : "", ", got ",
                      QuoteString(path)));
    return false;
  }
  if (path.size() > max_bytes) {
    Fail(node, key, absl::StrCat("must be at most ", max_bytes, " bytes long, got ", path.size()));
    return false;
  }
  if (path.find('\0') != std::string::npos) {
    Fail(node, key, "must not contain a NUL character");
    return false;
  }
  return true;
}

bool Parser::CheckGroup(const toml::node& node, const std::string& key, const std::string& group) {
  const bool bad = std::any_of(group.begin(), group.end(), [](char c) {
    return c == ':' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f;
  });
  if (bad || (!group.empty() && (group.front() == ' ' || group.back() == ' '))) {
    Fail(node, key,
         absl::StrCat("must be a group name (no ':', control characters or surrounding "
                      "spaces) or \"\", got ",
                      QuoteString(group)));
    return false;
  }
  return true;
}

void Parser::CheckRules() {
  const DaemonSection& d = c_->daemon;
  if (d.fd_socket.empty() && d.FdSocketPath().size() > kMaxSocketPathBytes) {
    FailRule("daemon.fd_socket", "daemon.socket",
             absl::StrCat("daemon.socket + \".fd\" would be longer than ", kMaxSocketPathBytes,
                          " bytes: set daemon.fd_socket"));
  }
  if (d.FdSocketPath() == d.socket) {
    FailRule("daemon.fd_socket", "daemon.socket", "must differ from daemon.socket");
  }
  const GpuSection& g = c_->gpu;
  if (g.prealloc.is_fraction == g.pool_limit.is_fraction &&
      (g.prealloc.is_fraction ? g.prealloc.fraction > g.pool_limit.fraction
                              : g.prealloc.bytes > g.pool_limit.bytes)) {
    FailRule("gpu.prealloc", "gpu.pool_limit",
             absl::StrCat("must be at most gpu.pool_limit (", FormatSizeOrPercent(g.pool_limit),
                          "), got ", FormatSizeOrPercent(g.prealloc)));
  }
  for (const auto& [name, cls] :
       {std::pair<std::string, const ClassSection*>{"ls", &c_->classes.ls},
        {"be", &c_->classes.be}}) {
    const SizeOrFraction& tenant = cls->tenant_quota;
    const SizeOrFraction& whole = cls->class_quota;
    if (tenant.is_fraction == whole.is_fraction &&
        (tenant.is_fraction ? whole.fraction < tenant.fraction : whole.bytes < tenant.bytes)) {
      const std::string prefix = "classes." + name + ".";
      FailRule(prefix + "class_quota", prefix + "tenant_quota",
               absl::StrCat("must be at least ", prefix, "tenant_quota (",
                            FormatSizeOrPercent(tenant), "), got ", FormatSizeOrPercent(whole)));
    }
  }
  const PcieSection& p = c_->pcie;
  if (p.max_inflight_per_tenant > p.max_inflight_chunks) {
    FailRule("pcie.max_inflight_per_tenant", "pcie.max_inflight_chunks",
             absl::StrCat("must be at most pcie.max_inflight_chunks (", p.max_inflight_chunks,
                          "), got ", p.max_inflight_per_tenant));
  }
  if (p.bypass_below > p.chunk) {
    FailRule("pcie.bypass_below", "pcie.chunk",
             absl::StrCat("must be at most pcie.chunk (", FormatSizeExact(p.chunk), "), got ",
                          FormatSizeExact(p.bypass_below)));
  } else if (p.be_chunk != 0 && p.bypass_below > p.be_chunk) {
    FailRule("pcie.bypass_below", "pcie.be_chunk",
             absl::StrCat("must be at most pcie.be_chunk (", FormatSizeExact(p.be_chunk),
                          "), got ", FormatSizeExact(p.bypass_below)));
  }
  CheckLimitRules();
}

}  // namespace missile::daemon::config_internal
