#include "session_policy.h"

#include "gtest/gtest.h"

namespace missile::shim {
namespace {

TEST(SessionPolicyTest, OnlyARestartedDaemonServesTheProcessAgain) {
  EXPECT_TRUE(
      KeepNewSession("0123456789abcdef0123456789abcdef", "fedcba9876543210fedcba9876543210"));
  EXPECT_FALSE(
      KeepNewSession("0123456789abcdef0123456789abcdef", "0123456789abcdef0123456789abcdef"))
      << "the daemon that ended the session";
  EXPECT_FALSE(KeepNewSession("0123456789abcdef0123456789abcdef", "")) << "a daemon without ids";
  EXPECT_FALSE(KeepNewSession("", "0123456789abcdef0123456789abcdef"))
      << "the ended session came from a daemon without ids";
  EXPECT_FALSE(KeepNewSession("", ""));
}

}  // namespace
}  // namespace missile::shim
