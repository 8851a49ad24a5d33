#include "ctl_args.h"

#include <algorithm>
#include <limits>
#include <map>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "flags.h"
#include "missile/common/compute_settings.h"
#include "missile/common/size.h"
#include "missile/common/status_macros.h"
#include "missile/flags/parse.h"
#include "run_args.h"

namespace missile::cli {

namespace {

constexpr const char* kUsageHead =
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
    "              --budget-pct N (LS only: its work may take N % of its alone time,\n"
    "              100..1000; with --class ls the class's, which its tenants without one\n"
    "              of their own follow; 0 clears it, back to the class's or --ls-budget-pct)\n"
    "              --force (a quota of 0, or below what live tenants hold)\n"
    "  top [--interval S] [--once] a live view of GPUs and tenants (memory, PCIe rates and\n"
    "                              shares, time held), redrawn every S seconds (default 1,\n"
    "                              0.1..3600); q quits. One frame when stdout is not a\n"
    "                              terminal, or with --once\n"
    "  set PACING...               change the daemon's pacing of BE GPU work on every GPU\n"
    "                              (no TARGET); prints what changed, before -> after\n"
    "      PACING:";
// After the pacing options.
constexpr const char* kUsageTail =
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

// The text of a pacing option's value: "on|off", or "N (min..max)".
std::string UsageValue(const settings::Setting& s) {
  if (s.unit == settings::Unit::kBool) return "on|off";
  return absl::StrCat("N (", s.min, "..", s.max, ")");
}

}  // namespace

std::string CtlUsage() {
  // The pacing options, two spaces apart, wrapped under "PACING:".
  constexpr size_t kWidth = 90;
  const std::string indent(14, ' ');
  std::string out = kUsageHead;
  size_t line = out.size() - out.rfind('\n') - 1;
  for (const settings::Setting& s : settings::kComputeSettings) {
    const std::string option = absl::StrCat(s.flag, " ", UsageValue(s));
    if (line > indent.size() && line + 2 + option.size() > kWidth) {
      absl::StrAppend(&out, "\n", indent, option);
      line = indent.size() + option.size();
    } else {
      const char* gap = line == indent.size() ? "" : (out.back() == ':' ? " " : "  ");
      absl::StrAppend(&out, gap, option);
      line += std::string_view(gap).size() + option.size();
    }
  }
  return absl::StrCat(out, "\n", kUsageTail);
}

std::string DefaultSocket(const char* env_socket) {
  if (env_socket != nullptr && *env_socket != '\0') return env_socket;
  return std::string(kDefaultSocket);
}

namespace {

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

// Calls f(setting, field) for each line of compute_settings.inc, with its field of `pacing`.
template <typename Args, typename F>
void ForEachPacingField(Args& pacing, F f) {
  const settings::Setting* setting = settings::kComputeSettings;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  f(*setting++, pacing.key);
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
}

// One pacing option's value, checked against its range.
absl::Status ParsePacingValue(const settings::Setting& s, const std::string& v,
                              std::optional<bool>& out) {
  if (v != "on" && v != "off") {
    return absl::InvalidArgumentError(absl::StrCat(s.flag, ": '", v, "' is not on or off"));
  }
  out = v == "on";
  return absl::OkStatus();
}
absl::Status ParsePacingValue(const settings::Setting& s, const std::string& v,
                              std::optional<uint64_t>& out) {
  const std::string what =
      absl::StrCat(settings::UnitNoun(s.unit), " in [", s.min, ", ", s.max, "]");
  MISSILE_ASSIGN_OR_RETURN(int64_t n, ParseInt(s.flag, v, s.min, s.max, what));
  out = static_cast<uint64_t>(n);
  return absl::OkStatus();
}

// A pacing option's value into `pacing`; false when `flag` is not a pacing option.
absl::StatusOr<bool> ParsePacingOption(const std::string& flag, const std::string& v,
                                       PacingArgs& pacing) {
  bool found = false;
  absl::Status status;
  ForEachPacingField(pacing, [&](const settings::Setting& s, auto& field) {
    if (found || flag != s.flag) return;
    found = true;
    status = ParsePacingValue(s, v, field);
  });
  if (!status.ok()) return status;
  return found;
}

// The options of `set` that take a value, in the order of the usage text.
constexpr const char* kSetOptions[] = {"--pid",      "--name",   "--class",       "--class-to",
                                       "--priority", "--weight", "--quota",       "--class-quota",
                                       "--budget-pct"};

// The value of one `set` option into `set`.
absl::Status ParseSetOption(const std::string& flag, const std::string& v, SetArgs& set) {
  MISSILE_ASSIGN_OR_RETURN(bool pacing, ParsePacingOption(flag, v, set.pacing));
  if (pacing) return absl::OkStatus();
  if (flag == "--pid") {
    MISSILE_ASSIGN_OR_RETURN(
        int64_t pid, ParseInt(flag, v, 1, std::numeric_limits<int32_t>::max(), "a process id"));
    set.pid = static_cast<uint32_t>(pid);
    return absl::OkStatus();
  }
  if (flag == "--name") {
    if (absl::Status s = ValidateTenantName(v); !s.ok()) {
      return absl::InvalidArgumentError("--name: " + std::string(s.message()));
    }
    set.name = v;
    return absl::OkStatus();
  }
  if (flag == "--class" || flag == "--class-to") {
    MISSILE_ASSIGN_OR_RETURN(v1::TenantClass cls, ParseClass(flag, v));
    (flag == "--class" ? set.tenant_class : set.class_to) = cls;
    return absl::OkStatus();
  }
  if (flag == "--priority") {
    MISSILE_ASSIGN_OR_RETURN(int64_t prio, ParseInt(flag, v, -20, 19, "a priority in [-20, 19]"));
    set.priority = static_cast<int32_t>(prio);
    return absl::OkStatus();
  }
  if (flag == "--weight") {
    MISSILE_ASSIGN_OR_RETURN(int64_t weight,
                             ParseInt(flag, v, 1, 1 << 20, "a weight in [1, 1048576]"));
    set.weight = static_cast<uint32_t>(weight);
    return absl::OkStatus();
  }
  if (flag == "--budget-pct") {
    constexpr const char* kWhat = "a budget in [100, 1000] percent, or 0 to clear it";
    MISSILE_ASSIGN_OR_RETURN(int64_t pct, ParseInt(flag, v, 0, 1000, kWhat));
    if (pct != 0 && pct < 100) {
      return absl::InvalidArgumentError(std::string(flag) + ": '" + v + "' is not " + kWhat);
    }
    set.budget_pct = static_cast<uint32_t>(pct);
    return absl::OkStatus();
  }
  // --quota or --class-quota: the options left.
  MISSILE_ASSIGN_OR_RETURN(SizeOrFraction quota, ParseQuotaFlag(flag, v));
  const bool tenant = flag == "--quota";
  if (quota.is_fraction) {
    (tenant ? set.quota_percent : set.class_quota_percent) = PercentAsWritten(v);
  } else {
    (tenant ? set.quota_bytes : set.class_quota_bytes) = quota.bytes;
  }
  return absl::OkStatus();
}

// The first pacing option given, in the order of the usage text.
std::string FirstPacingFlag(const PacingArgs& p) {
  std::string first;
  ForEachPacingField(p, [&first](const settings::Setting& s, const auto& field) {
    if (first.empty() && field.has_value()) first = s.flag;
  });
  return first;
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
  if (set.budget_pct) return "--budget-pct";
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
  if (!set.class_to && !set.priority && !set.weight && !quota && !class_quota &&
      !set.budget_pct) {
    return absl::InvalidArgumentError(
        "set: nothing to change (give --class-to, --priority, --weight, --quota, "
        "--class-quota or --budget-pct)");
  }
  if (set.budget_pct && set.tenant_class == v1::BEST_EFFORT) {
    return absl::InvalidArgumentError(
        "set: --budget-pct: class be has no latency budget; only LS tenants have one");
  }
  if (set.budget_pct && *set.budget_pct != 0 && set.class_to == v1::BEST_EFFORT) {
    return absl::InvalidArgumentError(
        "set: --budget-pct: a tenant moved to class be has no latency budget; only LS tenants "
        "have one");
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

// The options every command takes, before or after it.
struct GlobalFlags {
  std::string socket;
  bool json = false;
  bool help = false;
  bool version = false;
  std::vector<const CLI::Option*> socket_options;  // one for missilectl and one per command

  void AddTo(CLI::App& app) {
    socket_options.push_back(app.add_option("--socket", socket));
    app.add_flag("--json", json);
    app.add_flag("-h,--help", help);
    app.add_flag("--version", version);
  }
};

// The commands, in the order of the usage text.
constexpr std::pair<const char*, CtlCommand> kCommands[] = {{"status", CtlCommand::kStatus},
                                                            {"tenants", CtlCommand::kTenants},
                                                            {"set", CtlCommand::kSet},
                                                            {"top", CtlCommand::kTop},
                                                            {"check", CtlCommand::kCheck}};

// `set`'s options that take a value: kSetOptions, then the pacing ones.
std::vector<std::string> SetValueOptions() {
  std::vector<std::string> names(std::begin(kSetOptions), std::end(kSetOptions));
  for (const settings::Setting& s : settings::kComputeSettings) names.emplace_back(s.flag);
  return names;
}

// The values `set` was given, each once, into `set`.
absl::Status ReadSet(const CLI::App& command, const std::map<std::string, std::string>& values,
                     SetArgs& set) {
  for (const std::string& flag : SetValueOptions()) {
    const CLI::Option* option = command.get_option(flag);
    if (option->count() == 0) continue;
    MISSILE_RETURN_IF_ERROR(flags::GivenOnce({option}));
    MISSILE_RETURN_IF_ERROR(ParseSetOption(flag, values.at(flag), set));
  }
  return absl::OkStatus();
}

absl::Status ReadInterval(const std::string& v, TopArgs& top) {
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
  GlobalFlags global;
  CLI::App app;
  flags::Configure(app);
  global.AddTo(app);
  std::vector<std::pair<const CLI::App*, CtlCommand>> commands;
  CLI::App* set = nullptr;
  CLI::App* top = nullptr;
  for (const auto& [name, command] : kCommands) {
    CLI::App* sub = flags::AddCommand(app, name);
    global.AddTo(*sub);
    commands.emplace_back(sub, command);
    if (command == CtlCommand::kSet) set = sub;
    if (command == CtlCommand::kTop) top = sub;
  }
  CLI::App* help = flags::AddCommand(app, "help", /*listed=*/false);
  global.AddTo(*help);
  std::map<std::string, std::string> set_values;
  for (const std::string& flag : SetValueOptions()) set->add_option(flag, set_values[flag]);
  set->add_flag("--force", out.set.force);
  std::string interval;
  top->add_option("--interval", interval);
  top->add_flag("--once", out.top.once);

  MISSILE_RETURN_IF_ERROR(flags::Parse(app, args));
  if (global.help || help->parsed()) return out;  // CtlCommand::kHelp
  if (global.version) {
    out.command = CtlCommand::kVersion;
    return out;
  }
  MISSILE_RETURN_IF_ERROR(flags::GivenOnce(global.socket_options));
  const bool socket_given = app.get_option("--socket")->count() > 0 ||
                            std::any_of(commands.begin(), commands.end(), [](const auto& c) {
                              return c.first->get_option("--socket")->count() > 0;
                            });
  if (socket_given && global.socket.empty()) {
    return absl::InvalidArgumentError("--socket: empty path");
  }
  auto parsed = std::find_if(commands.begin(), commands.end(),
                             [](const auto& c) { return c.first->parsed(); });
  if (parsed == commands.end()) {
    return absl::InvalidArgumentError(
        "no command (status, tenants, set, top or check; try --help)");
  }
  out.command = parsed->second;
  out.json = global.json;
  if (out.command == CtlCommand::kSet) {
    MISSILE_RETURN_IF_ERROR(ReadSet(*set, set_values, out.set));
    MISSILE_RETURN_IF_ERROR(CheckSet(out.set));
    if (out.set.pacing.any()) out.command = CtlCommand::kSetPacing;
  }
  if (out.command == CtlCommand::kTop && top->count("--interval") > 0) {
    MISSILE_RETURN_IF_ERROR(ReadInterval(interval, out.top));
  }
  out.socket = socket_given ? global.socket : std::string(default_socket);
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
  if (set.budget_pct) req.set_budget_pct(*set.budget_pct);
  if (set.force) req.set_force(true);
  return req;
}

v1::SetPacingRequest BuildSetPacingRequest(const PacingArgs& pacing) {
  v1::SetPacingRequest req;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  if (pacing.key) req.set_##key(static_cast<decltype(req.key())>(*pacing.key));
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  return req;
}

}  // namespace missile::cli
