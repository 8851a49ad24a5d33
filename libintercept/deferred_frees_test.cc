// DeferredFrees over the RecordingDriver: a free waits for its event, is released once, and a
// waiting reap releases everything.
#include "deferred_frees.h"

#include <utility>
#include <vector>

#include "gtest/gtest.h"
#include "testing/recording_driver.h"

namespace missile::shim {
namespace {

using Entry = AllocationTable::Entry;

class DeferredFreesTest : public ::testing::Test {
 protected:
  DeferredFrees& frees() { return frees_; }
  // Records an event on a stream and defers the free of an allocation at `ptr`.
  void Defer(CUdeviceptr ptr) {
    CUevent event = nullptr;
    ASSERT_EQ(frees_.RecordEvent(nullptr, /*ptsz=*/false, &event), CUDA_SUCCESS);
    ASSERT_NE(event, nullptr);
    frees_.Add(event, ptr, Entry{ptr, 4096, AllocationKind::kSmall, 7});
  }

  testing::RecordingDriver driver_;
  std::vector<std::pair<CUdeviceptr, Entry>> released_;
  DeferredFrees frees_{driver_.api(), [this](CUdeviceptr ptr, const Entry& entry) {
                         released_.emplace_back(ptr, entry);
                       }};
};

TEST_F(DeferredFreesTest, AFreeWaitsForItsStreamThenIsReleasedOnce) {
  driver_.set_events_pending(true);
  Defer(0x1000);
  frees().Reap(/*wait=*/false);
  EXPECT_TRUE(released_.empty());
  EXPECT_EQ(frees().pending(), 1u);
  driver_.CompleteEvents();
  frees().Reap(/*wait=*/false);
  ASSERT_EQ(released_.size(), 1u);
  EXPECT_EQ(released_[0].first, 0x1000u);
  EXPECT_EQ(released_[0].second, (Entry{0x1000, 4096, AllocationKind::kSmall, 7}));
  EXPECT_EQ(frees().pending(), 0u);
  frees().Reap(/*wait=*/false);
  EXPECT_EQ(released_.size(), 1u);
  EXPECT_EQ(driver_.Count("cuEventRecord"), 1);
}

TEST_F(DeferredFreesTest, AWaitingReapReleasesEveryFree) {
  driver_.set_events_pending(true);
  Defer(0x1000);
  Defer(0x2000);
  frees().Reap(/*wait=*/true);
  EXPECT_EQ(released_.size(), 2u);
  EXPECT_EQ(frees().pending(), 0u);
}

TEST_F(DeferredFreesTest, ADiscardedEventReleasesNothing) {
  CUevent event = nullptr;
  ASSERT_EQ(frees().RecordEvent(nullptr, /*ptsz=*/true, &event), CUDA_SUCCESS);
  frees().Discard(event);
  frees().Reap(/*wait=*/true);
  EXPECT_TRUE(released_.empty());
  EXPECT_EQ(frees().pending(), 0u);
}

}  // namespace
}  // namespace missile::shim
