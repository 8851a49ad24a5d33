// How missiled sets up one GPU, as pure functions of the configuration and what the device
// reports: the colour scheme, the pool's options and class quotas, the copy arbiter's options and
// the pacing policy. OpenGpu (gpu_open.h) applies them to a CUDA device; nothing here touches
// the driver, so each rule is unit-tested (gpu_setup_test).
// Thread safety: plain functions of their arguments.
#ifndef MISSILE_DAEMON_GPU_SETUP_H_
#define MISSILE_DAEMON_GPU_SETUP_H_

#include <array>
#include <cstdint>
#include <optional>
#include <string>

#include "absl/status/statusor.h"
#include "copy_arbiter.h"
#include "daemon/config.h"
#include "gpu.h"
#include "missile/colorer/channel_map_file.h"
#include "missile/colorer/colour_policy.h"
#include "missile/colorer/colour_scheme.h"
#include "missile/colorer/profile.h"
#include "pacing_domain.h"
#include "vram_pool.h"

namespace missile::daemon {

// Where the GPU's calibration profile would be: gpu.profile_dir/<uuid>.toml.
std::string ProfilePath(const GpuSection& gpu, const std::string& uuid);

// Where the GPU's channel map would be (missile-calibrate --channel-map):
// gpu.profile_dir/<uuid>.channels.toml.
std::string ChannelMapPathFor(const GpuSection& gpu, const std::string& uuid);

// `note` extended with what the GPU's channel map says about colours at `granularity_bytes`,
// and why (colorer::ExplainColours). `map` is the loaded file: NOT_FOUND (no file) leaves the
// note as it is; any other error is named in the note (the map only explains, so the daemon
// runs on without it).
std::string AddChannelMapReason(std::string note,
                                const absl::StatusOr<colorer::ChannelMapFile>& map,
                                uint64_t granularity_bytes);

struct ColourChoice {
  // The scheme to place blocks by; nullopt: one colour (OneColourScheme), no placement.
  std::optional<colorer::ColourScheme> scheme;
  std::string note;  // why, for the start-up log and missilectl status
};

// `profile` is the GPU's loaded profile, or DefaultProfile() when `profile_path` does not exist.
// `phys_visible`: the driver gives user space each block's physical address (only the driver
// test double does), without which blocks cannot be placed by colour. Fails only when a profile
// of several colours cannot become a scheme.
absl::StatusOr<ColourChoice> ChooseColourScheme(const colorer::GpuColourProfile& profile,
                                                const std::string& profile_path,
                                                bool phys_visible);

// The one-colour scheme used whenever blocks are not placed by colour.
absl::StatusOr<colorer::ColourScheme> OneColourScheme();

// gpu.ls_colours exclusive LS colours when set, half the colours otherwise; nothing reserved
// with one colour.
colorer::ColourPolicyOptions ColourPolicyOptionsFor(int colour_count, const GpuSection& gpu);

// Capacity gpu.pool_limit and cache gpu.cache_limit, rounded down to the granularity; the cache
// never below the preallocation, which is there to be kept warm.
PoolOptions PoolOptionsFor(const GpuSection& gpu, const DeviceInfo& device);
// gpu.prealloc in bytes, rounded down to the granularity.
uint64_t PreallocBytesFor(const GpuSection& gpu, const DeviceInfo& device);

// The class quotas on a pool of `capacity_bytes`, indexed by ClassIndex.
std::array<QuotaPolicy, 2> ClassQuotasFor(const ClassesSection& classes, uint64_t capacity_bytes);

// The [pcie] section as the copy arbiter's options.
CopyArbiter::Options ArbiterOptionsFor(const PcieSection& pcie);

// The pacing policy that [compute] describes.
PacingSettings PacingSettingsOf(const ComputeSection& compute);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_GPU_SETUP_H_
