// missile-run's command line and the environment it builds for the program it runs.
//
//   missile-run --name NAME --class ls|be [--quota SIZE] [--socket PATH] [--shim PATH]
//               [--no-daemon passthrough|refuse] [--report DEST] [--be-sm-percent N]
//               -- PROGRAM ARGS...
//
// missile-run only prepares the environment the shim reads (see libintercept/config.h), and for
// a BE tenant under CUDA MPS the MPS client's, and execs the program; it never talks to
// missiled. Parsing and environment construction are pure; FindShim and MpsControlRunning look
// at the file system. All functions are thread-safe.
#ifndef MISSILE_CLI_RUN_ARGS_H_
#define MISSILE_CLI_RUN_ARGS_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace missile::cli {

// Printed for --help (and only then).
extern const char kRunUsage[];

struct RunArgs {
  bool help = false;
  bool version = false;  // --version: print the version, run nothing
  std::string name;
  std::string tenant_class;             // "ls" or "be"
  std::optional<uint64_t> quota_bytes;  // validated with ParseSize
  std::optional<std::string> socket;
  std::optional<std::string> shim;       // --shim, as given
  std::optional<std::string> no_daemon;  // "passthrough" or "refuse"
  std::optional<std::string> report;
  std::optional<uint32_t> be_sm_percent;  // 1..100, with --class be only
  std::vector<std::string> command;  // PROGRAM ARGS..., exactly as given
};

// What BuildRunEnv needs to know about CUDA MPS on this machine (see DetectMps).
struct MpsState {
  bool control_running = false;  // an MPS control daemon serves the client's pipe directory
  bool priority_set = false;     // CUDA_MPS_CLIENT_PRIORITY is already set (not empty)
};

inline constexpr std::string_view kDefaultMpsPipeDirectory = "/tmp/nvidia-mps";

// Whether `path` is a Unix socket (follows symbolic links).
bool IsSocket(const std::string& path);

// MPS as a client started from this environment would find it: the pipe directory is
// `env_pipe_dir` ($CUDA_MPS_PIPE_DIRECTORY) if set and not empty, else /tmp/nvidia-mps, and a
// control daemon runs when `is_socket(DIR + "/control")`; `env_priority` is
// $CUDA_MPS_CLIENT_PRIORITY.
MpsState DetectMps(const char* env_pipe_dir, const char* env_priority,
                   const std::function<bool(const std::string&)>& is_socket = IsSocket);

// 1..64 characters of letters, digits, '-', '_' and '.'. InvalidArgument otherwise.
absl::Status ValidateTenantName(std::string_view name);

// `args` excludes argv[0]. The program starts after "--" (or at the first argument that is not
// an option). InvalidArgument with a one-line reason for bad usage.
absl::StatusOr<RunArgs> ParseRunArgs(const std::vector<std::string>& args);

// Where an installed or built missile-run looks for the shim, in order, for the binary at
// `exe` (normally /proc/self/exe): DIR/../lib/missile/libmissile.so (installed),
// DIR/../lib/libmissile.so, DIR/libmissile.so,
// DIR/../libintercept/libmissile.so.
std::vector<std::string> ShimCandidates(std::string_view exe);

// The shim to preload, as an absolute path: `explicit_shim` (which must exist), else the first
// existing ShimCandidates(exe), else `env_shim` ($MISSILE_SHIM, which must exist). Rejects paths
// LD_PRELOAD cannot carry (with ':' or whitespace). InvalidArgument / NotFound otherwise.
absl::StatusOr<std::string> FindShim(const std::optional<std::string>& explicit_shim,
                                     std::string_view exe, const char* env_shim);

// The variables to set, in order: LD_PRELOAD (the shim prepended to `ld_preload`, the current
// value or null; an earlier copy of the same shim is dropped), MISSILE_TENANT_NAME,
// MISSILE_TENANT_CLASS, then MISSILE_QUOTA (bytes), MISSILE_SOCKET, MISSILE_NO_DAEMON and
// MISSILE_REPORT where given. For class be: CUDA_MPS_CLIENT_PRIORITY=1 (below normal, so MPS
// runs LS clients' work first) when `mps.control_running` and not `mps.priority_set`, and
// CUDA_MPS_ACTIVE_THREAD_PERCENTAGE from --be-sm-percent. Variables not listed are inherited
// unchanged.
std::vector<std::pair<std::string, std::string>> BuildRunEnv(const RunArgs& args,
                                                             const std::string& shim,
                                                             const char* ld_preload,
                                                             const MpsState& mps = {});

}  // namespace missile::cli

#endif  // MISSILE_CLI_RUN_ARGS_H_
