// missile-device-plugin: the Kubernetes device plugin of Missile. See plugin_config.h for the
// command line and plugin.h for what it does. Runs until SIGTERM or SIGINT.
// Exit status: 0 stopped by a signal (or --help, --version), 1 could not start, 2 bad usage.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "gpu_source.h"
#include "grpc/support/log.h"
#include "missile/version.h"
#include "plugin.h"
#include "plugin_config.h"

namespace {

// Status calls to missiled have this long; a slower daemon counts as not answering.
constexpr std::chrono::seconds kStatusTimeout{2};

void Fail(const std::string& reason) {
  std::fprintf(stderr, "missile-device-plugin: %s\n", reason.c_str());
}

void QuietGrpcLog(gpr_log_func_args*) {}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function(QuietGrpcLog);
  absl::StatusOr<missile::deviceplugin::PluginArgs> args =
      missile::deviceplugin::ParsePluginArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!args.ok()) {
    Fail(std::string(args.status().message()));
    return 2;
  }
  if (args->help) {
    std::fputs(missile::deviceplugin::kPluginUsage, stdout);
    return 0;
  }
  if (args->version) {
    std::printf("missile-device-plugin %s\n", missile::kVersion);
    return 0;
  }
  // Block the stop signals before any thread starts, then wait for one on this thread.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  const missile::deviceplugin::PluginConfig& config = args->config;
  missile::deviceplugin::DevicePlugin plugin(
      config, missile::deviceplugin::MakeMissiledGpuSource(config.missiled_socket, kStatusTimeout));
  if (absl::Status s = plugin.Start(); !s.ok()) {
    Fail(std::string(s.message()));
    return 1;
  }
  int sig = 0;
  sigwait(&stop, &sig);
  plugin.Stop();
  return 0;
}
