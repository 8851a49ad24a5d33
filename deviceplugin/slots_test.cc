#include "slots.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

const std::string kUuid0 = "GPU-00000000-1111-2222-3333-444444444444";
const std::string kUuid1 = "GPU-55555555-6666-7777-8888-999999999999";

std::vector<Slot> TwoGpus(uint32_t slots) {
  return *BuildSlots({{0, kUuid0}, {1, kUuid1}}, TenantClass::kBestEffort, slots);
}

TEST(SlotsTest, SlotsAreNamedByGpuClassAndNumber) {
  absl::StatusOr<std::vector<Slot>> slots =
      BuildSlots({{0, kUuid0}, {1, kUuid1}}, TenantClass::kLatencySensitive, 2);
  ASSERT_TRUE(slots.ok()) << slots.status();
  ASSERT_EQ(slots->size(), 4u);
  EXPECT_EQ((*slots)[0].id, kUuid0 + "-ls-0");
  EXPECT_EQ((*slots)[1].id, kUuid0 + "-ls-1");
  EXPECT_EQ((*slots)[2].id, kUuid1 + "-ls-0");
  EXPECT_EQ((*slots)[3].gpu.index, 1u);
  EXPECT_EQ((*slots)[3].number, 1u);
  for (const Slot& slot : *slots) EXPECT_LE(slot.id.size(), 63u);
  EXPECT_EQ(FindSlot(*slots, kUuid1 + "-ls-1"), &(*slots)[3]);
  EXPECT_EQ(FindSlot(*slots, kUuid1 + "-ls-2"), nullptr);
}

TEST(SlotsTest, NoGpusNoSlots) {
  EXPECT_TRUE(BuildSlots({}, TenantClass::kBestEffort, 4)->empty());
}

TEST(SlotsTest, RefusesBadUuids) {
  EXPECT_THAT(std::string(BuildSlots({{3, ""}}, TenantClass::kBestEffort, 1).status().message()),
              HasSubstr("GPU 3 has no UUID"));
  EXPECT_THAT(
      std::string(BuildSlots({{0, "GPU/x"}}, TenantClass::kBestEffort, 1).status().message()),
      HasSubstr("may not hold"));
  EXPECT_THAT(std::string(BuildSlots({{0, kUuid0}, {1, kUuid0}}, TenantClass::kBestEffort, 1)
                              .status()
                              .message()),
              HasSubstr("two GPUs have the UUID"));
  EXPECT_THAT(std::string(BuildSlots({{0, std::string(60, 'a')}}, TenantClass::kBestEffort, 1)
                              .status()
                              .message()),
              HasSubstr("longer than 63"));
}

TEST(SlotsTest, PrefersTheGpuWithTheMostFreeSlots) {
  std::vector<Slot> slots = TwoGpus(4);
  // GPU 0 has one free slot, GPU 1 three.
  absl::StatusOr<std::vector<std::string>> chosen =
      PreferSlots(slots, {kUuid0 + "-be-3", kUuid1 + "-be-0", kUuid1 + "-be-2", kUuid1 + "-be-3"},
                  {}, 2);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_THAT(*chosen, ElementsAre(kUuid1 + "-be-0", kUuid1 + "-be-2"));
}

TEST(SlotsTest, KeepsTheRequiredSlotsAndTheirGpu) {
  std::vector<Slot> slots = TwoGpus(4);
  absl::StatusOr<std::vector<std::string>> chosen = PreferSlots(
      slots, {kUuid0 + "-be-2", kUuid0 + "-be-3", kUuid1 + "-be-0", kUuid1 + "-be-1",
              kUuid1 + "-be-2"},
      {kUuid0 + "-be-3"}, 2);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_THAT(*chosen, ElementsAre(kUuid0 + "-be-3", kUuid0 + "-be-2"));
}

TEST(SlotsTest, SpillsToAnotherGpuOnlyWhenOneIsNotEnough) {
  std::vector<Slot> slots = TwoGpus(2);
  absl::StatusOr<std::vector<std::string>> chosen = PreferSlots(
      slots, {kUuid0 + "-be-0", kUuid0 + "-be-1", kUuid1 + "-be-1"}, {}, 3);
  ASSERT_TRUE(chosen.ok()) << chosen.status();
  EXPECT_THAT(*chosen, ElementsAre(kUuid0 + "-be-0", kUuid0 + "-be-1", kUuid1 + "-be-1"));
}

TEST(SlotsTest, RefusesImpossibleRequests) {
  std::vector<Slot> slots = TwoGpus(2);
  const std::vector<std::string> avail = {kUuid0 + "-be-0", kUuid0 + "-be-1"};
  EXPECT_FALSE(PreferSlots(slots, avail, {}, 0).ok());
  EXPECT_FALSE(PreferSlots(slots, avail, {}, 3).ok());
  EXPECT_FALSE(PreferSlots(slots, {"nope"}, {}, 1).ok());
  EXPECT_FALSE(PreferSlots(slots, {avail[0], avail[0]}, {}, 1).ok());
  EXPECT_FALSE(PreferSlots(slots, avail, {kUuid1 + "-be-0"}, 1).ok());
  EXPECT_FALSE(PreferSlots(slots, avail, avail, 1).ok());
  EXPECT_THAT(std::string(PreferSlots(slots, avail, {kUuid1 + "-be-0"}, 2).status().message()),
              HasSubstr("is not available"));
}

}  // namespace
}  // namespace missile::deviceplugin
