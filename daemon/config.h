// DaemonConfig: missiled's settings, read from a TOML file (by default kDefaultConfigPath).
// deploy/missiled.toml is the example file: every key with its default, and what it means.
//
// Contract:
// - The structs mirror the file: config.classes.be.priority is [classes.be] priority. A key left
//   out keeps the default written beside its member below.
// - ParseConfig checks everything that can be checked without the machine: types, ranges, syntax
//   and the cross-field rules (noted "Rule:" below). Unknown tables and keys are errors, so a typo
//   never silently falls back to a default. Every problem is reported (InvalidArgument), one per
//   line of the message, in file order, each as "<where>:<line>: <key>: <what>", e.g.
//   "line 14: classes.be.priority: must be an integer in [-20, 19], got 25".
// - Left to the daemon at start, because they need the machine: resolving group names
//   (getgrnam), checking that device ordinals exist, reading profiles, checking ls_colours
//   against the GPU's colour count, and resolving percentages against the GPU's memory (the
//   Resolve helpers below do the arithmetic; callers round to the GPU's allocation granularity).
// - Sizes: a string as missile::ParseSize reads it (binary units: "2GiB", "512M", "1.5G",
//   "4096B"), with its unit: a bare number other than 0 (4096, "4096") is refused as ambiguous
//   (missile::IsBareNonZeroNumber, as missilectl refuses it). "Size or percent" also takes "95%"
//   (0 < p <= 100).
//
// Thread safety: plain values; the functions are pure except LoadConfig, which reads one file.
#ifndef MISSILE_DAEMON_CONFIG_H_
#define MISSILE_DAEMON_CONFIG_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/common/size.h"

namespace missile::daemon {

inline constexpr char kDefaultConfigPath[] = "/etc/missile/missiled.toml";

// Longest socket path: sizeof(sockaddr_un::sun_path) on Linux, less the terminating NUL.
inline constexpr size_t kMaxSocketPathBytes = 107;

// [daemon]
struct DaemonSection {
  // gRPC socket for the tenant and admin services. Absolute, at most kMaxSocketPathBytes.
  std::string socket = "/run/missile/missiled.sock";
  // Side channel that passes memory file descriptors. "" = socket + ".fd" (see FdSocketPath).
  // Absolute, at most kMaxSocketPathBytes, not equal to socket.
  std::string fd_socket;
  // Group owning both sockets; tenants must be in it. "" = the daemon's own group.
  std::string socket_group;
  // Permissions of both sockets: an octal string in the file ("0660", "660"), at most 0777.
  // Rule: must not grant write to others (0002): any local user could then use the GPU.
  uint32_t socket_mode = 0660;
  // Members may change policy (quotas, classes); root always may. "" = root only.
  std::string admin_group;
  // trace, debug, info, warn, error or off (spdlog's level names).
  std::string log_level = "info";
  // Where policy set at run time (missilectl set) is kept across restarts. Absolute, or "" for
  // $STATE_DIRECTORY/policy.toml when systemd gives the daemon a state directory (the unit's
  // StateDirectory=missile: /var/lib/missile/policy.toml) and not kept otherwise.
  std::string state_file;

  // The side channel's path: fd_socket, or socket + ".fd" when fd_socket is "".
  std::string FdSocketPath() const;
  // The state file in use: state_file, else the one in `state_directory` (the value of
  // $STATE_DIRECTORY; nullptr or "" for none), else "" (policy not kept).
  std::string StateFilePath(const char* state_directory) const;

  bool operator==(const DaemonSection&) const = default;
};

// [gpu]
struct GpuSection {
  // CUDA ordinals to manage, as the daemon sees them (after CUDA_VISIBLE_DEVICES): nullopt is
  // "all" in the file; otherwise a non-empty array of distinct ordinals in [0, 1023], in the
  // order written.
  std::optional<std::vector<int>> devices;
  // Size or percent of the GPU's memory: the most the pool may create on each GPU. Non-zero.
  SizeOrFraction pool_limit = SizeOrFraction::Fraction(0.95);
  // Size or percent of the GPU's memory: created at start on each GPU and kept (not released
  // to the driver). Rule: <= pool_limit when both are sizes or both percentages.
  SizeOrFraction prealloc = SizeOrFraction::Bytes(0);
  // Size: free bytes the pool keeps cached for fast allocation beyond prealloc; the rest of the
  // free blocks go back to the driver.
  uint64_t cache_limit = 2 * kGiB;
  // Zero a block before another tenant can get it.
  bool scrub_on_release = true;
  // Per-GPU colour profiles written by missile-calibrate. Absolute, or "" for none. A GPU
  // without a profile gets one colour (no colouring).
  std::string profile_dir = "/var/lib/missile/profiles";
  // Colours reserved for LS tenants on a GPU with several, in [0, 63]; 0 = half of them.
  int ls_colours = 0;

  // pool_limit in bytes for a GPU of gpu_bytes, at most gpu_bytes.
  uint64_t PoolLimitBytes(uint64_t gpu_bytes) const;
  // prealloc in bytes for a GPU of gpu_bytes, at most PoolLimitBytes(gpu_bytes).
  uint64_t PreallocBytes(uint64_t gpu_bytes) const;

  bool operator==(const GpuSection&) const = default;
};

// A class's quotas in bytes on one GPU (see ClassSection::ResolveQuotas).
struct ClassQuotaBytes {
  uint64_t tenant_quota_bytes = 0;
  uint64_t class_quota_bytes = 0;
  bool operator==(const ClassQuotaBytes&) const = default;
};

// [classes.ls] and [classes.be]
struct ClassSection {
  // Like nice, in [-20, 19]: lower is more important. Sets the tenants' PCIe weight.
  int priority = 0;
  // Size, or percent of the pool (pool_limit): the default and largest quota of one tenant of
  // the class, per GPU. Non-zero.
  SizeOrFraction tenant_quota = SizeOrFraction::Fraction(1.0);
  // Size, or percent of the pool: all the class's tenants together, per GPU. Non-zero.
  // Rule: >= tenant_quota when both are sizes or both percentages.
  SizeOrFraction class_quota = SizeOrFraction::Fraction(1.0);

  // Both quotas in bytes for a pool of pool_bytes: class quota at most pool_bytes, tenant quota
  // at most the class quota (which also settles mixed sizes and percentages).
  ClassQuotaBytes ResolveQuotas(uint64_t pool_bytes) const;

  bool operator==(const ClassSection&) const = default;
};

// [classes]
struct ClassesSection {
  ClassSection ls{.priority = -10};  // latency-sensitive
  ClassSection be{.priority = 10};   // best-effort
  bool operator==(const ClassesSection&) const = default;
};

// [pcie]: the PCIe copy scheduler (missile::pcie::FairScheduler::Config), per GPU and direction.
struct PcieSection {
  // One member per line of missile/common/pcie_settings.inc (where each one's unit, range,
  // default and meaning are written), named by its key: a size in bytes, an int or a bool. Their
  // ranges are checked by the parser.
  // Rules: max_inflight_per_tenant <= max_inflight_chunks; bypass_below <= chunk, and <= be_chunk
  // unless it is 0.
#define MISSILE_PCIE_SETTING(key, field, type, unit, min, max, multiple, zero, def, live, help) \
  type key = def;
#include "missile/common/pcie_settings.inc"
#undef MISSILE_PCIE_SETTING

  bool operator==(const PcieSection&) const = default;
};

// [compute]: pacing of BE tenants' GPU work next to LS work, per GPU (see docs/pacing.md).
struct ComputeSection {
  // The pacing settings, one field per line of missile/common/compute_settings.inc (where each
  // one's unit, range, default and meaning are written), named by its key: int, or bool for a
  // switch. Their ranges are checked by the parser.
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  std::conditional_t<std::is_same_v<type, bool>, bool, int> key = def;
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  // "start": missiled makes sure an MPS control daemon runs (starting one when none answers in
  // mps_pipe_directory) before it opens the GPUs, and stops one it started when it stops.
  // "off": missiled leaves MPS alone (tenants still run under one that runs).
  std::string mps = "off";
  std::string mps_pipe_directory = "/tmp/nvidia-mps";   // absolute; NVIDIA's default
  std::string mps_log_directory = "/var/log/nvidia-mps";  // absolute; NVIDIA's default
  std::string mps_control = "nvidia-cuda-mps-control";  // the control program: a name or a path

  bool operator==(const ComputeSection&) const = default;
};

// [metrics]: the Prometheus endpoint (GET /metrics over HTTP; docs/operations.md, "Metrics").
struct MetricsSection {
  // Serve the endpoint at all. Off by default: it opens a TCP port.
  bool enabled = false;
  // An IPv4 or IPv6 address literal to listen on ("127.0.0.1", "::1", "0.0.0.0", "::").
  std::string address = "127.0.0.1";
  // TCP port, in [1, 65535].
  int port = 9850;

  bool operator==(const MetricsSection&) const = default;
};

// [limits]: what one uid may hold of the daemon (docs/operations.md, "Limits and timeouts").
// Root and members of daemon.admin_group are not held to the per-uid and total caps.
struct LimitsSection {
  // Sessions (tenant processes) one uid may have at once, in [1, 32]: at most half of a GPU's
  // 64 pacing slots, so one uid never takes every slot.
  int max_sessions_per_uid = 16;
  // gRPC connections one uid may hold open, in [1, 65536]; one beyond it is closed at once.
  // Rule: >= max_sessions_per_uid (each tenant process holds one).
  int max_connections_per_uid = 64;
  // gRPC connections of all uids together, in [1, 1048576]. Rule: >= max_connections_per_uid.
  int max_connections = 4096;
  // Side-channel connections one uid may hold open, greeted or not, in [1, 65536].
  // Rule: >= max_sessions_per_uid (each session holds one).
  int max_side_connections_per_uid = 64;
  // Milliseconds a gRPC connection may stay open with no session registered on it and no call,
  // in [100, 86400000]; then the daemon closes it.
  int idle_timeout_ms = 10000;
  // Descriptors kept for root and the admin group, in [64, 1048576]: other uids' connections
  // are refused while the lowest free descriptor number is within this many of the descriptor
  // limit (at most a quarter of the limit is kept).
  int admin_reserve_fds = 1024;

  bool operator==(const LimitsSection&) const = default;
};

// [kubernetes]: what missiled asks of the node's kubelet (docs/operations.md, "Kubernetes
// identity").
struct KubernetesSection {
  // The kubelet's pod-resources socket (usually /var/lib/kubelet/pod-resources/kubelet.sock):
  // a tenant that registers with device IDs (MISSILE_K8S_DEVICES) gets its pod, namespace and
  // container from the kubelet's List answer instead of its own claim. "" (default): not asked.
  // Absolute, at most 107 bytes (a Unix socket path).
  std::string pod_resources_socket;

  bool operator==(const KubernetesSection&) const = default;
};

struct DaemonConfig {
  DaemonSection daemon;
  GpuSection gpu;
  ClassesSection classes;
  PcieSection pcie;
  ComputeSection compute;
  MetricsSection metrics;
  LimitsSection limits;
  KubernetesSection kubernetes;

  bool operator==(const DaemonConfig&) const = default;
};

// Reads and parses the file at `path`. A file that does not exist gives the defaults unless
// must_exist (pass false only for kDefaultConfigPath when no path was given on the command
// line); then NotFound. Other errors: the errno's code for a file that cannot be read,
// FailedPrecondition for one that is not a regular file or that others may write (it decides
// who may administer the daemon), InvalidArgument for bad contents (messages start "<path>:").
absl::StatusOr<DaemonConfig> LoadConfig(const std::string& path, bool must_exist);

// Parses TOML text (messages start "line N:"). The empty text gives the defaults.
absl::StatusOr<DaemonConfig> ParseConfig(std::string_view toml_text);

// One line per key, "section.key = value" with its effective value (fd_socket resolved), in
// the example file's order, joined by '\n': for the daemon's start-up log. The text is itself
// valid TOML that ParseConfig reads back to the same settings.
std::string DescribeConfig(const DaemonConfig& config);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_CONFIG_H_
