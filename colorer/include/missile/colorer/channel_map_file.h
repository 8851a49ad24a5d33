// ChannelMapFile: the channel hash missile-calibrate --channel-map recovered on one GPU, saved
// as <profile dir>/<GPU uuid>.channels.toml beside the colour profile, and what it means for
// colouring (colours per VMM granularity, and why).
//
// Contract:
// - Parse/Load accept exactly the keys below; a missing or unknown key, a wrong type or an
//   inconsistent value (a mask outside [low_bit, high_bit), masks that are not a reduced basis,
//   channel_groups != 2^len(masks), a fraction outside [0, 1]) is INVALID_ARGUMENT naming the
//   key; a missing file is NOT_FOUND, an unreadable one FAILED_PRECONDITION. Nothing throws.
// - Save validates first, then writes `path`.tmp and renames it over `path`.
// - Free functions over values: safe from any thread on distinct paths.
//
// Format (TOML, all keys at the top level):
//   format_version = 1
//   gpu_name, uuid, driver_version, tool_version, date   (strings)
//   granularity_bytes = 2097152   # the GPU's VMM granularity when it was measured
//   low_bit = 8   high_bit = 21   # the address bits the measurement could see
//   masks = [0x..., ...]          # reduced basis of the hash's row space (may be empty)
//   channel_groups = 2^len(masks)
//   source = "dram"               # which measurement the function comes from
//   method = "..."                # how it was measured, one line
//   confidence = 0.97   agreement = 0.99   # of the fit (hash_fit.h)
//   observations = 6552           # fitted masks
//   verification_accuracy = 0.99  # on held-back masks
//   verification_observations = 1639
//   pair_accuracy = 0.94          # victim/aggressor colour pairs; -1: not measured
//   pair_observations = 64
//   seconds = 95.2                # how long the calibration took

#ifndef MISSILE_COLORER_CHANNEL_MAP_FILE_H_
#define MISSILE_COLORER_CHANNEL_MAP_FILE_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "missile/colorer/hash_fit.h"

namespace missile::colorer {

inline constexpr int kChannelMapFileVersion = 1;

struct ChannelMapFile {
  std::string gpu_name;
  std::string uuid;
  std::string driver_version;
  std::string tool_version;
  std::string date;
  uint64_t granularity_bytes = uint64_t{2} << 20;
  std::string source;
  std::string method;
  XorHashFit fit;  // low_bit, high_bit, masks, observations, agreement, confidence
  double verification_accuracy = 0;
  int verification_observations = 0;
  double pair_accuracy = -1;
  int pair_observations = 0;
  double seconds = 0;

  friend bool operator==(const ChannelMapFile& a, const ChannelMapFile& b);
};

// <dir>/<uuid>.channels.toml
std::string ChannelMapPath(std::string_view dir, std::string_view uuid);

absl::Status ValidateChannelMapFile(const ChannelMapFile& file);
absl::StatusOr<ChannelMapFile> ParseChannelMapFile(std::string_view toml_text);
absl::StatusOr<ChannelMapFile> LoadChannelMapFile(const std::string& path);
absl::StatusOr<std::string> FormatChannelMapFile(const ChannelMapFile& file);
absl::Status SaveChannelMapFile(const ChannelMapFile& file, const std::string& path);

// One line for `missilectl status`: the colours chunks of `granularity_bytes` can have by the
// recovered function, why, and how sure the measurement was. E.g. "channel map (dram, 32
// groups, confidence 0.97, held-back accuracy 0.99): 2 MiB chunks: 1 colour; all 32 ...".
absl::StatusOr<std::string> ExplainColours(const ChannelMapFile& file, uint64_t granularity_bytes);

}  // namespace missile::colorer

#endif  // MISSILE_COLORER_CHANNEL_MAP_FILE_H_
