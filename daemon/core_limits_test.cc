// DaemonCore's per-uid session cap (limits.max_sessions_per_uid), over no GPUs: the sessions'
// processes are children of the test that wait to be killed.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "core.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

class CoreLimitsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    CoreOptions options;
    options.max_sessions_per_uid = 3;
    core_ = std::make_unique<DaemonCore>(options, std::vector<Gpu>());
    ASSERT_TRUE(core_->Start().ok());
    for (int i = 0; i < 6; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        pause();
        _exit(0);
      }
      ASSERT_GT(pid, 0);
      pids_.push_back(pid);
    }
  }
  void TearDown() override {
    core_.reset();
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  absl::Status Register(int child, unsigned uid) {
    return core_
        ->Register(PeerCredentials{pids_[child], uid, uid}, "t", TenantClass::kBestEffort, 0)
        .status();
  }

  std::unique_ptr<DaemonCore> core_;
  std::vector<pid_t> pids_;
};

TEST_F(CoreLimitsTest, AUidPastItsSessionCapIsRefusedAndOthersAreNot) {
  for (int i = 0; i < 3; ++i) ASSERT_TRUE(Register(i, 1000).ok()) << i;
  absl::Status refused = Register(3, 1000);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("limits.max_sessions_per_uid"), std::string::npos) << refused;
  EXPECT_EQ(core_->ListSessions().size(), 3u) << "the refused Register changed nothing";
  EXPECT_TRUE(Register(3, 1001).ok()) << "another uid";
  EXPECT_TRUE(Register(4, 0).ok()) << "root is not held to the cap";
}

TEST_F(CoreLimitsTest, AnEndedSessionGivesItsPlaceBack) {
  std::vector<uint64_t> ids;
  for (int i = 0; i < 3; ++i) {
    auto info =
        core_->Register(PeerCredentials{pids_[i], 1000, 1000}, "t", TenantClass::kBestEffort, 0);
    ASSERT_TRUE(info.ok());
    ids.push_back(info->id);
  }
  ASSERT_FALSE(Register(3, 1000).ok());
  core_->EndSession(ids[0], "test");
  EXPECT_TRUE(Register(3, 1000).ok());
  // A process that registered already gets its session back, cap or not.
  EXPECT_TRUE(Register(1, 1000).ok());
}

}  // namespace
}  // namespace missile::daemon
