#include "gpu_open.h"

#include <dlfcn.h>

#include <filesystem>
#include <memory>
#include <string>
#include <utility>

#include "cuda_device.h"
#include "gpu_setup.h"
#include "logger.h"

namespace missile::daemon {
namespace {

// The driver test double's hook for a block's physical address (fakecudaChunkPhysAddr), or null
// under a real driver, which gives user space no such thing. Placing by colour needs it, so the
// colour machinery runs end to end in tests; on a real GPU the daemon places with one colour.
using PhysFn = int (*)(unsigned long long handle, unsigned long long* phys);
PhysFn PhysicalAddressHook() {
  return reinterpret_cast<PhysFn>(dlsym(RTLD_DEFAULT, "fakecudaChunkPhysAddr"));
}

absl::StatusOr<colorer::GpuColourProfile> LoadProfileIfAny(const std::string& path) {
  if (!std::filesystem::exists(path)) return colorer::DefaultProfile();
  auto loaded = colorer::LoadProfile(path);
  if (!loaded.ok()) {
    return absl::InvalidArgumentError("colour profile " + path + ": " +
                                      std::string(loaded.status().message()));
  }
  return loaded;
}

// The pool for one GPU, coloured by the GPU's calibration profile when there is one.
absl::StatusOr<Gpu> OpenGpu(int ordinal, const DaemonConfig& config) {
  auto device = CudaDevice::Open(ordinal);
  if (!device.ok()) return device.status();
  Gpu gpu;
  gpu.info = (*device)->info();
  const DeviceInfo& info = gpu.info;
  const std::string path = ProfilePath(config.gpu, info.uuid);
  auto profile = LoadProfileIfAny(path);
  if (!profile.ok()) return profile.status();
  const PhysFn phys_fn = PhysicalAddressHook();
  auto choice = ChooseColourScheme(*profile, path, phys_fn != nullptr);
  if (!choice.ok()) return choice.status();
  gpu.colour_note = AddChannelMapReason(
      std::move(choice->note),
      colorer::LoadChannelMapFile(ChannelMapPathFor(config.gpu, info.uuid)), info.granularity);
  std::optional<colorer::ColourScheme> scheme = std::move(choice->scheme);
  if (!scheme.has_value()) {
    auto one = OneColourScheme();
    if (!one.ok()) return one.status();
    scheme = std::move(*one);
  } else {
    auto shared = std::make_shared<colorer::ColourScheme>(*scheme);
    (*device)->set_colours([shared, phys_fn](uint64_t handle, uint64_t bytes) {
      unsigned long long phys = 0;
      if (phys_fn(handle, &phys) != 0) return colorer::ColourSet();  // rejected by the pool
      return shared->ColoursOf(phys, bytes);
    });
  }
  auto policy = colorer::ColourPolicy::Create(
      *scheme, ColourPolicyOptionsFor(scheme->colour_count(), config.gpu));
  if (!policy.ok()) return policy.status();
  gpu.colours = scheme->colour_count();

  const PoolOptions options = PoolOptionsFor(config.gpu, info);
  const std::array<QuotaPolicy, 2> quotas = ClassQuotasFor(config.classes, options.capacity_bytes);
  gpu.quota[0] = quotas[0];
  gpu.quota[1] = quotas[1];
  auto pool = VramPool::Create(options, device->get(), *policy,
                               quotas[ClassIndex(colorer::TenantClass::kLatencySensitive)],
                               quotas[ClassIndex(colorer::TenantClass::kBestEffort)]);
  if (!pool.ok()) return pool.status();
  const uint64_t prealloc = PreallocBytesFor(config.gpu, info);
  if (prealloc > 0) {
    if (absl::Status s = (*pool)->Prealloc(prealloc); !s.ok()) return s;
  }
  auto log = GetLogger(kCoreLog);
  log->info("GPU {}: {} {} ({} MiB, granularity {} KiB): pool limit {} MiB, prealloc {} MiB",
            ordinal, info.name, info.uuid, info.total_bytes >> 20, info.granularity >> 10,
            options.capacity_bytes >> 20, prealloc >> 20);
  log->info("GPU {}: {}", ordinal, gpu.colour_note);
  auto pacing = PacingDomain::Create(PacingSettingsOf(config.compute));
  if (!pacing.ok()) return pacing.status();
  CopyArbiter::Options copies = ArbiterOptionsFor(config.pcie);
  copies.ls_resting = (*pacing)->ls_resting_signal();
  auto arbiter = CopyArbiter::Create(copies);
  if (!arbiter.ok()) return arbiter.status();
  gpu.pacing = std::move(*pacing);
  gpu.source = std::move(*device);
  gpu.pool = std::move(*pool);
  gpu.arbiter = std::move(*arbiter);
  return gpu;
}

}  // namespace

absl::StatusOr<std::vector<Gpu>> OpenGpus(const DaemonConfig& config) {
  auto count = CudaDeviceCount();
  if (!count.ok()) {
    return absl::Status(count.status().code(),
                        "cannot use the CUDA driver: " + std::string(count.status().message()));
  }
  std::vector<int> ordinals;
  if (config.gpu.devices.has_value()) {
    ordinals = *config.gpu.devices;
  } else {
    for (int i = 0; i < *count; ++i) ordinals.push_back(i);
  }
  if (ordinals.empty()) return absl::FailedPreconditionError("no GPU to manage");
  std::vector<Gpu> gpus;
  for (int ordinal : ordinals) {
    auto gpu = OpenGpu(ordinal, config);
    if (!gpu.ok()) {
      return absl::Status(gpu.status().code(), "GPU " + std::to_string(ordinal) + ": " +
                                                   std::string(gpu.status().message()));
    }
    gpus.push_back(std::move(*gpu));
  }
  return gpus;
}

}  // namespace missile::daemon
