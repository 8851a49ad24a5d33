#include "ctl_args.h"

#include <limits>

#include "absl/strings/numbers.h"
#include "flags.h"
#include "missile/common/size.h"
#include "missile/common/status_macros.h"
#include "missile/flags/suggest.h"
#include "run_args.h"

namespace missile::cli {

const char kCtlUsage[] =
    "usage: missilectl [--socket PATH] [--json] COMMAND ...\n"
    "\n"
    "commands:\n"
    "  check                       a health and isolation check after installing: socket,\n"
    "                              daemon, GPUs, MPS, pacing, tenants by class, LS busy and\n"
    "                              BE held ratios; one line each, ok, warn or FAIL\n"
    "  status                      daemon version and uptime, per-GPU pools and colours,\n"
    "                              class policies, the pacing policy\n"
    "  tenants                     one row per tenant: class, priority, weight, memory, PCIe\n"
    "                              and GPU work (held, in flight, LS busy) per GPU\n"
    "  set TARGET CHANGE...        change policy; prints how many tenants changed\n"
    "      TARGET: --pid PID | --name NAME | --class ls|be (the class defaults)\n"
    "      CHANGE: --class-to ls|be  --priority N (-20..19)  --weight N (1..1048576)\n"
    "              --quota SIZE (per tenant, per GPU)  --class-quota SIZE (--class only)\n"
    "              --force (a quota of 0, or below what live tenants hold)\n"
    "  top [--interval S] [--once] a live view of GPUs and tenants (memory, PCIe rates and\n"
    "                              shares, time held), redrawn every S seconds (default 1,\n"
    "                              0.1..3600); q quits. One frame when stdout is not a\n"
    "                              terminal, or with --once\n"
    "  set PACING...               change the daemon's pacing of BE GPU work on every GPU\n"
    "                              (no TARGET); prints what changed, before -> after\n"
    "      PACING: --pacing on|off  --window-items N (1..1024)  --window-us N (0..1000000)\n"
    "              --ls-idle-us N (0..1000000)  --ls-stale-ms N (1..600000)\n"
    "              --max-hold-ms N (0..600000)  --unknown-us N (0..1000000)\n"
    "              --share-slack-us N (0..1000000)  --refill-us N (0..1000000)\n"
    "              --ls-reserve-tpcs N (0..127: TPCs BE kernels leave free, on MPS)\n"
    "\n"
    "options:\n"
    "  --socket PATH   missiled's socket (default $MISSILE_SOCKET or /run/missile/missiled.sock)\n"
    "  --json          print the daemon's answer as one line of JSON: protobuf's mapping\n"
    "                  with proto field names (64-bit numbers as strings, enums by name)\n"
    "  --version       print missilectl's version and exit\n"
    "  -h, --help      this text\n"
    "\n"
    "SIZE: a size with its binary unit (8G, 512MiB, 1048576B) or a percentage of each GPU's\n"
    "pool (50%), as in missiled.toml; a number without a unit is refused as ambiguous.\n"
    "\n"
    "exit status: 0 done; 1 missiled could not be reached, refused, or went away while top\n"
    "ran (check: a check FAILed); 2 bad usage.\n";

std::string DefaultSocket(const char* env_socket) {
  if (env_socket != nullptr && *env_socket != '\0') return env_socket;
  return std::string(kDefaultSocket);
}

using flags::DidYouMean;

namespace {

absl::Status Twice(std::string_view flag) {
  return absl::InvalidArgumentError(std::string(flag) + " given twice");
}

template <typename T>
absl::Status SetOnce(std::optional<T>& slot, std::string_view flag, T value) {
  if (slot.has_value()) return Twice(flag);
  slot = std::move(value);
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ParseInt(std::string_view flag, const std::string& text, int64_t min,
                                 int64_t max, std::string_view what) {
  int64_t v = 0;
  if (!absl::SimpleAtoi(text, &v) || v < min || v > max) {
    return absl::InvalidArgumentError(std::string(flag) + ": '" + text + "' is not " +
                                      std::string(what));
  }
  return v;
}

// A quota as missiled's configuration reads one: a size with its unit or a percentage. A bare
// number is refused: `--quota 95` once set a 95-byte quota.
absl::StatusOr<SizeOrFraction> ParseQuotaFlag(std::string_view flag, const std::string& text) {
  absl::StatusOr<SizeOrFraction> quota = ParseSizeOrPercentWithUnit(text);
  if (!quota.ok()) {
    return absl::InvalidArgumentError(std::string(flag) + ": " +
                                      std::string(quota.status().message()));
  }
  return *quota;
}

// The percentage as written ("12.5%" -> 12.5), which the daemon resolves on each GPU exactly
// as the configuration's percentages are.
double PercentAsWritten(const std::string& text) {
  std::string_view s = text;
  while (!s.empty() && (s.back() == '%' || s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  double percent = 0;
  if (!absl::SimpleAtod(std::string(s), &percent)) return 0;  // not reached: it parsed as one
  return percent;
}

// A pacing option's flag, its range and where it goes.
struct PacingFlag {
  const char* flag;
  int64_t min;
  int64_t max;
  const char* what;
  std::optional<uint64_t> PacingArgs::*field;
};

constexpr PacingFlag kPacingFlags[] = {
    {"--window-us", 0, 1'000'000, "microseconds in [0, 1000000]", &PacingArgs::window_us},
    {"--ls-idle-us", 0, 1'000'000, "microseconds in [0, 1000000]", &PacingArgs::ls_idle_us},
    {"--ls-stale-ms", 1, 600'000, "milliseconds in [1, 600000]", &PacingArgs::ls_stale_ms},
    {"--max-hold-ms", 0, 600'000, "milliseconds in [0, 600000]", &PacingArgs::max_hold_ms},
    {"--unknown-us", 0, 1'000'000, "microseconds in [0, 1000000]", &PacingArgs::unknown_us},
    {"--share-slack-us", 0, 1'000'000, "microseconds in [0, 1000000]",
     &PacingArgs::share_slack_us},
    {"--refill-us", 0, 1'000'000, "microseconds in [0, 1000000]", &PacingArgs::refill_us},
    {"--ls-reserve-tpcs", 0, 127, "a TPC count in [0, 127]", &PacingArgs::ls_reserve_tpcs},
};

// A pacing option at the reader's position; false when the option is not one.
absl::StatusOr<bool> ParsePacingOption(ArgReader& reader, PacingArgs& pacing) {
  std::string flag(reader.CurrentName());
  if (flag == "--pacing") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    if (v != "on" && v != "off") {
      return absl::InvalidArgumentError("--pacing: '" + v + "' is not on or off");
    }
    MISSILE_RETURN_IF_ERROR(SetOnce(pacing.pacing, flag, v == "on"));
    return true;
  }
  if (flag == "--window-items") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    MISSILE_ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, v, 1, 1024, "a count in [1, 1024]"));
    MISSILE_RETURN_IF_ERROR(SetOnce(pacing.window_items, flag, static_cast<uint32_t>(n)));
    return true;
  }
  for (const PacingFlag& f : kPacingFlags) {
    if (flag != f.flag) continue;
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    MISSILE_ASSIGN_OR_RETURN(int64_t n, ParseInt(flag, v, f.min, f.max, f.what));
    MISSILE_RETURN_IF_ERROR(SetOnce(pacing.*f.field, flag, static_cast<uint64_t>(n)));
    return true;
  }
  return false;
}

// The options every command takes, and the commands, for "did you mean".
constexpr std::string_view kGlobalOptions[] = {"--socket", "--json", "--help", "--version"};
constexpr std::string_view kCommands[] = {"status", "tenants", "set", "top", "check", "help"};
constexpr std::string_view kSetOptions[] = {
    "--pid",   "--name",        "--class", "--class-to", "--priority",    "--weight",
    "--quota", "--class-quota", "--force", "--pacing",   "--window-items"};

std::optional<CtlCommand> CommandNamed(std::string_view word) {
  static constexpr std::pair<std::string_view, CtlCommand> kNamed[] = {
      {"status", CtlCommand::kStatus}, {"tenants", CtlCommand::kTenants},
      {"set", CtlCommand::kSet},       {"top", CtlCommand::kTop},
      {"check", CtlCommand::kCheck},   {"help", CtlCommand::kHelp}};
  for (const auto& [name, command] : kNamed) {
    if (word == name) return command;
  }
  return std::nullopt;
}

// `prefix` "unknown option 'X'", with a suggestion from the global options (and `more`).
absl::Status UnknownOption(std::string_view prefix, std::string_view flag,
                           const std::vector<std::string_view>& more = {}) {
  std::vector<std::string_view> candidates(std::begin(kGlobalOptions), std::end(kGlobalOptions));
  candidates.insert(candidates.end(), more.begin(), more.end());
  return absl::InvalidArgumentError(std::string(prefix) + "unknown option '" + std::string(flag) +
                                    "'" + DidYouMean(flag, candidates));
}

// One `set` option at the reader's position.
absl::Status ParseSetOption(ArgReader& reader, SetArgs& set) {
  MISSILE_ASSIGN_OR_RETURN(bool pacing, ParsePacingOption(reader, set.pacing));
  if (pacing) return absl::OkStatus();
  std::string flag(reader.CurrentName());
  if (flag == "--pid") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    MISSILE_ASSIGN_OR_RETURN(
        int64_t pid, ParseInt(flag, v, 1, std::numeric_limits<int32_t>::max(), "a process id"));
    return SetOnce(set.pid, flag, static_cast<uint32_t>(pid));
  }
  if (flag == "--name") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    if (absl::Status s = ValidateTenantName(v); !s.ok()) {
      return absl::InvalidArgumentError("--name: " + std::string(s.message()));
    }
    return SetOnce(set.name, flag, v);
  }
  if (flag == "--class" || flag == "--class-to") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    MISSILE_ASSIGN_OR_RETURN(v1::TenantClass cls, ParseClass(flag, v));
    return SetOnce(flag == "--class" ? set.tenant_class : set.class_to, flag, cls);
  }
  if (flag == "--priority") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    MISSILE_ASSIGN_OR_RETURN(int64_t prio, ParseInt(flag, v, -20, 19, "a priority in [-20, 19]"));
    return SetOnce(set.priority, flag, static_cast<int32_t>(prio));
  }
  if (flag == "--weight") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    MISSILE_ASSIGN_OR_RETURN(int64_t weight,
                             ParseInt(flag, v, 1, 1 << 20, "a weight in [1, 1048576]"));
    return SetOnce(set.weight, flag, static_cast<uint32_t>(weight));
  }
  if (flag == "--quota" || flag == "--class-quota") {
    MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
    MISSILE_ASSIGN_OR_RETURN(SizeOrFraction quota, ParseQuotaFlag(flag, v));
    const bool tenant = flag == "--quota";
    if ((tenant ? set.quota_bytes || set.quota_percent
                : set.class_quota_bytes || set.class_quota_percent)) {
      return Twice(flag);
    }
    if (quota.is_fraction) {
      (tenant ? set.quota_percent : set.class_quota_percent) = PercentAsWritten(v);
    } else {
      (tenant ? set.quota_bytes : set.class_quota_bytes) = quota.bytes;
    }
    return absl::OkStatus();
  }
  if (flag == "--force") {
    set.force = true;
    return reader.TakeSwitch();
  }
  if (flag.starts_with("-")) {
    std::vector<std::string_view> set_options(std::begin(kSetOptions), std::end(kSetOptions));
    for (const PacingFlag& f : kPacingFlags) set_options.push_back(f.flag);
    return UnknownOption("set: ", flag, set_options);
  }
  return absl::InvalidArgumentError("set: unexpected argument '" + reader.Current() + "'");
}

// The first pacing option given, in the order of the usage text.
std::string FirstPacingFlag(const PacingArgs& p) {
  if (p.pacing) return "--pacing";
  if (p.window_items) return "--window-items";
  for (const PacingFlag& f : kPacingFlags) {
    if ((p.*f.field).has_value()) return f.flag;
  }
  return "";
}

// The first tenant target or change given.
std::string FirstTenantFlag(const SetArgs& set) {
  if (set.pid) return "--pid";
  if (set.name) return "--name";
  if (set.tenant_class) return "--class";
  if (set.class_to) return "--class-to";
  if (set.priority) return "--priority";
  if (set.weight) return "--weight";
  if (set.quota_bytes || set.quota_percent) return "--quota";
  if (set.class_quota_bytes || set.class_quota_percent) return "--class-quota";
  if (set.force) return "--force";
  return "";
}

absl::Status CheckSet(const SetArgs& set) {
  if (set.pacing.any()) {
    if (std::string tenant = FirstTenantFlag(set); !tenant.empty()) {
      return absl::InvalidArgumentError(
          "set: " + FirstPacingFlag(set.pacing) + " changes the daemon's pacing on every GPU and " +
          "takes no tenant target or change (got " + tenant + "); run two set commands");
    }
    return absl::OkStatus();
  }
  int targets = set.pid.has_value() + set.name.has_value() + set.tenant_class.has_value();
  if (targets != 1) {
    return absl::InvalidArgumentError(
        "set: give exactly one of --pid, --name or --class (or only pacing options, see --help)");
  }
  const bool quota = set.quota_bytes || set.quota_percent;
  const bool class_quota = set.class_quota_bytes || set.class_quota_percent;
  if (!set.class_to && !set.priority && !set.weight && !quota && !class_quota) {
    return absl::InvalidArgumentError(
        "set: nothing to change (give --class-to, --priority, --weight, --quota or "
        "--class-quota)");
  }
  if (set.tenant_class && set.class_to) {
    return absl::InvalidArgumentError("set: --class-to changes a tenant, not a --class target");
  }
  if (class_quota && !set.tenant_class) {
    return absl::InvalidArgumentError("set: --class-quota needs a --class target");
  }
  if (set.quota_bytes && set.class_quota_bytes && *set.quota_bytes > *set.class_quota_bytes) {
    return absl::InvalidArgumentError("set: --quota cannot exceed --class-quota");
  }
  if (set.quota_percent && set.class_quota_percent &&
      *set.quota_percent > *set.class_quota_percent) {
    return absl::InvalidArgumentError("set: --quota cannot exceed --class-quota");
  }
  // A zero quota is almost always a slip (a unit or a digit lost); it must be meant.
  if (!set.force && set.class_quota_bytes == uint64_t{0}) {
    return absl::InvalidArgumentError(
        "set: --class-quota 0 leaves the class no memory on any GPU; give --force if that is "
        "meant");
  }
  if (!set.force && set.quota_bytes == uint64_t{0}) {
    return absl::InvalidArgumentError(
        set.tenant_class
            ? "set: --quota 0 leaves every tenant of the class no memory on any GPU; give "
              "--force if that is meant"
            : "set: --quota 0 gives the tenant its class's tenant quota; give --force if that "
              "is meant");
  }
  return absl::OkStatus();
}

// An option of `top` at the reader's position.
absl::Status ParseTopOption(ArgReader& reader, TopArgs& top) {
  const std::string flag(reader.CurrentName());
  if (flag == "--once") {
    top.once = true;
    return reader.TakeSwitch();
  }
  if (flag != "--interval") {
    if (reader.Current().starts_with("-")) {
      return UnknownOption("top: ", flag, {"--interval", "--once"});
    }
    return absl::InvalidArgumentError("top takes no arguments, got '" + reader.Current() + "'");
  }
  MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
  double seconds = 0;
  if (!absl::SimpleAtod(v, &seconds) || !(seconds >= 0.1 && seconds <= 3600)) {
    return absl::InvalidArgumentError("--interval: '" + v + "' is not seconds in [0.1, 3600]");
  }
  top.interval_s = seconds;
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<CtlArgs> ParseCtlArgs(const std::vector<std::string>& args,
                                     std::string_view default_socket) {
  CtlArgs out;
  std::optional<std::string> socket;
  bool have_command = false;
  ArgReader reader(args);
  while (!reader.Done()) {
    std::string flag(reader.CurrentName());
    if (flag == "-h" || flag == "--help") {
      out.command = CtlCommand::kHelp;
      return out;
    }
    if (flag == "--version") {
      out.command = CtlCommand::kVersion;
      return out;
    }
    if (flag == "--socket") {
      MISSILE_ASSIGN_OR_RETURN(std::string v, reader.TakeValue());
      if (v.empty()) return absl::InvalidArgumentError("--socket: empty path");
      MISSILE_RETURN_IF_ERROR(SetOnce(socket, flag, v));
      continue;
    }
    if (flag == "--json") {
      MISSILE_RETURN_IF_ERROR(reader.TakeSwitch());
      out.json = true;
      continue;
    }
    if (!have_command) {
      const std::string& word = reader.Current();
      if (word.starts_with("-")) return UnknownOption("", flag);
      if (std::optional<CtlCommand> command = CommandNamed(word)) {
        out.command = *command;
        if (out.command == CtlCommand::kHelp) return out;
      } else {
        std::string suggestion = DidYouMean(
            word, std::vector<std::string_view>(std::begin(kCommands), std::end(kCommands)));
        return absl::InvalidArgumentError(
            "unknown command '" + word + "'" +
            (suggestion.empty() ? std::string(" (status, tenants, set, top or check; try --help)")
                                : suggestion));
      }
      reader.TakePositional();
      have_command = true;
      continue;
    }
    if (out.command == CtlCommand::kSet) {
      MISSILE_RETURN_IF_ERROR(ParseSetOption(reader, out.set));
      continue;
    }
    if (out.command == CtlCommand::kTop) {
      MISSILE_RETURN_IF_ERROR(ParseTopOption(reader, out.top));
      continue;
    }
    std::string command = out.command == CtlCommand::kStatus  ? "status"
                          : out.command == CtlCommand::kCheck ? "check"
                                                              : "tenants";
    if (reader.Current().starts_with("-")) return UnknownOption(command + ": ", flag);
    return absl::InvalidArgumentError(command + " takes no arguments, got '" + reader.Current() +
                                      "'");
  }
  if (!have_command) {
    return absl::InvalidArgumentError(
        "no command (status, tenants, set, top or check; try --help)");
  }
  if (out.command == CtlCommand::kSet) {
    MISSILE_RETURN_IF_ERROR(CheckSet(out.set));
    if (out.set.pacing.any()) out.command = CtlCommand::kSetPacing;
  }
  out.socket = socket.value_or(std::string(default_socket));
  return out;
}

v1::SetPolicyRequest BuildSetPolicyRequest(const SetArgs& set) {
  v1::SetPolicyRequest req;
  if (set.pid) req.set_pid(*set.pid);
  if (set.name) req.set_name(*set.name);
  if (set.tenant_class) req.set_tenant_class(*set.tenant_class);
  if (set.class_to) req.set_new_class(*set.class_to);
  if (set.priority) req.set_priority(*set.priority);
  if (set.weight) req.set_weight(*set.weight);
  if (set.quota_bytes) req.set_quota_bytes(*set.quota_bytes);
  if (set.quota_percent) req.set_quota_percent(*set.quota_percent);
  if (set.class_quota_bytes) req.set_class_quota_bytes(*set.class_quota_bytes);
  if (set.class_quota_percent) req.set_class_quota_percent(*set.class_quota_percent);
  if (set.force) req.set_force(true);
  return req;
}

v1::SetPacingRequest BuildSetPacingRequest(const PacingArgs& pacing) {
  v1::SetPacingRequest req;
  if (pacing.pacing) req.set_pacing(*pacing.pacing);
  if (pacing.window_items) req.set_window_items(*pacing.window_items);
  if (pacing.window_us) req.set_window_us(*pacing.window_us);
  if (pacing.ls_idle_us) req.set_ls_idle_us(*pacing.ls_idle_us);
  if (pacing.ls_stale_ms) req.set_ls_stale_ms(*pacing.ls_stale_ms);
  if (pacing.max_hold_ms) req.set_max_hold_ms(*pacing.max_hold_ms);
  if (pacing.unknown_us) req.set_unknown_us(*pacing.unknown_us);
  if (pacing.share_slack_us) req.set_share_slack_us(*pacing.share_slack_us);
  if (pacing.refill_us) req.set_refill_us(*pacing.refill_us);
  if (pacing.ls_reserve_tpcs) {
    req.set_ls_reserve_tpcs(static_cast<uint32_t>(*pacing.ls_reserve_tpcs));
  }
  return req;
}

}  // namespace missile::cli
