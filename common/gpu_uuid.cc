#include "missile/common/gpu_uuid.h"

#include "absl/strings/str_format.h"

namespace missile {

std::string FormatGpuUuid(const std::array<uint8_t, 16>& b) {
  return absl::StrFormat("GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x",
                         b[0], b[1], b[2], b[3], b[4], b[5], b[6], b[7], b[8], b[9], b[10], b[11],
                         b[12], b[13], b[14], b[15]);
}

}  // namespace missile
