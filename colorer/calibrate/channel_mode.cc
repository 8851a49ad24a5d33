#include "channel_mode.h"

#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <ctime>
#include <filesystem>
#include <fstream>
#include <memory>
#include <string>
#include <system_error>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "channel_gpu.h"
#include "channel_report.h"
#include "channel_scan.h"
#include "gpu.h"
#include "kernels_ptx.h"
#include "missile/colorer/channel_map_file.h"
#include "missile/common/status_macros.h"
#include "missile/version.h"
#include "report.h"

namespace missile::calibrate {
namespace {

absl::Status PrepareOutDir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::PermissionDeniedError(absl::StrCat("creating ", dir, ": ", ec.message()));
  if (::access(dir.c_str(), W_OK) != 0) {
    return absl::PermissionDeniedError(absl::StrCat(dir, " is not writable (use --out DIR)"));
  }
  return absl::OkStatus();
}

absl::Status WriteText(const std::string& path, const std::string& text) {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    out << text;
    out.flush();
    if (!out) return absl::DataLossError(absl::StrCat("writing ", tmp));
  }
  std::error_code ec;
  std::filesystem::rename(tmp, path, ec);
  if (ec) return absl::DataLossError(absl::StrCat("renaming ", tmp, ": ", ec.message()));
  return absl::OkStatus();
}

}  // namespace

absl::Status RunChannelMap(const CalibrateArgs& args, spdlog::logger& log) {
  const auto begin = std::chrono::steady_clock::now();
  MISSILE_RETURN_IF_ERROR(PrepareOutDir(args.out_dir));
  const Plan plan = MakePlan(args);
  MISSILE_ASSIGN_OR_RETURN(std::unique_ptr<Gpu> gpu, Gpu::Open(args.device, plan.wait_timeout_s));
  const DeviceInfo& info = (gpu)->info();
  log.info("GPU {}: {} {}, {} SMs, {} MiB L2, granularity {} KiB, driver {}", info.ordinal,
           info.identity.name, info.identity.uuid, info.sm_count, info.l2_bytes >> 20,
           info.identity.granularity_bytes >> 10, info.identity.driver_version);
  MISSILE_RETURN_IF_ERROR((gpu)->LoadKernels(kKernelsPtx));
  MISSILE_RETURN_IF_ERROR((gpu)->AllocateChunks(plan.chunks));
  absl::StatusOr<std::unique_ptr<ChannelGpu>> probe = ChannelGpu::Create(
      info.sm_count, info.identity.granularity_bytes, plan.wait_timeout_s, kChannelKernelsPtx);
  if (!probe.ok()) return probe.status();
  log.info("channel probe: {} blocks of {} threads per SM; {} chunks allocated, scanning one",
           (*probe)->blocks_per_sm(), kSubsetBlockThreads, plan.chunks);

  const ChannelPlan channel_plan = MakeChannelPlan(args.quick, args.seed);
  // The middle chunk of the allocation: nothing about its place is special, and it is not the
  // first block the driver hands out.
  const uint64_t chunk = (gpu)->chunk_address(plan.chunks / 2);
  absl::StatusOr<ChannelScanResult> result = RunChannelScan(
      **probe, chunk, channel_plan, [&](const std::string& line) { log.info("{}", line); });
  if (!result.ok()) return result.status();
  // The L2 slice signature: one line per granule, timed by one thread (about 50 ms).
  {
    const uint64_t granule = uint64_t{1} << channel_plan.granule_shift;
    std::vector<uint64_t> probes;
    for (uint64_t off = 0; off < info.identity.granularity_bytes; off += granule) {
      probes.push_back(chunk + off);
    }
    constexpr uint32_t kIters = 16;
    MISSILE_ASSIGN_OR_RETURN(std::vector<uint64_t> cycles, (gpu)->ChaseCycles(probes, kIters));
    std::vector<double> per_load;
    for (uint64_t c : cycles) per_load.push_back(static_cast<double>(c) / kIters);
    absl::StatusOr<LatencySignature> latency =
        LatencySignatureOf(std::move(per_load), channel_plan.granule_shift);
    if (!latency.ok()) return latency.status();
    result->latency = *std::move(latency);
    log.info("latency signature: {:.0f}-{:.0f} cycles, far = parity of 0x{:x} for {:.4f}",
             result->latency.min, result->latency.max, result->latency.mask,
             result->latency.agreement);
  }
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - begin;

  MISSILE_ASSIGN_OR_RETURN(
      colorer::ChannelMapFile file,
      BuildChannelMapFile(info.identity, *result, channel_plan, IsoDateUtc(std::time(nullptr)),
                          absl::StrCat(kToolName, " ", missile::kVersion), took.count()));
  const std::string base = absl::StrCat(args.out_dir, "/", info.identity.uuid, ".channels");
  const std::string path = colorer::ChannelMapPath(args.out_dir, info.identity.uuid);
  MISSILE_RETURN_IF_ERROR(colorer::SaveChannelMapFile(file, path));
  MISSILE_ASSIGN_OR_RETURN(colorer::ChannelMapFile reloaded, colorer::LoadChannelMapFile(path));
  const std::string report = ChannelReport(file, *result);
  for (const auto& [suffix, text] :
       {std::pair<std::string, std::string>{".txt", report},
        {".pairs.csv", PairsCsv(*result)},
        {".scan.csv", ScanCsv(*result)},
        {".latency.csv", LatencyCsv(*result, channel_plan.granule_shift)}}) {
    MISSILE_RETURN_IF_ERROR(WriteText(base + suffix, text));
  }
  std::fprintf(stdout, "%s", report.c_str());
  std::fprintf(stdout, "channel map: %s\n", path.c_str());
  std::fflush(stdout);
  return absl::OkStatus();
}

}  // namespace missile::calibrate
