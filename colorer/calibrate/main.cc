// missile-calibrate: measures what VRAM channel colouring can achieve on one GPU and writes the
// profile missiled loads (<out>/<GPU uuid>.toml). See measure.h for the measurements and
// verdict.h for the rule that turns them into a colour count. --channel-map recovers the
// channel hash inside a chunk instead (channel_mode.h).
//
// Exit status: 0 profile written; 1 no GPU, driver error, measurement or write failure (one line
// on stderr); 2 bad command line.

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "args.h"
#include "channel_mode.h"
#include "gpu.h"
#include "kernels_ptx.h"
#include "measure.h"
#include "missile/colorer/profile.h"
#include "missile/common/status_macros.h"
#include "missile/version.h"
#include "report.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace missile::calibrate {
namespace {

// The profile directory must be writable before minutes of measuring, not after.
absl::Status PrepareOutDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("creating ", dir, ": ", ec.message()));
  if (::access(dir.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(dir, " is not writable (use --out DIR)"));
  }
  return absl::OkStatus();
}

absl::Status Calibrate(const CalibrateArgs& args, spdlog::logger& log) {
  const auto begin = std::chrono::steady_clock::now();
  MISSILE_RETURN_IF_ERROR(PrepareOutDir(args.out_dir));
  const Plan plan = MakePlan(args);
  absl::StatusOr<std::unique_ptr<Gpu>> gpu = Gpu::Open(args.device, plan.wait_timeout_s);
  if (!gpu.ok()) return gpu.status();
  const DeviceInfo& info = (*gpu)->info();
  log.info(
      "GPU {}: {} {}, {} SMs, compute {}.{}, {} MiB L2, {} GiB, granularity {} KiB, "
      "driver {}",
      info.ordinal, info.identity.name, info.identity.uuid, info.sm_count, info.cc_major,
      info.cc_minor, info.l2_bytes >> 20, info.total_bytes >> 30,
      info.identity.granularity_bytes >> 10, info.identity.driver_version);
  MISSILE_RETURN_IF_ERROR((*gpu)->LoadKernels(kKernelsPtx));
  MISSILE_RETURN_IF_ERROR((*gpu)->AllocateChunks(plan.chunks));
  log.info("allocated {} chunks of {} KiB ({:.1f} us per chunk: create, reserve, map, access)",
           plan.chunks, info.identity.granularity_bytes >> 10, (*gpu)->allocate_us_per_chunk());

  Evidence evidence;
  evidence.Add("allocate_per_chunk", (*gpu)->allocate_us_per_chunk(), "us");
  absl::StatusOr<Verdict> verdict =
      RunCalibration(**gpu, plan, evidence, [&](const std::string& line) { log.info("{}", line); });
  if (!verdict.ok()) return verdict.status();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - begin;
  evidence.Add("calibration_time", took.count(), "s");

  MISSILE_ASSIGN_OR_RETURN(
      colorer::GpuColourProfile profile,
      BuildProfile(info.identity, *verdict, evidence, IsoDateUtc(std::time(nullptr)),
                   absl::StrCat(kToolName, " ", missile::kVersion)));
  const std::string path = ProfilePath(args.out_dir, info.identity.uuid);
  MISSILE_RETURN_IF_ERROR(colorer::SaveProfile(profile, path));
  MISSILE_ASSIGN_OR_RETURN(colorer::GpuColourProfile reloaded, colorer::LoadProfile(path));
  if (!(reloaded == profile)) {
    return absl::DataLossError(absl::StrCat(path, " does not read back as written"));
  }

  const std::string table = FormatTable(profile, *verdict);
  std::FILE* human = args.json ? stderr : stdout;
  std::fprintf(human, "%s", table.c_str());
  std::fprintf(human, "profile: %s\n", path.c_str());
  if (args.json) std::printf("%s\n", SummaryJson(profile, *verdict, path).c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace
}  // namespace missile::calibrate

int main(int argc, char** argv) {
  using missile::calibrate::CalibrateArgs;
  absl::StatusOr<CalibrateArgs> args =
      missile::calibrate::ParseArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!args.ok()) {
    std::fprintf(stderr, "missile-calibrate: %s\n", std::string(args.status().message()).c_str());
    return 2;
  }
  if (args->help) {
    std::printf("%s", missile::calibrate::Usage().c_str());
    return 0;
  }
  if (args->version) {
    std::printf("missile-calibrate %s\n", missile::kVersion);
    return 0;
  }
  auto log = std::make_shared<spdlog::logger>("calibrate",
                                              std::make_shared<spdlog::sinks::stderr_sink_mt>());
  log->set_pattern("[%H:%M:%S.%e] [%n] %v");
  spdlog::register_logger(log);
  const absl::Status s = args->channel_map ? missile::calibrate::RunChannelMap(*args, *log)
                                           : missile::calibrate::Calibrate(*args, *log);
  if (!s.ok()) {
    std::fprintf(stderr, "missile-calibrate: %s\n", std::string(s.message()).c_str());
    return 1;
  }
  return 0;
}
