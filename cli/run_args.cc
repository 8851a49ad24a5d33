#include "run_args.h"

#include <sys/stat.h>

#include <cctype>
#include <filesystem>
#include <system_error>

#include "absl/strings/numbers.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "flags.h"
#include "missile/common/size.h"
#include "missile/common/status_macros.h"
#include "missile/flags/parse.h"

namespace missile::cli {

const char kRunUsage[] =
    "usage: missile-run --name NAME --class ls|be [--quota SIZE] [--socket PATH] [--shim PATH]\n"
    "                   [--no-daemon passthrough|refuse] [--report DEST] [--be-sm-percent N]\n"
    "                   -- PROGRAM ARGS...\n"
    "\n"
    "Runs PROGRAM as a Missile tenant: preloads libmissile.so and tells it who it is.\n"
    "  --name NAME        tenant name: 1-64 of letters, digits, '-', '_', '.'\n"
    "  --class ls|be      latency-sensitive or best-effort\n"
    "  --quota SIZE       VRAM quota to ask for, per GPU (e.g. 8G; default: the class's)\n"
    "  --socket PATH      missiled's socket (default /run/missile/missiled.sock)\n"
    "  --shim PATH        libmissile.so (default: next to missile-run, else $MISSILE_SHIM)\n"
    "  --no-daemon MODE   without missiled: passthrough (default) or refuse GPU memory\n"
    "  --report DEST      at exit, write call counts to DEST (\"stderr\" or a file; %p = pid)\n"
    "  --be-sm-percent N  class be: let PROGRAM use at most N% (1-100) of the GPU's SMs\n"
    "                     (sets CUDA_MPS_ACTIVE_THREAD_PERCENTAGE; only meaningful under MPS)\n"
    "  --version          print missile-run's version and exit\n"
    "  -h, --help         this text\n"
    "\n"
    "With --class be and an MPS control daemon running (a 'control' socket in\n"
    "$CUDA_MPS_PIPE_DIRECTORY, default /tmp/nvidia-mps), PROGRAM also gets\n"
    "CUDA_MPS_CLIENT_PRIORITY=1 (below normal), unless that variable is already set.\n";

absl::Status ValidateTenantName(std::string_view name) {
  if (name.empty() || name.size() > 64) {
    return absl::InvalidArgumentError("tenant name must be 1 to 64 characters, got " +
                                      std::to_string(name.size()));
  }
  for (char c : name) {
    if (!std::isalnum(static_cast<unsigned char>(c)) && c != '-' && c != '_' && c != '.') {
      return absl::InvalidArgumentError("tenant name '" + std::string(name) +
                                        "' may hold only letters, digits, '-', '_' and '.'");
    }
  }
  return absl::OkStatus();
}

namespace {

bool IsFile(const std::filesystem::path& p) {
  std::error_code ec;
  return std::filesystem::is_regular_file(p, ec);
}

absl::StatusOr<std::string> Usable(const std::filesystem::path& p) {
  std::error_code ec;
  std::filesystem::path abs = std::filesystem::absolute(p, ec);
  if (ec) return absl::InvalidArgumentError("shim " + p.string() + ": " + ec.message());
  std::string s = abs.lexically_normal().string();
  for (char c : s) {
    if (c == ':' || std::isspace(static_cast<unsigned char>(c))) {
      return absl::InvalidArgumentError("shim path " + s +
                                        " holds ':' or a space, which LD_PRELOAD cannot carry");
    }
  }
  return s;
}

}  // namespace

absl::StatusOr<RunArgs> ParseRunArgs(const std::vector<std::string>& args) {
  RunArgs out;
  std::string name, cls, quota, sm_percent, socket, shim, no_daemon, report;
  CLI::App app;
  flags::Configure(app);
  app.add_flag("-h,--help", out.help);
  app.add_flag("--version", out.version);
  const std::vector<CLI::Option*> options = {
      app.add_option("--name", name),     app.add_option("--class", cls),
      app.add_option("--quota", quota),   app.add_option("--socket", socket),
      app.add_option("--shim", shim),     app.add_option("--no-daemon", no_daemon),
      app.add_option("--report", report), app.add_option("--be-sm-percent", sm_percent)};
  // The program and its arguments never reach CLI11.
  MISSILE_RETURN_IF_ERROR(flags::ParseThenRest(app, args, out.command));
  if (out.help || out.version) return out;
  for (const CLI::Option* option : options) {
    MISSILE_RETURN_IF_ERROR(flags::GivenOnce({option}));
    if (option->count() > 0 && option->as<std::string>().empty()) {
      return absl::InvalidArgumentError(option->get_name() + ": empty value");
    }
  }
  if (app.count("--socket") > 0) out.socket = socket;
  if (app.count("--shim") > 0) out.shim = shim;
  if (app.count("--no-daemon") > 0) out.no_daemon = no_daemon;
  if (app.count("--report") > 0) out.report = report;

  if (app.count("--name") == 0) return absl::InvalidArgumentError("--name NAME is required");
  if (absl::Status s = ValidateTenantName(name); !s.ok()) {
    return absl::InvalidArgumentError("--name: " + std::string(s.message()));
  }
  out.name = name;
  if (app.count("--class") == 0) return absl::InvalidArgumentError("--class ls|be is required");
  if (absl::StatusOr<v1::TenantClass> c = ParseClass("--class", cls); !c.ok()) return c.status();
  out.tenant_class = cls;
  if (app.count("--quota") > 0) {
    absl::StatusOr<uint64_t> bytes = ParseSize(quota);
    if (!bytes.ok()) {
      return absl::InvalidArgumentError("--quota: " + std::string(bytes.status().message()));
    }
    if (*bytes == 0) return absl::InvalidArgumentError("--quota: must be more than 0 bytes");
    out.quota_bytes = *bytes;
  }
  if (out.no_daemon && *out.no_daemon != "passthrough" && *out.no_daemon != "refuse") {
    return absl::InvalidArgumentError("--no-daemon: '" + *out.no_daemon +
                                      "' is not passthrough or refuse");
  }
  if (app.count("--be-sm-percent") > 0) {
    int percent = 0;
    if (!absl::SimpleAtoi(sm_percent, &percent) || percent < 1 || percent > 100) {
      return absl::InvalidArgumentError("--be-sm-percent: '" + sm_percent +
                                        "' is not a percentage in [1, 100]");
    }
    if (out.tenant_class != "be") {
      return absl::InvalidArgumentError("--be-sm-percent applies to --class be only");
    }
    out.be_sm_percent = static_cast<uint32_t>(percent);
  }
  if (out.command.empty()) {
    return absl::InvalidArgumentError("no program to run (give it after --)");
  }
  if (out.command[0].empty()) return absl::InvalidArgumentError("empty program name");
  return out;
}

std::vector<std::string> ShimCandidates(std::string_view exe) {
  std::filesystem::path dir = std::filesystem::path(exe).parent_path();
  return {
      (dir / ".." / "lib" / "missile" / "libmissile.so").lexically_normal().string(),  // installed
      (dir / ".." / "lib" / "libmissile.so").lexically_normal().string(),
      (dir / "libmissile.so").lexically_normal().string(),
      (dir / ".." / "libintercept" / "libmissile.so").lexically_normal().string(),
  };
}

absl::StatusOr<std::string> FindShim(const std::optional<std::string>& explicit_shim,
                                     std::string_view exe, const char* env_shim) {
  if (explicit_shim) {
    if (!IsFile(*explicit_shim)) {
      return absl::InvalidArgumentError("--shim " + *explicit_shim + ": no such file");
    }
    return Usable(*explicit_shim);
  }
  std::vector<std::string> candidates = ShimCandidates(exe);
  for (const std::string& c : candidates) {
    if (IsFile(c)) return Usable(c);
  }
  if (env_shim != nullptr && *env_shim != '\0') {
    if (!IsFile(env_shim)) {
      return absl::InvalidArgumentError(std::string("MISSILE_SHIM=") + env_shim + ": no such file");
    }
    return Usable(env_shim);
  }
  return absl::NotFoundError("cannot find libmissile.so (looked at " +
                             absl::StrJoin(candidates, ", ") +
                             "; MISSILE_SHIM is not set): give --shim PATH");
}

bool IsSocket(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0 && S_ISSOCK(st.st_mode);
}

MpsState DetectMps(const char* env_pipe_dir, const char* env_priority,
                   const std::function<bool(const std::string&)>& is_socket) {
  std::string dir = env_pipe_dir != nullptr && *env_pipe_dir != '\0'
                        ? std::string(env_pipe_dir)
                        : std::string(kDefaultMpsPipeDirectory);
  MpsState mps;
  mps.control_running = is_socket(dir + "/control");
  mps.priority_set = env_priority != nullptr && *env_priority != '\0';
  return mps;
}

std::vector<std::pair<std::string, std::string>> BuildRunEnv(const RunArgs& args,
                                                             const std::string& shim,
                                                             const char* ld_preload,
                                                             const MpsState& mps) {
  // ld.so splits LD_PRELOAD at spaces and colons.
  std::vector<std::string> preload = {shim};
  if (ld_preload != nullptr) {
    for (absl::string_view entry :
         absl::StrSplit(ld_preload, absl::ByAnyChar(": "), absl::SkipEmpty())) {
      if (entry != shim) preload.emplace_back(entry);
    }
  }
  std::vector<std::pair<std::string, std::string>> env = {
      {"LD_PRELOAD", absl::StrJoin(preload, ":")},
      {"MISSILE_TENANT_NAME", args.name},
      {"MISSILE_TENANT_CLASS", args.tenant_class},
  };
  if (args.quota_bytes) env.emplace_back("MISSILE_QUOTA", std::to_string(*args.quota_bytes));
  if (args.socket) env.emplace_back("MISSILE_SOCKET", *args.socket);
  if (args.no_daemon) env.emplace_back("MISSILE_NO_DAEMON", *args.no_daemon);
  if (args.report) env.emplace_back("MISSILE_REPORT", *args.report);
  if (args.tenant_class == "be") {
    // Below normal: MPS schedules normal-priority (LS) clients' work first.
    if (mps.control_running && !mps.priority_set) {
      env.emplace_back("CUDA_MPS_CLIENT_PRIORITY", "1");
    }
    if (args.be_sm_percent) {
      env.emplace_back("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", std::to_string(*args.be_sm_percent));
    }
  }
  return env;
}

}  // namespace missile::cli
