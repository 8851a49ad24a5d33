// What missile-calibrate writes and prints: the evidence list, the per-GPU profile assembled
// from it, the human-readable table and the --json summary. Pure logic, no CUDA.
//
// Contract:
// - BuildProfile returns only profiles that pass colorer::ValidateProfile: colours equals
//   DistinguishableColours(channel_map, granularity). One colour gets the uniform map with one
//   channel; k > 1 colours get a lookup table with one entry per colour at the chunk granularity
//   (a stand-in with the right colour count: which physical chunks carry which colour is not
//   visible to user space, see daemon/main.cc).
// - Evidence keeps only finite values (a TOML file could hold NaN, but it would not compare equal
//   after a round trip); Add returns false for a dropped entry.
// - Not thread-safe: an Evidence is filled from one thread.

#ifndef MISSILE_COLORER_CALIBRATE_REPORT_H_
#define MISSILE_COLORER_CALIBRATE_REPORT_H_

#include <array>
#include <cstdint>
#include <ctime>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "missile/colorer/profile.h"
#include "verdict.h"

namespace missile::calibrate {

inline constexpr char kToolName[] = "missile-calibrate";

class Evidence {
 public:
  bool Add(std::string name, double value, std::string unit);
  const std::vector<colorer::EvidenceEntry>& entries() const { return entries_; }
  // The value of the first entry called `name`, or NaN.
  double Find(absl::string_view name) const;

 private:
  std::vector<colorer::EvidenceEntry> entries_;
};

// What the tool learned about the device it ran on.
struct GpuIdentity {
  std::string name;
  std::string uuid;            // FormatUuid of cuDeviceGetUuid_v2
  std::string driver_version;  // FormatDriverVersion
  uint64_t granularity_bytes = uint64_t{2} << 20;
};

// "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", as nvidia-smi prints it (lowercase hex).
std::string FormatUuid(const std::array<uint8_t, 16>& bytes);
// The kernel module version from the text of /proc/driver/nvidia/version ("NVRM version: NVIDIA
// UNIX x86_64 Kernel Module  580.159.04  ..."), or "" when there is none.
std::string KernelModuleVersion(absl::string_view proc_text);
// "580.159.04 (CUDA 13.0)" from cuDriverGetVersion's 13000 and the module version; just
// "CUDA 13.0" when the module version is unknown.
std::string FormatDriverVersion(int cuda_driver_version, absl::string_view module_version);
// UTC ISO 8601 with seconds: "2026-11-29T12:34:56Z".
std::string IsoDateUtc(std::time_t t);
// "<dir>/<uuid>.toml" (one slash between).
std::string ProfilePath(absl::string_view dir, absl::string_view uuid);

// The map a profile with `colours` colours at `granularity_bytes` carries (see the contract).
absl::StatusOr<colorer::ChannelMapSpec> MapForColours(int colours, uint64_t granularity_bytes);

absl::StatusOr<colorer::GpuColourProfile> BuildProfile(const GpuIdentity& gpu,
                                                      const Verdict& verdict,
                                                      const Evidence& evidence, std::string date,
                                                      std::string tool_version);

// Every evidence entry, one per line, aligned, followed by the verdict.
std::string FormatTable(const colorer::GpuColourProfile& profile, const Verdict& verdict);

// One JSON object: gpu_name, uuid, driver_version, tool_version, date, granularity_bytes,
// colours, verdict, profile_path, evidence [{name, value, unit}].
std::string SummaryJson(const colorer::GpuColourProfile& profile, const Verdict& verdict,
                        absl::string_view profile_path);

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_REPORT_H_
