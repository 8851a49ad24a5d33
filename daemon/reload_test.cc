#include "reload.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace missile::daemon {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

TEST(ReloadTest, TheSameConfigurationChangesNothing) {
  EXPECT_TRUE(PlanReload(DaemonConfig{}, DaemonConfig{}).empty());
}

TEST(ReloadTest, LogLevelAndPacingKeysChangeLive) {
  DaemonConfig next;
  next.daemon.log_level = "debug";
  next.compute.window_us = 300;
  next.compute.pacing = false;
  const ReloadPlan plan = PlanReload(DaemonConfig{}, next);
  EXPECT_THAT(plan.live_keys,
              ElementsAre("compute.pacing", "compute.window_us", "daemon.log_level"));
  EXPECT_THAT(plan.restart_keys, IsEmpty());
  ASSERT_TRUE(plan.log_level.has_value());
  EXPECT_EQ(*plan.log_level, "debug");
  ASSERT_TRUE(plan.pacing.has_value());
  EXPECT_EQ(plan.pacing->window_ns, 300'000u);
  EXPECT_FALSE(plan.pacing->pacing);
}

TEST(ReloadTest, EverythingElseNeedsARestartAndIsNamed) {
  DaemonConfig next;
  next.daemon.socket = "/run/other/missiled.sock";
  next.pcie.chunk = 4 << 20;
  next.compute.mps = "start";  // MPS is started once, before the GPUs are opened
  const ReloadPlan plan = PlanReload(DaemonConfig{}, next);
  EXPECT_THAT(plan.live_keys, IsEmpty());
  EXPECT_THAT(plan.restart_keys,
              ElementsAre("compute.mps", "daemon.fd_socket", "daemon.socket", "pcie.chunk"));
  EXPECT_FALSE(plan.pacing.has_value());
  EXPECT_FALSE(plan.log_level.has_value());
}

}  // namespace
}  // namespace missile::daemon
