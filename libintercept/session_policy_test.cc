#include "session_policy.h"

#include "gtest/gtest.h"

namespace missile::shim {
namespace {

constexpr char kA[] = "0123456789abcdef0123456789abcdef";
constexpr char kB[] = "fedcba9876543210fedcba9876543210";

TEST(SessionPolicyTest, EveryDaemonWithInstanceIdsServesTheProcessAgain) {
  EXPECT_EQ(ClassifyNewSession(kA, 7, kB, 9), NewSession::kRestartedDaemon);
  EXPECT_EQ(ClassifyNewSession(kA, 7, kB, 7), NewSession::kRestartedDaemon)
      << "a restarted daemon may hand out the same number by chance";
  EXPECT_EQ(ClassifyNewSession(kA, 7, kA, 7), NewSession::kSameSession)
      << "the daemon kept the session through its stall";
  EXPECT_EQ(ClassifyNewSession(kA, 7, kA, 8), NewSession::kEndedWhileAlive)
      << "the daemon ended the session while it kept running: its blocks were released for good";
}

TEST(SessionPolicyTest, ADaemonWithoutInstanceIdsIsNotTrusted) {
  EXPECT_EQ(ClassifyNewSession(kA, 7, "", 7), NewSession::kRefuse) << "a daemon without ids";
  EXPECT_EQ(ClassifyNewSession("", 7, kA, 7), NewSession::kRefuse)
      << "the ended session came from a daemon without ids";
  EXPECT_EQ(ClassifyNewSession("", 7, "", 7), NewSession::kRefuse);
}

}  // namespace
}  // namespace missile::shim
