// ProcessWatcher over real child processes: a child that waits on a pipe, then exits.
#include "process_watcher.h"

#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <thread>

#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

// A child that runs until the test kills it.
pid_t SpawnSleeper() {
  const pid_t pid = fork();
  if (pid == 0) {
    pause();
    _exit(0);
  }
  return pid;
}

void KillAndReap(pid_t pid) {
  kill(pid, SIGKILL);
  waitpid(pid, nullptr, 0);
}

TEST(ProcessWatcherTest, ReportsAnExitUnderItsKeyUntilUnwatched) {
  absl::Mutex mu;
  int reports = 0;
  uint64_t last_key = 0;
  absl::Notification exited;
  ProcessWatcher watcher([&](uint64_t key) {
    absl::MutexLock lock(&mu);
    last_key = key;
    if (++reports == 2) exited.Notify();  // reported again: a pidfd stays readable
  });
  ASSERT_TRUE(watcher.Start().ok());
  const pid_t child = SpawnSleeper();
  ASSERT_GT(child, 0);
  ASSERT_TRUE(watcher.Watch(42, child).ok());
  EXPECT_EQ(watcher.Watch(42, child).code(), absl::StatusCode::kAlreadyExists);
  EXPECT_TRUE(watcher.Lives(42));
  KillAndReap(child);
  ASSERT_TRUE(exited.WaitForNotificationWithTimeout(absl::Seconds(5)));
  EXPECT_FALSE(watcher.Lives(42));
  watcher.Unwatch(42);
  {
    absl::MutexLock lock(&mu);
    EXPECT_EQ(last_key, 42u);
    reports = 100;  // no more reports once unwatched
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  absl::MutexLock lock(&mu);
  EXPECT_LE(reports, 101);
  EXPECT_FALSE(watcher.Lives(42));
}

TEST(ProcessWatcherTest, AProcessWatchedBeforeStartIsWatchedAfter) {
  absl::Notification exited;
  ProcessWatcher watcher([&](uint64_t key) {
    if (key == 7 && !exited.HasBeenNotified()) exited.Notify();
  });
  const pid_t child = SpawnSleeper();
  ASSERT_GT(child, 0);
  ASSERT_TRUE(watcher.Watch(7, child).ok());
  ASSERT_TRUE(watcher.Start().ok());
  KillAndReap(child);
  EXPECT_TRUE(exited.WaitForNotificationWithTimeout(absl::Seconds(5)));
}

TEST(ProcessWatcherTest, AGoneProcessCannotBeWatchedAndTheHeartbeatAdvances) {
  ProcessWatcher watcher([](uint64_t) {});
  const pid_t child = SpawnSleeper();
  ASSERT_GT(child, 0);
  KillAndReap(child);
  EXPECT_EQ(watcher.Watch(1, child).code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_FALSE(watcher.Lives(1));
  ASSERT_TRUE(watcher.Start().ok());
  const uint64_t before = watcher.heartbeat();
  std::this_thread::sleep_for(std::chrono::milliseconds(450));
  EXPECT_GT(watcher.heartbeat(), before);
  watcher.Stop();
}

}  // namespace
}  // namespace missile::daemon
