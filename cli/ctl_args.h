// missilectl's command line, parsed into plain values, and the request a `set` builds: a
// SetPolicyRequest for a tenant target, a SetPacingRequest for pacing options without a target.
//
//   missilectl [--socket PATH] [--json] COMMAND ...
//
// Global options may appear before or after the command. Parsing does no I/O; it checks what
// can be checked without the daemon (the same ranges and combinations missiled enforces), so a
// typo fails with exit status 2 before anything is sent. Pure functions: thread-safe.
#ifndef MISSILE_CLI_CTL_ARGS_H_
#define MISSILE_CLI_CTL_ARGS_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/v1/missile.pb.h"

namespace missile::cli {

inline constexpr std::string_view kDefaultSocket = "/run/missile/missiled.sock";

// Printed for --help (and only then); the pacing options' lines come from compute_settings.inc.
std::string CtlUsage();

// kSet: a tenant or class policy change; kSetPacing: `set` with pacing options only.
enum class CtlCommand { kHelp, kVersion, kStatus, kTenants, kSet, kSetPacing, kTop, kCheck };

// `set` with pacing options: the daemon's pacing policy, no target. One field per line of
// missile/common/compute_settings.inc, named by its key, in its unit and range.
struct PacingArgs {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  std::optional<std::conditional_t<std::is_same_v<type, bool>, bool, uint64_t>> key;
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  bool any() const {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  if (key) return true;
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
    return false;
  }
};

// `set`: exactly one target (pid, name or class) and at least one change, or pacing options
// alone (never both).
struct SetArgs {
  std::optional<uint32_t> pid;
  std::optional<std::string> name;
  std::optional<v1::TenantClass> tenant_class;  // --class: the class defaults
  std::optional<v1::TenantClass> class_to;      // --class-to: a tenant's new class
  std::optional<int32_t> priority;              // -20..19
  std::optional<uint32_t> weight;               // 1..1048576
  // --quota and --class-quota: a size with its unit, or a percentage of each GPU's pool.
  std::optional<uint64_t> quota_bytes;
  std::optional<double> quota_percent;        // (0, 100]
  std::optional<uint64_t> class_quota_bytes;  // with a --class target only
  std::optional<double> class_quota_percent;
  // --budget-pct: an LS tenant's latency budget (with --class ls: the class's), 100..1000; 0
  // clears it.
  std::optional<uint32_t> budget_pct;
  // --force: a quota of 0, or one below what live tenants hold (the daemon refuses that too).
  bool force = false;
  PacingArgs pacing;
};

// `top` (cli/ctl_top.h).
struct TopArgs {
  double interval_s = 1.0;  // --interval SECONDS, 0.1..3600
  bool once = false;        // --once: one frame, as when stdout is not a terminal
};

struct CtlArgs {
  std::string socket;
  bool json = false;
  CtlCommand command = CtlCommand::kHelp;
  SetArgs set;  // for kSet and kSetPacing
  TopArgs top;  // for kTop
};

// The socket when --socket is not given: $MISSILE_SOCKET if set and not empty, else the default.
std::string DefaultSocket(const char* env_socket);

// `args` excludes argv[0]. InvalidArgument with a one-line reason for bad usage.
absl::StatusOr<CtlArgs> ParseCtlArgs(const std::vector<std::string>& args,
                                     std::string_view default_socket);

v1::SetPolicyRequest BuildSetPolicyRequest(const SetArgs& set);
v1::SetPacingRequest BuildSetPacingRequest(const PacingArgs& pacing);

}  // namespace missile::cli

#endif  // MISSILE_CLI_CTL_ARGS_H_
