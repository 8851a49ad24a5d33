// missiled: the Missile node daemon. Owns the GPU memory tenants use, within quotas, and serves
// the missile.v1 Tenant and Admin services on a Unix socket. Runs under systemd (Type=notify) or
// in the foreground.
//
//   missiled [--config PATH] [--socket PATH] [--log-level LEVEL] [--check-config]
#include <dlfcn.h>
#include <grp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <filesystem>
#include <string>
#include <thread>
#include <vector>

#include "config.h"
#include "core.h"
#include "cuda_device.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_policy.h"
#include "missile/colorer/profile.h"
#include "rpc_server.h"
#include "sd_notify.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

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
          "  --config PATH     configuration file (default %s; missing default = built-in defaults)\n"
          "  --socket PATH     override daemon.socket\n"
          "  --log-level L     override daemon.log_level (trace|debug|info|warn|error|off)\n"
          "  --check-config    validate the configuration, print the effective values, exit\n",
          kDefaultConfigPath);
}

absl::StatusOr<Flags> ParseFlags(int argc, char** argv) {
  Flags f;
  for (int i = 1; i < argc; ++i) {
    std::string a = argv[i];
    auto value = [&](const char* name) -> absl::StatusOr<std::string> {
      if (i + 1 >= argc) return absl::InvalidArgumentError(std::string(name) + " needs a value");
      return std::string(argv[++i]);
    };
    if (a == "--config") {
      auto v = value("--config");
      if (!v.ok()) return v.status();
      f.config = *v;
      f.config_given = true;
    } else if (a == "--socket") {
      auto v = value("--socket");
      if (!v.ok()) return v.status();
      f.socket = *v;
    } else if (a == "--log-level") {
      auto v = value("--log-level");
      if (!v.ok()) return v.status();
      f.log_level = *v;
    } else if (a == "--check-config") {
      f.check_only = true;
    } else if (a == "--help" || a == "-h") {
      Usage(stdout);
      exit(0);
    } else {
      return absl::InvalidArgumentError("unknown argument '" + a + "'");
    }
  }
  return f;
}

absl::StatusOr<std::optional<unsigned>> GroupId(const std::string& key, const std::string& name) {
  if (name.empty()) return std::optional<unsigned>();
  group gr{}, *result = nullptr;
  std::vector<char> buf(16384);
  if (getgrnam_r(name.c_str(), &gr, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return absl::InvalidArgumentError(key + ": no group named '" + name + "'");
  }
  return std::optional<unsigned>(gr.gr_gid);
}

// The pacing policy that [compute] describes.
PacingSettings PacingSettingsOf(const ComputeSection& c) {
  PacingSettings s;
  s.pacing = c.pacing;
  s.window_items = static_cast<uint32_t>(c.window_items);
  s.window_ns = static_cast<uint64_t>(c.window_us) * 1000;
  s.ls_idle_ns = static_cast<uint64_t>(c.ls_idle_us) * 1000;
  s.ls_stale_ns = static_cast<uint64_t>(c.ls_stale_ms) * 1000000;
  s.max_hold_ns = static_cast<uint64_t>(c.max_hold_ms) * 1000000;
  s.unknown_ns = static_cast<uint64_t>(c.unknown_us) * 1000;
  s.share_slack_ns = static_cast<uint64_t>(c.share_slack_us) * 1000;
  s.refill_ns = static_cast<uint64_t>(c.refill_us) * 1000;
  return s;
}

// The pool for one GPU, coloured by the GPU's calibration profile when there is one.
absl::StatusOr<Gpu> OpenGpu(int ordinal, const DaemonConfig& config, spdlog::logger& log) {
  auto device = CudaDevice::Open(ordinal);
  if (!device.ok()) return device.status();
  const DeviceInfo& info = (*device)->info();
  Gpu gpu;
  colour::GpuColourProfile profile = colour::DefaultProfile();
  std::string path = config.gpu.profile_dir + "/" + info.uuid + ".toml";
  if (std::filesystem::exists(path)) {
    auto loaded = colour::LoadProfile(path);
    if (!loaded.ok()) {
      return absl::InvalidArgumentError("colour profile " + path + ": " +
                                        std::string(loaded.status().message()));
    }
    profile = *loaded;
  }
  // Placing by colour needs each block's physical address, which a stock driver does not give
  // user space. The driver test double does (fakecudaChunkPhysAddr), so the colour machinery
  // runs end to end in tests; on a real GPU the daemon places with one colour.
  using PhysFn = int (*)(unsigned long long handle, unsigned long long* phys);
  auto phys_fn = reinterpret_cast<PhysFn>(dlsym(RTLD_DEFAULT, "fakecudaChunkPhysAddr"));
  std::optional<colour::ColourScheme> scheme;
  if (profile.is_default) {
    gpu.colour_note = "no colour profile for this GPU (" + path +
                      "): assuming one colour, no channel isolation";
  } else if (profile.colours <= 1) {
    gpu.colour_note = "one colour: calibration found no channel isolation at " +
                      std::to_string(profile.granularity_bytes >> 20) + " MiB on this GPU";
  } else if (phys_fn == nullptr) {
    gpu.colour_note = "profile reports " + std::to_string(profile.colours) +
                      " colours, but block physical addresses are not visible to user space on "
                      "this driver: placing with one colour";
  } else {
    auto s = colour::SchemeFromProfile(profile);
    if (!s.ok()) return s.status();
    scheme = std::move(*s);
    gpu.colour_note = std::to_string(profile.colours) +
                      " colours from the profile; block physical addresses from the driver test double";
  }
  if (!scheme.has_value()) {
    auto map = colour::UniformChannelMap::Create(1);
    if (!map.ok()) return map.status();
    auto s = colour::ColourScheme::EvenSplit(std::shared_ptr<const colour::ChannelMap>(std::move(*map)), 1);
    if (!s.ok()) return s.status();
    scheme = std::move(*s);
  } else {
    auto shared = std::make_shared<colour::ColourScheme>(*scheme);
    (*device)->set_colours([shared, phys_fn](uint64_t handle, uint64_t bytes) {
      unsigned long long phys = 0;
      if (phys_fn(handle, &phys) != 0) return colour::ColourSet();  // rejected by the pool
      return shared->ColoursOf(phys, bytes);
    });
  }
  colour::ColourPolicyOptions policy_options;
  if (scheme->colour_count() > 1 && config.gpu.ls_colours > 0) {
    policy_options.ls_colours = config.gpu.ls_colours;
  } else if (scheme->colour_count() > 1) {
    policy_options.ls_fraction = 0.5;
  }
  auto policy = colour::ColourPolicy::Create(*scheme, policy_options);
  if (!policy.ok()) return policy.status();
  gpu.colours = scheme->colour_count();

  PoolOptions options;
  options.granularity = info.granularity;
  options.capacity_bytes = config.gpu.PoolLimitBytes(info.total_bytes) / info.granularity * info.granularity;
  // Preallocated blocks are there to be kept warm: never trim the cache below them.
  options.cache_limit_bytes = std::max<uint64_t>(
      config.gpu.cache_limit,
      config.gpu.PreallocBytes(info.total_bytes) / info.granularity * info.granularity);
  options.scrub_on_release = config.gpu.scrub_on_release;
  ClassQuotaBytes ls = config.classes.ls.ResolveQuotas(options.capacity_bytes);
  ClassQuotaBytes be = config.classes.be.ResolveQuotas(options.capacity_bytes);
  gpu.quota[ClassIndex(TenantClass::kLatencySensitive)] = {ls.tenant_quota_bytes, ls.class_quota_bytes};
  gpu.quota[ClassIndex(TenantClass::kBestEffort)] = {be.tenant_quota_bytes, be.class_quota_bytes};
  auto pool = VramPool::Create(options, device->get(), *policy,
                               gpu.quota[ClassIndex(TenantClass::kLatencySensitive)],
                               gpu.quota[ClassIndex(TenantClass::kBestEffort)]);
  if (!pool.ok()) return pool.status();
  uint64_t prealloc = config.gpu.PreallocBytes(info.total_bytes) / info.granularity * info.granularity;
  if (prealloc > 0) {
    if (absl::Status s = (*pool)->Prealloc(prealloc); !s.ok()) return s;
  }
  log.info("GPU {}: {} {} ({} MiB, granularity {} KiB): pool limit {} MiB, prealloc {} MiB",
           ordinal, info.name, info.uuid, info.total_bytes >> 20, info.granularity >> 10,
           options.capacity_bytes >> 20, prealloc >> 20);
  log.info("GPU {}: {}", ordinal, gpu.colour_note);
  CopyArbiter::Options copies;
  pcie::FairScheduler::Config& sched = copies.scheduler;
  sched.chunk_bytes = config.pcie.chunk;
  // Never smaller than the LS chunk: with a large pcie.chunk and the default be_chunk, BE copies
  // would otherwise be cut finer while alone than while an LS tenant copies.
  sched.be_chunk_bytes =
      config.pcie.be_chunk == 0 ? 0 : std::max(config.pcie.be_chunk, config.pcie.chunk);
  sched.max_inflight_chunks_total = static_cast<uint32_t>(config.pcie.max_inflight_chunks);
  sched.max_inflight_chunks_per_tenant = static_cast<uint32_t>(config.pcie.max_inflight_per_tenant);
  sched.min_bypass_bytes = config.pcie.bypass_below;
  sched.ls_first = config.pcie.ls_first;
  copies.spin_ns = static_cast<uint64_t>(config.pcie.spin_us) * 1000;
  copies.ls_spin_ns = static_cast<uint64_t>(config.pcie.ls_spin_us) * 1000;
  copies.ls_quiet_ns = static_cast<uint64_t>(config.pcie.ls_quiet_ms) * 1000000;
  auto arbiter = CopyArbiter::Create(copies);
  if (!arbiter.ok()) return arbiter.status();
  auto pacing = PacingDomain::Create(PacingSettingsOf(config.compute));
  if (!pacing.ok()) return pacing.status();
  gpu.pacing = std::move(*pacing);
  gpu.device = std::move(*device);
  gpu.pool = std::move(*pool);
  gpu.arbiter = std::move(*arbiter);
  return gpu;
}

int Run(int argc, char** argv) {
  // Block the termination signals before any thread exists; the main thread waits for them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  signal(SIGPIPE, SIG_IGN);

  // One descriptor per VRAM block: raise the soft limit to the hard one.
  rlimit files{};
  if (getrlimit(RLIMIT_NOFILE, &files) == 0 && files.rlim_cur < files.rlim_max) {
    files.rlim_cur = files.rlim_max;
    setrlimit(RLIMIT_NOFILE, &files);
  }

  auto log = std::make_shared<spdlog::logger>("missiled",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
  log->set_pattern("missiled %l: %v");
  spdlog::register_logger(log);

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
  spdlog::level::level_enum level = spdlog::level::from_str(config->daemon.log_level);
  if (level == spdlog::level::off && config->daemon.log_level != "off") {
    fprintf(stderr, "missiled: --log-level: '%s' is not one of trace, debug, info, warn, error, off\n",
            config->daemon.log_level.c_str());
    return 2;
  }
  log->set_level(level);
  if (flags->check_only) {
    printf("%s\n", DescribeConfig(*config).c_str());
    return 0;
  }
  log->info("missiled {} starting; configuration:\n{}", MISSILE_VERSION, DescribeConfig(*config));

  auto socket_gid = GroupId("daemon.socket_group", config->daemon.socket_group);
  auto admin_gid = GroupId("daemon.admin_group", config->daemon.admin_group);
  if (!socket_gid.ok() || !admin_gid.ok()) {
    fprintf(stderr, "missiled: %s\n",
            std::string((!socket_gid.ok() ? socket_gid : admin_gid).status().message()).c_str());
    return 2;
  }
  std::error_code ec;
  std::filesystem::create_directories(std::filesystem::path(config->daemon.socket).parent_path(), ec);

  auto count = CudaDeviceCount();
  if (!count.ok()) {
    log->error("cannot use the CUDA driver: {}", std::string(count.status().message()));
    return 1;
  }
  std::vector<int> ordinals;
  if (config->gpu.devices.has_value()) {
    ordinals = *config->gpu.devices;
  } else {
    for (int i = 0; i < *count; ++i) ordinals.push_back(i);
  }
  if (ordinals.empty()) {
    log->error("no GPU to manage");
    return 1;
  }
  std::vector<Gpu> gpus;
  for (int ordinal : ordinals) {
    auto gpu = OpenGpu(ordinal, *config, *log);
    if (!gpu.ok()) {
      log->error("GPU {}: {}", ordinal, std::string(gpu.status().message()));
      return 1;
    }
    gpus.push_back(std::move(*gpu));
  }

  CoreOptions options;
  options.fd_socket_path = config->daemon.FdSocketPath();
  options.admin_gid = *admin_gid;
  options.ls.priority = config->classes.ls.priority;
  options.be.priority = config->classes.be.priority;
  DaemonCore core(options, std::move(gpus));
  if (absl::Status s = core.Start(config->daemon.socket_mode, *socket_gid); !s.ok()) {
    log->error("side channel: {}", std::string(s.message()));
    return 1;
  }
  RpcServer server(&core);
  if (absl::Status s = server.Start(config->daemon.socket, config->daemon.socket_mode, *socket_gid);
      !s.ok()) {
    log->error("socket: {}", std::string(s.message()));
    return 1;
  }
  log->info("serving on {} (descriptors on {})", config->daemon.socket, options.fd_socket_path);
  SdNotify("READY=1\nSTATUS=serving on " + config->daemon.socket);

  std::atomic<bool> done{false};
  std::thread watchdog;
  if (auto interval = SdWatchdogInterval()) {
    watchdog = std::thread([&done, period = *interval / 2] {
      while (!done) {
        SdNotify("WATCHDOG=1");
        auto until = std::chrono::steady_clock::now() + period;
        while (!done && std::chrono::steady_clock::now() < until) {
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
      }
    });
  }
  int sig = 0;
  sigwait(&signals, &sig);
  log->info("received {}: shutting down", strsignal(sig));
  SdNotify("STOPPING=1");
  done = true;
  core.BeginShutdown();
  server.Shutdown();
  core.Stop();
  if (watchdog.joinable()) watchdog.join();
  log->info("stopped");
  return 0;
}

}  // namespace
}  // namespace missile::daemon

int main(int argc, char** argv) { return missile::daemon::Run(argc, argv); }
