#include "missile/common/gpu_uuid.h"

#include "gtest/gtest.h"

namespace missile {
namespace {

TEST(FormatGpuUuidTest, LikeNvidiaSmi) {
  std::array<uint8_t, 16> b = {0x4e, 0x04, 0xfc, 0x3b, 0x9f, 0xb0, 0xc1, 0xd2,
                               0xe3, 0xf4, 0x05, 0x16, 0x27, 0x38, 0x49, 0x5a};
  EXPECT_EQ(FormatGpuUuid(b), "GPU-4e04fc3b-9fb0-c1d2-e3f4-05162738495a");
  EXPECT_EQ(FormatGpuUuid({}), "GPU-00000000-0000-0000-0000-000000000000");
}

}  // namespace
}  // namespace missile
