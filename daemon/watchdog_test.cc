#include "watchdog.h"

#include <atomic>
#include <chrono>
#include <thread>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

TEST(StalledLoopsTest, PingsOnlyWhenEveryLoopAdvanced) {
  const std::vector<std::string> names = {"core", "copy arbiter 0", "pacing 0"};
  EXPECT_TRUE(StalledLoops(names, {1, 5, 9}, {2, 6, 10}).empty());
  EXPECT_TRUE(StalledLoops(names, {1, 5, 9}, {100, 7, 1000}).empty());
  EXPECT_EQ(StalledLoops(names, {1, 5, 9}, {2, 5, 10}), std::vector<std::string>{"copy arbiter 0"});
  EXPECT_EQ(StalledLoops(names, {1, 5, 9}, {1, 5, 9}), names);
  // A counter that wrapped still moved.
  EXPECT_TRUE(StalledLoops({"core"}, {~uint64_t{0}}, {0}).empty());
  EXPECT_TRUE(StalledLoops({}, {}, {}).empty());
  // Missing readings count as stalled rather than alive.
  EXPECT_EQ(StalledLoops(names, {1}, {2}), (std::vector<std::string>{"copy arbiter 0", "pacing 0"}));
}

// The watchdog reads every heartbeat once at start (and pings), then once per check; `reads`
// counts the readings of the first heartbeat.
TEST(WatchdogTest, PingsAtStartAndAfterEveryCheckWhileAllLoopsAdvance) {
  std::atomic<int> reads{0};
  std::atomic<int> pings{0};
  std::vector<Heartbeat> beats = {{"a", [&] { return uint64_t(reads++); }},
                                  {"b", [&] { return uint64_t(reads.load()); }}};
  Watchdog dog(std::chrono::milliseconds(5), std::move(beats), [&] { pings++; });
  dog.Start();
  while (reads.load() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  dog.Stop();
  EXPECT_EQ(pings.load(), reads.load()) << "one ping at start and one per check";
}

TEST(WatchdogTest, StopsPingingWhileOneLoopIsStuck) {
  // Only the ping at start: no check after it found every loop advanced.
  std::atomic<int> reads{0};
  std::atomic<int> pings{0};
  std::vector<Heartbeat> beats = {{"alive", [&] { return uint64_t(reads++); }},
                                  {"stuck", [] { return uint64_t{7}; }}};
  Watchdog dog(std::chrono::milliseconds(5), std::move(beats), [&] { pings++; });
  dog.Start();
  while (reads.load() < 5) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  dog.Stop();
  EXPECT_EQ(pings.load(), 1);
}

TEST(WatchdogTest, StopWakesTheThreadAndPingsNoMore) {
  std::atomic<int> pings{0};
  Watchdog dog(std::chrono::hours(1), {}, [&] { pings++; });
  dog.Start();
  const auto start = std::chrono::steady_clock::now();
  dog.Stop();
  // Stop wakes the thread rather than waiting out its hour-long period (a bound four orders
  // of magnitude away, not a timing).
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(60));
  dog.Stop();  // twice: nothing
  const int after = pings.load();
  EXPECT_LE(after, 1) << "at most the ping at start";
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(pings.load(), after) << "a ping after Stop";
}

}  // namespace
}  // namespace missile::daemon
