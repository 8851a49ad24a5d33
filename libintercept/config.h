// The shim's configuration, read once from the environment of the host program.
//
//   MISSILE_DISABLE=1          every hook becomes a plain pass-through (no counting, no policy)
//   MISSILE_LOG_LEVEL=LEVEL    trace|debug|info|warn|error|off (default warn); debug traces calls
//   MISSILE_REAL_LIBCUDA=PATH  the real driver to load (default: searched, see real_driver.h)
//   MISSILE_REPORT=DEST        at exit, write the per-entry-point call counts to DEST:
//                              "stderr", or a file path where "%p" becomes the pid
//   MISSILE_SOCKET=PATH        missiled's socket (default /run/missile/missiled.sock)
//   MISSILE_TENANT_NAME=NAME   the tenant's name (default: the program's name)
//   MISSILE_TENANT_CLASS=C     ls (latency-sensitive) or be (best-effort, the default)
//   MISSILE_QUOTA=SIZE         ask for this VRAM quota per GPU (e.g. 8GiB; default: the class's)
//   MISSILE_BLOCKS=SHAPE       how a large allocation is backed: "single" (one daemon block of
//                              the whole size: one import and one map), "chunks" (one 2 MiB
//                              block per granule, each placed by colour), or "auto" (default:
//                              chunks where the GPU has several colours, single elsewhere)
//   MISSILE_NO_DAEMON=MODE     when missiled cannot be reached, or its session ends: new
//                              device allocations go to the driver ("passthrough", default,
//                              with a warning) or fail with CUDA_ERROR_OUT_OF_MEMORY ("refuse")
//   MISSILE_DAEMON_TIMEOUT_MS=N the longest a call waits for missiled (every RPC, every
//                              side-channel read and write, the keepalive answer), 100 to
//                              600000 (default 5000); a daemon that does not answer in time is
//                              treated as gone, as by MISSILE_NO_DAEMON
//   MISSILE_K8S_POD, MISSILE_K8S_NAMESPACE, MISSILE_K8S_CONTAINER
//                              the Kubernetes pod, namespace and container, sent to missiled at
//                              registration (an admission webhook sets them through the
//                              downward API); a value that is too long or has other characters
//                              than letters, digits, '-', '_', '.' is dropped with a warning
//   MISSILE_K8S_DEVICES=ID,... the device IDs the kubelet allocated to the container (set by
//                              missile-device-plugin's Allocate), sent to missiled at
//                              registration so that it can ask the kubelet which pod holds
//                              them; more than 64, an empty one, one over 128 characters or
//                              with other characters than letters, digits, '-' drops them all
//                              with a warning
//
// Parsing is pure (takes a getenv-like function) and never fails: a bad value is reported as a
// warning and replaced by its default, because the shim must never stop the host program.
#ifndef MISSILE_LIBINTERCEPT_CONFIG_H_
#define MISSILE_LIBINTERCEPT_CONFIG_H_

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "missile/common/k8s_identity.h"

namespace missile::shim {

enum class LogLevel { kTrace, kDebug, kInfo, kWarn, kError, kOff };

struct Config {
  bool disabled = false;
  LogLevel log_level = LogLevel::kWarn;
  std::string real_driver_path;  // empty: search
  std::string report;            // empty: no report
  std::string socket_path = "/run/missile/missiled.sock";
  std::string tenant_name;       // empty: the program's name
  bool latency_sensitive = false;
  uint64_t quota_bytes = 0;      // 0: the class default
  bool refuse_without_daemon = false;
  int daemon_timeout_ms = 5000;
  enum class Blocks { kAuto, kSingle, kChunks };
  Blocks blocks = Blocks::kAuto;
  // MISSILE_LS_MARKS=every: an LS tenant writes its completion after every work item, not only
  // before it waits (Pacer::LsMarkEvery); for an LS that waits in ways the shim cannot see, and
  // to measure what the writes cost.
  bool ls_marks_every = false;
  K8sIdentity k8s;  // each field empty when not given, or dropped as bad
  std::vector<std::string> k8s_devices;  // empty when not given, or dropped as bad

  // Warnings about values that were ignored, for the shim to log once it has a logger.
  std::vector<std::string> warnings;
};

using GetEnvFn = std::function<const char*(const char*)>;

Config ParseConfig(const GetEnvFn& getenv_fn);

// The report destination with "%p" replaced by `pid`.
std::string ExpandReportPath(const std::string& pattern, int pid);

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_CONFIG_H_
