#include "vmm_handles.h"

#include "gtest/gtest.h"

namespace missile::shim {
namespace {

GpuMemory* const kOwner = reinterpret_cast<GpuMemory*>(uintptr_t{0x10});

TEST(VmmHandlesTest, LastReleaseOfAnUnmappedHandleGivesTheBlock) {
  VmmHandles v;
  v.Add(1, kOwner, 42, 2 << 20);
  v.Retained(1);
  EXPECT_FALSE(v.Released(1).has_value());
  auto u = v.Released(1);
  ASSERT_TRUE(u.has_value());
  EXPECT_EQ(u->owner, kOwner);
  EXPECT_EQ(u->block, 42u);
  EXPECT_FALSE(v.Contains(1));
  EXPECT_FALSE(v.Released(1).has_value());  // once only
}

TEST(VmmHandlesTest, MappingsKeepTheBlockUntilTheLastUnmap) {
  VmmHandles v;
  v.Add(1, kOwner, 42, 4 << 20);
  v.Mapped(0x1000000, 2 << 20, 1);
  v.Mapped(0x1200000, 2 << 20, 1);
  EXPECT_FALSE(v.Released(1).has_value());
  EXPECT_EQ(v.CountsOf(1), std::make_pair(0, 2));
  EXPECT_TRUE(v.Unmapped(0x1000000, 2 << 20).empty());
  std::vector<VmmHandles::Unused> unused = v.Unmapped(0x1200000, 2 << 20);
  ASSERT_EQ(unused.size(), 1u);
  EXPECT_EQ(unused[0].block, 42u);
}

TEST(VmmHandlesTest, OneUnmapOverSeveralMappingsGivesEachBlockOnce) {
  VmmHandles v;
  v.Add(1, kOwner, 42, 2 << 20);
  v.Add(2, kOwner, 43, 2 << 20);
  v.Mapped(0x1000000, 2 << 20, 1);
  v.Mapped(0x1200000, 2 << 20, 2);
  v.Released(1);
  v.Released(2);
  std::vector<VmmHandles::Unused> unused = v.Unmapped(0x1000000, 4 << 20);
  ASSERT_EQ(unused.size(), 2u);
  EXPECT_EQ(unused[0].block + unused[1].block, 85u);
}

TEST(VmmHandlesTest, UnknownHandlesAreIgnored) {
  VmmHandles v;
  v.Retained(9);
  v.Mapped(0x1000, 4096, 9);
  EXPECT_FALSE(v.Released(9).has_value());
  EXPECT_TRUE(v.Unmapped(0, ~uint64_t{0} >> 1).empty());
}

}  // namespace
}  // namespace missile::shim
