// DaemonCore's lock discipline: it never calls a GPU's pool, arbiter or pacing domain while it
// holds the session registry's lock, and a registration that meets the end of its session or
// the daemon's stop between its reservation and its publication undoes itself.
//
// The check: before each round of GPU calls (CoreOptions::before_gpu_calls) another thread asks
// for the session list, which needs the registry's lock; if it does not answer within a second
// the lock was held across the calls.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "core.h"
#include "daemon/testing/vram_pool_test_util.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using pool_test::FakeSource;
using pool_test::kBe;
using pool_test::kG;
using pool_test::kLs;
using pool_test::MakePool;
using pool_test::OneColourPolicy;
using pool_test::PoolSetup;

class CoreLockTest : public ::testing::Test {
 protected:
  void SetUp() override {
    Gpu gpu;
    gpu.info.uuid = "GPU-00000000-0000-0000-0000-000000000002";
    gpu.info.name = "fake";
    gpu.info.total_bytes = 16 * kG;
    gpu.info.granularity = kG;
    PoolSetup setup;
    gpu.quota[ClassIndex(kLs)] = setup.ls;
    gpu.quota[ClassIndex(kBe)] = setup.be;
    gpu.pool = MakePool(&source_, OneColourPolicy(), setup);
    auto pacing = PacingDomain::Create({});
    ASSERT_TRUE(pacing.ok()) << pacing.status();
    gpu.pacing = *std::move(pacing);
    std::vector<Gpu> gpus;
    gpus.push_back(std::move(gpu));
    CoreOptions options;
    options.before_gpu_calls = [this](std::string_view what) { OnGpuCalls(what); };
    core_ = std::make_unique<DaemonCore>(std::move(options), std::move(gpus));
    ASSERT_TRUE(core_->Start().ok());
  }

  void TearDown() override {
    core_->Stop();  // its GPU calls are checked too, while core_ still points to it
    core_.reset();
    for (std::thread& t : probes_) t.join();
    for (pid_t pid : children_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  // Whether the registry's lock is free now, asked from another thread.
  void OnGpuCalls(std::string_view what) {
    auto answered = std::make_shared<absl::Notification>();
    probes_.emplace_back([this, answered] {
      core_->ListSessions();
      answered->Notify();
    });
    const bool free = answered->WaitForNotificationWithTimeout(absl::Seconds(1));
    absl::MutexLock lock(&mu_);
    calls_.push_back(std::string(what));
    if (!free) held_.push_back(std::string(what));
    if (hook_) {
      auto hook = std::move(hook_);
      hook_ = nullptr;
      hook(what);
    }
  }

  std::vector<std::string> Calls() {
    absl::MutexLock lock(&mu_);
    return calls_;
  }
  std::vector<std::string> Held() {
    absl::MutexLock lock(&mu_);
    return held_;
  }
  // Run once, at the next round of GPU calls (on the thread that makes them).
  void AtNextGpuCalls(std::function<void(std::string_view)> hook) {
    absl::MutexLock lock(&mu_);
    hook_ = std::move(hook);
  }

  pid_t SpawnChild() {
    const pid_t pid = fork();
    if (pid == 0) {
      pause();
      _exit(0);
    }
    children_.push_back(pid);
    return pid;
  }

  FakeSource source_;
  std::unique_ptr<DaemonCore> core_;
  std::vector<std::thread> probes_;
  std::vector<pid_t> children_;
  absl::Mutex mu_;
  std::vector<std::string> calls_ ABSL_GUARDED_BY(mu_);
  std::vector<std::string> held_ ABSL_GUARDED_BY(mu_);
  std::function<void(std::string_view)> hook_ ABSL_GUARDED_BY(mu_);
  const PeerCredentials me_{getpid(), 1000, 1000};
  const PeerCredentials root_{getpid(), 0, 0};
};

TEST_F(CoreLockTest, NoGpuIsCalledUnderTheRegistryLock) {
  absl::StatusOr<SessionInfo> s = core_->Register(me_, "web", kBe, 0);
  ASSERT_TRUE(s.ok()) << s.status();
  ASSERT_TRUE(core_->Allocate(me_, s->id, 0, false, 2 * kG).ok());
  PolicyTarget target;
  target.pid = me_.pid;
  PolicyChange change;
  change.cls = kLs;
  change.quota_bytes = 4 * kG;
  ASSERT_TRUE(core_->SetPolicy(root_, target, change).ok());
  core_->EndSession(s->id, "test");
  // A session ended while its process runs, then the process exits.
  const pid_t child = SpawnChild();
  absl::StatusOr<SessionInfo> c = core_->Register(PeerCredentials{child, 1001, 1001}, "c", kBe, 0);
  ASSERT_TRUE(c.ok()) << c.status();
  core_->EndSession(c->id, "test");
  kill(child, SIGKILL);
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(5);
  while (Calls().back() != "forget" && std::chrono::steady_clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(Calls(), (std::vector<std::string>{"register", "policy", "policy", "policy", "end",
                                               "register", "end", "forget"}));
  EXPECT_TRUE(Held().empty()) << "the registry's lock was held across GPU calls for "
                              << Held().front();
}

TEST_F(CoreLockTest, AClassChangeCallsNoGpuUnderTheRegistryLock) {
  ASSERT_TRUE(core_->Register(me_, "web", kBe, 0).ok());
  PolicyTarget target;
  target.cls = kBe;
  PolicyChange change;
  change.priority = 5;
  change.quota_bytes = 2 * kG;
  change.force = true;
  ASSERT_TRUE(core_->SetPolicy(root_, target, change).ok());
  EXPECT_EQ(core_->class_defaults(kBe).priority, 5);
  // The over-quota check, the class quota, then the one BE session (its pools, its domains).
  EXPECT_EQ(Calls(),
            (std::vector<std::string>{"register", "policy", "policy", "policy", "policy"}));
  EXPECT_TRUE(Held().empty()) << Held().front();
}

TEST_F(CoreLockTest, ARegistrationMeetingTheDaemonsStopUndoesItself) {
  AtNextGpuCalls([this](std::string_view) { core_->Stop(); });
  absl::StatusOr<SessionInfo> s = core_->Register(me_, "web", kBe, 0);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_EQ(Calls(), (std::vector<std::string>{"register", "unregister"}));
  EXPECT_TRUE(core_->gpus()[0].pool->Snapshot().tenants.empty());
  EXPECT_TRUE(core_->ListSessions().empty());
  EXPECT_EQ(core_->sessions_opened(), 0u);
}

TEST_F(CoreLockTest, ARegistrationWhoseProcessExitsMeanwhileUndoesItself) {
  const pid_t child = SpawnChild();
  AtNextGpuCalls([child](std::string_view) {
    kill(child, SIGKILL);
    // The watcher sees the exit at once (its pidfd turns readable) and ends the session.
    std::this_thread::sleep_for(std::chrono::milliseconds(500));
  });
  absl::StatusOr<SessionInfo> s = core_->Register(PeerCredentials{child, 1001, 1001}, "c", kBe, 0);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kUnavailable) << s.status();
  EXPECT_EQ(Calls(), (std::vector<std::string>{"register", "unregister"}));
  EXPECT_TRUE(core_->gpus()[0].pool->Snapshot().tenants.empty());
  EXPECT_TRUE(core_->ListSessions().empty());
  // The process is gone for good: its next registration (a new pid) is a new session.
  absl::StatusOr<SessionInfo> me = core_->Register(me_, "web", kBe, 0);
  EXPECT_TRUE(me.ok()) << me.status();
}

}  // namespace
}  // namespace missile::daemon
