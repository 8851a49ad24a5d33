// GpuColourProfile: what the calibration tool learned about one GPU's VRAM channels, saved as
// TOML and loaded by the daemon at start.
//
// Contract:
// - Parse/Load accept exactly the keys below; a missing key, an unknown key, a wrong type or an
//   inconsistent value is INVALID_ARGUMENT with a message that names the key. A missing file is
//   NOT_FOUND. Nothing throws: toml++ parse errors are caught here and become statuses.
// - `colours` must equal DistinguishableColours(channel map, granularity_bytes): the file cannot
//   claim more (or fewer) colours than its own map gives chunks of that size.
// - Save validates first, then writes `path`.tmp and renames it over `path`.
// - Free functions over values: safe from any thread on distinct paths.
//
// Format (TOML; keys at the top level unless shown under a table):
//   format_version = 1
//   gpu_name = "NVIDIA H200"          uuid = "GPU-..."         driver_version = "580.65.06"
//   tool_version = "missile-calibrate 0.1.0"                  date = "2025-06-01"
//   granularity_bytes = 2097152       # power of two: the chunk size the colours apply to
//   colours = 1                       # distinguishable colours at that granularity, 1..64
//   [channel_map]
//   kind = "uniform"                  # + channels = N
//   kind = "xor"                      # + masks = [0x..., ...] (1..6, below 2^63)
//   kind = "table"                    # + granule_shift = S, table = [c0, c1, ...]
//   [[evidence]]                      # zero or more
//   name = "stream_bw_all_chunks"     value = 4.37       unit = "TB/s"

#ifndef MISSILE_COLORER_PROFILE_H_
#define MISSILE_COLORER_PROFILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::colorer {

inline constexpr int kProfileFormatVersion = 1;

struct EvidenceEntry {
  std::string name;
  double value = 0;
  std::string unit;

  friend bool operator==(const EvidenceEntry&, const EvidenceEntry&) = default;
};

struct GpuColourProfile {
  std::string gpu_name;
  std::string uuid;
  std::string driver_version;
  std::string tool_version;
  std::string date;  // ISO 8601, as the tool wrote it
  uint64_t granularity_bytes = uint64_t{2} << 20;
  int colours = 1;
  ChannelMapSpec channel_map;  // default: uniform, one channel
  std::vector<EvidenceEntry> evidence;
  // True only for DefaultProfile(): no calibration behind it. Not saved; a loaded profile has
  // is_default == false.
  bool is_default = false;

  friend bool operator==(const GpuColourProfile&, const GpuColourProfile&) = default;
};

// One colour, uniform map, 2 MiB granularity, is_default = true: what the daemon assumes with
// no profile ("no profile: assuming one colour").
GpuColourProfile DefaultProfile();

// Checks the values a file could hold (see the contract), naming the offending key.
absl::Status ValidateProfile(const GpuColourProfile& profile);

absl::StatusOr<GpuColourProfile> ParseProfile(std::string_view toml_text);
absl::StatusOr<GpuColourProfile> LoadProfile(const std::string& path);
// The TOML text SaveProfile writes (after validation).
absl::StatusOr<std::string> FormatProfile(const GpuColourProfile& profile);
absl::Status SaveProfile(const GpuColourProfile& profile, const std::string& path);

// The scheme the daemon colours with: ColourScheme::ForGranularity over the profile's map.
absl::StatusOr<ColourScheme> SchemeFromProfile(const GpuColourProfile& profile);

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_PROFILE_H_
