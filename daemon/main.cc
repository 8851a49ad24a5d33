// missiled: the Missile node daemon. Owns the GPU memory tenants use, within quotas, and serves
// the missile.v1 Tenant and Admin services on a Unix socket. Runs under systemd (Type=notify) or
// in the foreground.
//
//   missiled [--config PATH] [--socket PATH] [--log-level LEVEL] [--check-config] [--version]
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_join.h"
#include "absl/synchronization/mutex.h"
#include "config.h"
#include "core.h"
#include "cuda_loader.h"
#include "daemon_limits.h"
#include "gpu_open.h"
#include "instance_lock.h"
#include "logger.h"
#include "metrics_snapshot.h"
#include "missile/common/status_macros.h"
#include "missile/flags/parse.h"
#include "missile/version.h"
#include "mps.h"
#include "pod_resources.h"
#include "reload.h"
#include "rpc_server.h"
#include "sd_notify.h"
#include "side_channel_server.h"
#include "startup_summary.h"
#include "watchdog.h"

namespace missile::daemon {
namespace {

struct Flags {
  std::string config = kDefaultConfigPath;
  bool config_given = false;
  std::string socket;
  std::string log_level;
  bool check_only = false;
};

void Usage(FILE* out) {
  fprintf(out,
          "usage: missiled [--config PATH] [--socket PATH] [--log-level LEVEL] [--check-config]\n"
          "                [--version]\n"
          "  --config PATH     configuration file (default %s; missing default = built-in defaults)\n"
          "  --socket PATH     override daemon.socket\n"
          "  --log-level L     override daemon.log_level (trace|debug|info|warn|error|off)\n"
          "  --check-config    validate the configuration (the groups it names too), print the\n"
          "                    effective values, exit\n"
          "  --version         print the version and exit\n",
          kDefaultConfigPath);
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  bool help = false, version = false;
  CLI::App app;
  flags::Configure(app);
  CLI::Option* config = app.add_option("--config", f.config);
  app.add_option("--socket", f.socket);
  app.add_option("--log-level", f.log_level);
  app.add_flag("--check-config", f.check_only);
  app.add_flag("-h,--help", help);
  app.add_flag("--version", version);
  MISSILE_RETURN_IF_ERROR(flags::Parse(app, std::vector<std::string>(argv + 1, argv + argc)));
  if (help) {
    Usage(stdout);
    exit(0);
  }
  if (version) {
    printf("missiled %s\n", missile::kVersion);
    exit(0);
  }
  f.config_given = config->count() > 0;
  return f;
}

absl::StatusOr<std::optional<unsigned>> GroupId(const std::string& key, const std::string& name) {
  if (name.empty()) return std::optional<unsigned>();
  group gr{}, *result = nullptr;
  std::vector<char> buf(16384);
  if (getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return absl::InvalidArgumentError(key + ": no group named '" + name +
                                      "' on this machine: create it (groupadd --system " + name +
                                      ") or name another");
  }
  return std::optional<unsigned>(gr.gr_gid);
}

// Blocks the termination signals before any thread exists, so that only the main thread
// receives them (in sigwait); ignores SIGPIPE.
sigset_t BlockTerminationSignals() {
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);
  return signals;
}

// One descriptor per VRAM block: raise the soft limit to the hard one.
void RaiseDescriptorLimit() {
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }
}

RpcServerOptions RpcOptionsOf(const LimitsSection& caps) {
  RpcServerOptions o;
  o.connections.per_uid = static_cast<size_t>(caps.max_connections_per_uid);
  o.connections.total = static_cast<size_t>(caps.max_connections);
  o.connections.idle_timeout = std::chrono::milliseconds(caps.idle_timeout_ms);
  o.admin_reserve_fds = static_cast<size_t>(caps.admin_reserve_fds);
  return o;
}

// What the caps let tenants hold in descriptors: their gRPC connections (two descriptors each:
// gRPC's and the registry's duplicate), side connections, and one per VRAM block of every pool.
// Warns when the descriptor limit leaves less than admin_reserve_fds beyond that, since then
// tenants within their caps could still exhaust the table (deploy/missiled.service's
// LimitNOFILE is set with room for the defaults).
void CheckDescriptorLimit(const LimitsSection& caps, const std::vector<Gpu>& gpus) {
  uint64_t need = 2 * static_cast<uint64_t>(caps.max_connections) +
                  limits::kMaxSideConnections + static_cast<uint64_t>(caps.admin_reserve_fds) +
                  256;  // start-up, logs, the listening sockets
  for (const Gpu& gpu : gpus) {
    if (gpu.info.granularity > 0) need += gpu.info.total_bytes / gpu.info.granularity;
  }
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) != 0 || files.rlim_cur >= need) return;
  GetLogger(kCoreLog)->warn("the descriptor limit ({}) is below what tenants may hold within "
                            "[limits] plus limits.admin_reserve_fds ({}): raise LimitNOFILE or "
                            "lower limits.max_connections", files.rlim_cur, need);
}

// Pings the systemd watchdog at half its interval, when systemd asked for it, while the core's
// loop and every GPU's copy arbiter and pacing sampler are alive (watchdog.h).
std::unique_ptr<Watchdog> StartWatchdog(const DaemonCore& core) {
  std::optional<std::chrono::microseconds> interval = SdWatchdogInterval();
  if (!interval) return nullptr;
  std::vector<Heartbeat> beats = {{"core", [&core] { return core.heartbeat(); }}};
  for (const Gpu& gpu : core.gpus()) {
    const std::string n = std::to_string(gpu.info.ordinal);
    if (gpu.arbiter) beats.push_back({"copy arbiter " + n, [&gpu] { return gpu.arbiter->heartbeat(); }});
    if (gpu.pacing) beats.push_back({"pacing " + n, [&gpu] { return gpu.pacing->heartbeat(); }});
  }
  auto period = std::chrono::duration_cast<std::chrono::milliseconds>(*interval / 2);
  auto watchdog = std::make_unique<Watchdog>(period, std::move(beats),
                                             [] { SdNotify("WATCHDOG=1"); });
  watchdog->Start();
  return watchdog;
}

// Opens the GPUs, starts the core and its two servers, and serves until a termination signal;
// then shuts down in order. The exit status of missiled.
// Re-reads the configuration as at start (the file, then the command line's overrides).
using Reread = std::function<absl::StatusOr<DaemonConfig>()>;

// SIGHUP: applies what the new configuration changes live, names what needs a restart, and
// keeps serving whatever the file says (a file that no longer parses changes nothing).
void Reload(const Reread& reread, DaemonConfig* running, DaemonCore* core) {
  auto log = GetLogger(kCoreLog);
  absl::StatusOr<DaemonConfig> next = reread();
  if (!next.ok()) {
    log->error("SIGHUP: the configuration was not reloaded, nothing changed: {}",
               std::string(next.status().message()));
    return;
  }
  const ReloadPlan plan = PlanReload(*running, *next);
  if (plan.empty()) {
    log->info("SIGHUP: configuration re-read, nothing changed");
    return;
  }
  if (plan.log_level) {
    if (absl::StatusOr<spdlog::level::level_enum> level = ParseLogLevel(*plan.log_level);
        level.ok()) {
      SetLogLevel(*level);
      running->daemon.log_level = *plan.log_level;
      log->debug("SIGHUP: log level now {}", *plan.log_level);  // shown only if it took effect
    }
  }
  if (plan.pacing) {
    if (absl::StatusOr<PacingUpdate> u = core->ReplacePacing(*plan.pacing); u.ok()) {
      running->compute = next->compute;
    } else {
      log->warn("SIGHUP: pacing not changed: {}", std::string(u.status().message()));
    }
  }
  if (!plan.live_keys.empty()) {
    log->info("SIGHUP: applied {}", absl::StrJoin(plan.live_keys, ", "));
  }
  if (!plan.restart_keys.empty()) {
    log->warn("SIGHUP: these changes take effect at the next start only: {}",
              absl::StrJoin(plan.restart_keys, ", "));
  }
}

// [metrics]: starts the Prometheus endpoint when enabled; false (logged) when it cannot listen.
bool StartMetrics(const DaemonConfig& config, const DaemonCore& core,
                  std::unique_ptr<metrics::HttpServer>* server) {
  if (!config.metrics.enabled) return true;
  auto started =
      StartMetricsEndpoint(core, config.metrics.address, config.metrics.port, missile::kVersion);
  if (!started.ok()) {
    GetLogger(kCoreLog)->error("{}", std::string(started.status().message()));
    return false;
  }
  *server = *std::move(started);
  GetLogger(kCoreLog)->info("metrics on {} port {}, GET /metrics", config.metrics.address,
                            config.metrics.port);
  return true;
}

CoreOptions CoreOptionsOf(const DaemonConfig& config, std::optional<unsigned> admin_gid) {
  CoreOptions options;
  options.fd_socket_path = config.daemon.FdSocketPath();
  options.admin_gid = admin_gid;
  options.ls.priority = config.classes.ls.priority;
  options.be.priority = config.classes.be.priority;
  options.state_file = config.daemon.StateFilePath(getenv("STATE_DIRECTORY"));
  options.max_sessions_per_uid = static_cast<size_t>(config.limits.max_sessions_per_uid);
  if (const std::string& socket = config.kubernetes.pod_resources_socket; !socket.empty()) {
    // A registration waits for the kubelet at most this long (then keeps the tenant's claim).
    options.pod_resolver =
        std::make_shared<KubeletPodResolver>(socket, std::chrono::milliseconds(1000));
    GetLogger(kCoreLog)->info("tenants' pod identities from the kubelet's pod-resources API on {}",
                              socket);
  }
  return options;
}

// [compute] mps = "start": makes sure an MPS control daemon runs (mps.h). False after logging
// why when it cannot.
bool StartMps(const DaemonConfig& config, std::unique_ptr<MpsControl>* mps) {
  if (config.compute.mps != "start") return true;
  auto log = GetLogger(kCoreLog);
  MpsOptions mps_options;
  mps_options.control = config.compute.mps_control;
  mps_options.pipe_directory = config.compute.mps_pipe_directory;
  mps_options.log_directory = config.compute.mps_log_directory;
  absl::StatusOr<std::unique_ptr<MpsControl>> started = MpsControl::Start(mps_options);
  if (!started.ok()) {
    log->error("compute.mps = \"start\": {}", std::string(started.status().message()));
    return false;
  }
  *mps = *std::move(started);
  log->info("MPS control daemon in {}: {}", mps_options.pipe_directory,
            (*mps)->started_here() ? "started (it stops with missiled)"
                                   : "already running, used as it is");
  return true;
}

// Whether tenants run on MPS, for Status, with a warning when they do: MPS clients share fate.
void DescribeMps(const DaemonConfig& config, const MpsControl* mps, CoreOptions* options) {
  options->mps_pipe_directory = config.compute.mps_pipe_directory;
  options->mps_managed_by_missiled = mps != nullptr;
  options->tenants_on_mps =
      mps != nullptr || MpsControlRunning(config.compute.mps_pipe_directory);
  if (options->tenants_on_mps) {
    GetLogger(kCoreLog)->warn(
        "tenants run on MPS (control daemon in {}); MPS clients share fate: a fault in one can "
        "end every other client's work on that GPU (docs/pacing.md, \"MPS clients share fate\")",
        config.compute.mps_pipe_directory);
  }
}

int RunServer(DaemonConfig config, std::optional<unsigned> socket_gid,
              std::optional<unsigned> admin_gid, const sigset_t& signals, const Reread& reread) {
  auto log = GetLogger(kCoreLog);
  // Before anything else starts (MPS included): without a driver there is nothing to serve.
  if (absl::Status s = LoadCudaDriver(); !s.ok()) {
    log->error("{}", std::string(s.message()));
    return 1;
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(config.daemon.socket).parent_path(), ec);
  // Before anything is touched (MPS, GPUs, sockets): a second missiled on this socket stops here.
  absl::StatusOr<InstanceLock> lock = InstanceLock::Acquire(InstanceLockPath(config.daemon.socket));
  if (!lock.ok()) {
    log->error("{}", std::string(lock.status().message()));
    return 1;
  }
  // MPS first: missiled and the tenants started after it must all be its clients.
  std::unique_ptr<MpsControl> mps;
  if (!StartMps(config, &mps)) return 1;
  auto gpus = OpenGpus(config);
  if (!gpus.ok()) {
    log->error("{}", std::string(gpus.status().message()));
    return 1;
  }
  CoreOptions options = CoreOptionsOf(config, admin_gid);
  DescribeMps(config, mps.get(), &options);
  CheckDescriptorLimit(config.limits, *gpus);
  DaemonCore core(options, *std::move(gpus));
  if (absl::Status s = core.Start(); !s.ok()) {
    log->error("process watcher: {}", std::string(s.message()));
    return 1;
  }
  SideChannelServer side(&core, static_cast<size_t>(config.limits.max_side_connections_per_uid));
  if (absl::Status s = side.Start(options.fd_socket_path, config.daemon.socket_mode, socket_gid);
      !s.ok()) {
    log->error("side channel: {}", std::string(s.message()));
    return 1;
  }
  RpcServer server(&core, RpcOptionsOf(config.limits));
  if (absl::Status s = server.Start(config.daemon.socket, config.daemon.socket_mode, socket_gid);
      !s.ok()) {
    log->error("socket: {}", std::string(s.message()));
    return 1;
  }
  log->info("serving on {} (descriptors on {})", config.daemon.socket, options.fd_socket_path);
  std::unique_ptr<metrics::HttpServer> metrics_server;  // [metrics], when enabled
  if (!StartMetrics(config, core, &metrics_server)) return 1;
  SdNotify("READY=1\nSTATUS=serving on " + config.daemon.socket);

  std::unique_ptr<Watchdog> watchdog = StartWatchdog(core);
  int sig = 0;
  for (;;) {
    sigwait(&signals, &sig);
    if (sig != SIGHUP) break;
    Reload(reread, &config, &core);
  }
  log->info("received {}: shutting down", strsignal(sig));
  SdNotify("STOPPING=1");
  if (watchdog) watchdog->Stop();
  if (metrics_server) metrics_server->Stop();
  core.BeginShutdown();
  server.Shutdown();
  side.Shutdown();
  core.Stop();
  log->info("stopped");
  return 0;
}

int Run(int argc, char** argv) {
  // Debian's abseil is built without NDEBUG: every Mutex acquisition would update a global
  // lock-order graph (and abort missiled on a cycle). The tests keep that check.
  absl::SetMutexDeadlockDetectionMode(absl::OnDeadlockCycle::kIgnore);
  const sigset_t signals = BlockTerminationSignals();
  RaiseDescriptorLimit();
  auto flags = ParseFlags(argc, argv);
  if (!flags.ok()) {
    fprintf(stderr, "missiled: %s\n", std::string(flags.status().message()).c_str());
    Usage(stderr);
    return 2;
  }
  auto config = LoadConfig(flags->config, flags->config_given);
  if (!config.ok()) {
    fprintf(stderr, "missiled: %s\n", std::string(config.status().message()).c_str());
    return 2;
  }
  if (!flags->socket.empty()) config->daemon.socket = flags->socket;
  if (!flags->log_level.empty()) config->daemon.log_level = flags->log_level;
  auto level = ParseLogLevel(config->daemon.log_level);
  if (!level.ok()) {
    fprintf(stderr, "missiled: --log-level: %s\n", std::string(level.status().message()).c_str());
    return 2;
  }
  SetLogLevel(*level);  // every component's logger, made so far or later
  // Before --check-config answers: a group that does not exist stops the daemon at start.
  auto socket_gid = GroupId("daemon.socket_group", config->daemon.socket_group);
  auto admin_gid = GroupId("daemon.admin_group", config->daemon.admin_group);
  if (!socket_gid.ok() || !admin_gid.ok()) {
    fprintf(stderr, "missiled: %s\n",
            std::string((!socket_gid.ok() ? socket_gid : admin_gid).status().message()).c_str());
    return 2;
  }
  if (flags->check_only) {
    printf("%s\n", DescribeConfig(*config).c_str());
    return 0;
  }
  // A few lines, each its own log record (journald reads one priority per line).
  GetLogger(kCoreLog)->info("missiled {} starting", missile::kVersion);
  const bool file_read = flags->config_given || access(flags->config.c_str(), F_OK) == 0;
  for (const std::string& line :
       StartupSummary(*config, file_read ? flags->config : "",
                      config->daemon.StateFilePath(getenv("STATE_DIRECTORY")))) {
    GetLogger(kCoreLog)->info("{}", line);
  }
  const Flags given = *flags;
  Reread reread = [given]() -> absl::StatusOr<DaemonConfig> {
    absl::StatusOr<DaemonConfig> c = LoadConfig(given.config, given.config_given);
    if (!c.ok()) return c.status();
    if (!given.socket.empty()) c->daemon.socket = given.socket;
    if (!given.log_level.empty()) c->daemon.log_level = given.log_level;
    return c;
  };
  return RunServer(*std::move(config), *socket_gid, *admin_gid, signals, reread);
}

}  // namespace
}  // namespace missile::daemon

int main(int argc, char** argv) { return missile::daemon::Run(argc, argv); }
