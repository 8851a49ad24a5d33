// GPU UUIDs as nvidia-smi prints them: "GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx", lower-case
// hex of the 16 bytes cuDeviceGetUuid_v2 reports. The daemon names profiles and reports GPUs by
// it, and missile-calibrate writes it into each profile, so both must spell it alike.
// Thread safety: a pure function.
#ifndef MISSILE_COMMON_GPU_UUID_H_
#define MISSILE_COMMON_GPU_UUID_H_

#include <array>
#include <cstdint>
#include <string>

namespace missile {

std::string FormatGpuUuid(const std::array<uint8_t, 16>& bytes);

}  // namespace missile

#endif  // MISSILE_COMMON_GPU_UUID_H_
