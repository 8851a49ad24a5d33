// tpc_probe: the LS reserve's TPC masks on the GPU at hand (libintercept/tpc_mask.h), outside
// any tenant: probes the live mask bits, checks that a reserve mask keeps every BE block off the
// reserved SMs, and times what the mask adds to a kernel launch.
//   tpc_probe [DEVICE]
// Prints the TPC map, one line per reserve size ("reserve R: N SMs used, 0 reserved SMs hit"),
// and "launch: X ns unmasked, Y ns masked (median of 5 x 20000 launches)". Exit 1 on any error or
// a reserve that lets a BE block onto a reserved SM; 77 (skipped, as ctest's gpu_tpc_mask reads
// it) where there is no GPU or the masks do not work as verified on this GPU and driver.
#include <cuda.h>
#include <dlfcn.h>
#include <time.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <string>
#include <vector>

#include "driver_api.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"
#include "tpc_mask.h"

namespace {

uint64_t NowNs() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

int Fail(const char* what, const std::string& why) {
  printf("error %s: %s\n", what, why.c_str());
  return 1;
}

// Median host time of one launch of a 1-block probe, over 5 rounds of 20000.
double LaunchNs(missile::shim::SmProbe& probe, const missile::pacing::TpcMask* mask,
                const missile::shim::DriverApi& api) {
  std::vector<double> rounds;
  missile::shim::TpcMasker::Scope scope(mask);
  for (int round = 0; round < 5; ++round) {
    uint64_t spent = 0;
    for (int batch = 0; batch < 20; ++batch) {
      const uint64_t t0 = NowNs();
      for (int i = 0; i < 1000; ++i) probe.Launch(1, 0);
      spent += NowNs() - t0;
      api.StreamSynchronize(probe.stream());
    }
    rounds.push_back(static_cast<double>(spent) / 20000.0);
  }
  std::sort(rounds.begin(), rounds.end());
  return rounds[2];
}

// Where the probe's answer was refused: what single launches saw, unmasked and with bits 0-3
// disabled alone, as SMs missing from 0..N-1.
void Diagnose(const missile::shim::DriverApi& api, CUdevice dev) {
  absl::StatusOr<std::unique_ptr<missile::shim::SmProbe>> probe =
      missile::shim::SmProbe::Open(api, dev);
  if (!probe.ok()) return;
  int sm_count = 0;
  cuDeviceGetAttribute(&sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev);
  auto show = [&](const char* what, const missile::pacing::TpcMask* mask) {
    missile::shim::TpcMasker::Scope scope(mask);
    absl::StatusOr<std::vector<uint32_t>> sms = (*probe)->Run();
    if (!sms.ok()) return;
    const std::set<uint32_t> used(sms->begin(), sms->end());
    std::string missing;
    for (int sm = 0; sm < sm_count; ++sm) {
      if (!used.contains(sm)) missing += " " + std::to_string(sm);
    }
    printf("diagnose %s: %zu SMs used, missing:%s\n", what, used.size(), missing.c_str());
  };
  show("unmasked", nullptr);
  show("unmasked again", nullptr);
  for (uint32_t bit = 0; bit < 4; ++bit) {
    const missile::pacing::TpcMask mask = missile::pacing::DisableMask({bit});
    show(("bit " + std::to_string(bit)).c_str(), &mask);
  }
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  const int ordinal = argc > 1 ? atoi(argv[1]) : 0;
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, ordinal) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    printf("skipped: no GPU\n");
    return 77;
  }
  int mps = 0;
  cuDeviceGetAttribute(&mps, CU_DEVICE_ATTRIBUTE_MPS_ENABLED, dev);
  printf("device %d, MPS client: %s\n", ordinal, mps ? "yes" : "no");
  missile::shim::DriverApi api;
  api.Resolve(dlopen("libcuda.so.1", RTLD_NOW | RTLD_NOLOAD));
  auto log = spdlog::stdout_logger_mt("tpc_probe");
  missile::shim::TpcMasker masker(api, log.get());
  const uint64_t t0 = NowNs();
  absl::StatusOr<const missile::pacing::TpcMap*> map = masker.MapFor(dev);
  if (!map.ok()) {
    Diagnose(api, dev);
    printf("skipped: TPC masks unavailable here: %s\n", std::string(map.status().message()).c_str());
    return 77;
  }
  printf("probe: %.1f ms, %s\n", static_cast<double>(NowNs() - t0) / 1e6,
         missile::pacing::DescribeTpcMap(**map).c_str());
  absl::StatusOr<std::unique_ptr<missile::shim::SmProbe>> probe =
      missile::shim::SmProbe::Open(api, dev);
  if (!probe.ok()) return Fail("open", std::string(probe.status().message()));
  int status = 0;
  for (uint32_t reserve : {0u, 8u, 11u, 16u, 26u, 33u}) {
    const missile::pacing::TpcMask mask = missile::pacing::ReserveMask(**map, reserve);
    absl::StatusOr<std::vector<uint32_t>> sms;
    {
      missile::shim::TpcMasker::Scope scope(&mask);
      sms = (*probe)->Run();
    }
    if (!sms.ok()) return Fail("run", std::string(sms.status().message()));
    const std::set<uint32_t> used(sms->begin(), sms->end());
    int hit = 0;
    for (uint32_t sm : missile::pacing::ReservedSms(**map, reserve)) hit += used.contains(sm);
    printf("reserve %u: %zu SMs used, %d reserved SMs hit\n", reserve, used.size(), hit);
    if (hit != 0 || used.size() + 2 * missile::pacing::ReservedTpcs(**map, reserve) !=
                        (*map)->sm_count) {
      status = 1;
    }
  }
  const missile::pacing::TpcMask mask = missile::pacing::ReserveMask(**map, 8);
  const double plain = LaunchNs(**probe, nullptr, api);
  const double masked = LaunchNs(**probe, &mask, api);
  printf("launch: %.0f ns unmasked, %.0f ns masked (median of 5 x 20000 launches); "
         "%llu launches masked, %llu refused\n",
         plain, masked, static_cast<unsigned long long>(masker.applied()),
         static_cast<unsigned long long>(masker.refused()));
  return status;
}
