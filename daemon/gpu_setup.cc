#include "gpu_setup.h"

#include <algorithm>
#include <memory>
#include <utility>

#include "missile/common/compute_settings.h"
#include "missile/colorer/channel_map.h"

namespace missile::daemon {

std::string ProfilePath(const GpuSection& gpu, const std::string& uuid) {
  return gpu.profile_dir + "/" + uuid + ".toml";
}

std::string ChannelMapPathFor(const GpuSection& gpu, const std::string& uuid) {
  return colorer::ChannelMapPath(gpu.profile_dir, uuid);
}

std::string AddChannelMapReason(std::string note,
                                const absl::StatusOr<colorer::ChannelMapFile>& map,
                                uint64_t granularity_bytes) {
  if (!map.ok()) {
    if (absl::IsNotFound(map.status())) return note;
    return note + "; channel map not used: " + std::string(map.status().message());
  }
  auto reason = colorer::ExplainColours(*map, granularity_bytes);
  if (!reason.ok()) {
    return note + "; channel map not used: " + std::string(reason.status().message());
  }
  return note + "; " + *reason;
}

absl::StatusOr<ColourChoice> ChooseColourScheme(const colorer::GpuColourProfile& profile,
                                                const std::string& profile_path,
                                                bool phys_visible) {
  ColourChoice choice;
  if (profile.is_default) {
    choice.note = "no colour profile for this GPU (" + profile_path +
                  "): assuming one colour, no channel isolation";
  } else if (profile.colours <= 1) {
    choice.note = "one colour: calibration found no channel isolation at " +
                  std::to_string(profile.granularity_bytes >> 20) + " MiB on this GPU";
  } else if (!phys_visible) {
    choice.note = "profile reports " + std::to_string(profile.colours) +
                  " colours, but block physical addresses are not visible to user space on "
                  "this driver: placing with one colour";
  } else {
    auto scheme = colorer::SchemeFromProfile(profile);
    if (!scheme.ok()) return scheme.status();
    choice.scheme = std::move(*scheme);
    choice.note = std::to_string(profile.colours) +
                  " colours from the profile; block physical addresses from the driver test double";
  }
  return choice;
}

absl::StatusOr<colorer::ColourScheme> OneColourScheme() {
  auto map = colorer::UniformChannelMap::Create(1);
  if (!map.ok()) return map.status();
  return colorer::ColourScheme::EvenSplit(std::shared_ptr<const colorer::ChannelMap>(std::move(*map)),
                                         1);
}

colorer::ColourPolicyOptions ColourPolicyOptionsFor(int colour_count, const GpuSection& gpu) {
  colorer::ColourPolicyOptions options;
  if (colour_count > 1 && gpu.ls_colours > 0) {
    options.ls_colours = gpu.ls_colours;
  } else if (colour_count > 1) {
    options.ls_fraction = 0.5;
  }
  return options;
}

uint64_t PreallocBytesFor(const GpuSection& gpu, const DeviceInfo& device) {
  return gpu.PreallocBytes(device.total_bytes) / device.granularity * device.granularity;
}

PoolOptions PoolOptionsFor(const GpuSection& gpu, const DeviceInfo& device) {
  PoolOptions options;
  options.granularity = device.granularity;
  options.capacity_bytes =
      gpu.PoolLimitBytes(device.total_bytes) / device.granularity * device.granularity;
  options.cache_limit_bytes = std::max<uint64_t>(gpu.cache_limit, PreallocBytesFor(gpu, device));
  options.scrub_on_release = gpu.scrub_on_release;
  return options;
}

std::array<QuotaPolicy, 2> ClassQuotasFor(const ClassesSection& classes, uint64_t capacity_bytes) {
  ClassQuotaBytes ls = classes.ls.ResolveQuotas(capacity_bytes);
  ClassQuotaBytes be = classes.be.ResolveQuotas(capacity_bytes);
  std::array<QuotaPolicy, 2> out;
  out[ClassIndex(colorer::TenantClass::kLatencySensitive)] = {ls.tenant_quota_bytes,
                                                             ls.class_quota_bytes};
  out[ClassIndex(colorer::TenantClass::kBestEffort)] = {be.tenant_quota_bytes, be.class_quota_bytes};
  return out;
}

CopyArbiter::Options ArbiterOptionsFor(const PcieSection& pcie) {
  CopyArbiter::Options copies;
#define MISSILE_PCIE_SETTING(key, field, type, unit, min, max, multiple, zero, def, live, help) \
  copies.field = settings::ToField<decltype(copies.field)>(pcie.key, settings::Unit::unit);
#include "missile/common/pcie_settings.inc"
#undef MISSILE_PCIE_SETTING
  // Never smaller than the LS chunk: with a large pcie.chunk and the default be_chunk, BE copies
  // would otherwise be cut finer while alone than while an LS tenant copies.
  if (pcie.be_chunk != 0) copies.scheduler.be_chunk_bytes = std::max(pcie.be_chunk, pcie.chunk);
  // Nor is the rest chunk smaller than the BE chunk.
  if (pcie.be_rest_chunk != 0) {
    copies.scheduler.be_rest_chunk_bytes = std::max(
        pcie.be_rest_chunk, copies.scheduler.ChunkFor(pcie::TenantClass::kBestEffort));
  }
  return copies;
}

PacingSettings PacingSettingsOf(const ComputeSection& c) {
  PacingSettings s;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  s.field = settings::ToField<type>(c.key, settings::Unit::unit);
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  return s;
}

}  // namespace missile::daemon
