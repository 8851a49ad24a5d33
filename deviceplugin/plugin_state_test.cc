#include "plugin_state.h"

#include <thread>

#include "gtest/gtest.h"

namespace missile::deviceplugin {
namespace {

const std::vector<GpuRef> kOneGpu = {{0, "GPU-a"}};
const std::vector<GpuRef> kTwoGpus = {{0, "GPU-a"}, {1, "GPU-b"}};

absl::StatusOr<std::vector<GpuRef>> Down() { return absl::UnavailableError("down"); }

TEST(PluginStateTest, UnknownUntilMissiledAnswers) {
  PluginState state(2);
  EXPECT_FALSE(state.Snapshot().known);
  EXPECT_FALSE(state.Observe(Down()));
  EXPECT_FALSE(state.Observe(Down()));
  EXPECT_FALSE(state.Snapshot().known);
  EXPECT_TRUE(state.Observe(kOneGpu));
  EXPECT_TRUE(state.Snapshot().known);
  EXPECT_TRUE(state.Snapshot().healthy);
  EXPECT_EQ(state.Snapshot().gpus, kOneGpu);
}

TEST(PluginStateTest, UnhealthyAfterTheConfiguredFailuresInARowThenHealthyAgain) {
  PluginState state(2);
  ASSERT_TRUE(state.Observe(kOneGpu));
  const uint64_t first = state.Snapshot().generation;
  EXPECT_FALSE(state.Observe(kOneGpu));  // same answer: no change
  EXPECT_FALSE(state.Observe(Down()));   // one failure: still healthy
  EXPECT_TRUE(state.Snapshot().healthy);
  EXPECT_FALSE(state.Observe(kOneGpu));  // the count starts again
  EXPECT_FALSE(state.Observe(Down()));
  EXPECT_TRUE(state.Observe(Down()));
  StateSnapshot down = state.Snapshot();
  EXPECT_FALSE(down.healthy);
  EXPECT_EQ(down.gpus, kOneGpu);  // the devices stay listed, unhealthy
  EXPECT_GT(down.generation, first);
  EXPECT_FALSE(state.Observe(Down()));
  EXPECT_TRUE(state.Observe(kOneGpu));
  EXPECT_TRUE(state.Snapshot().healthy);
}

TEST(PluginStateTest, ANewGpuListIsAChange) {
  PluginState state(1);
  ASSERT_TRUE(state.Observe(kOneGpu));
  EXPECT_TRUE(state.Observe(kTwoGpus));
  EXPECT_EQ(state.Snapshot().gpus, kTwoGpus);
}

TEST(PluginStateTest, WaitForChangeWakesOnAChangeAndOnStop) {
  PluginState state(1);
  const uint64_t seen = state.Snapshot().generation;
  std::thread feeder([&] { state.Observe(kOneGpu); });
  StateSnapshot next = state.WaitForChange(seen, std::chrono::minutes(5));
  feeder.join();
  EXPECT_NE(next.generation, seen);
  EXPECT_TRUE(next.known);

  std::thread stopper([&] { state.Stop(); });
  StateSnapshot same = state.WaitForChange(next.generation, std::chrono::minutes(5));
  stopper.join();
  EXPECT_EQ(same.generation, next.generation);
  EXPECT_TRUE(state.stopped());
}

}  // namespace
}  // namespace missile::deviceplugin
