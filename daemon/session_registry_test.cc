// SessionRegistry: reserve, publish, abort and end, and the races between them.
#include "session_registry.h"

#include <atomic>
#include <chrono>
#include <thread>
#include <vector>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

constexpr uint64_t kFirst = 1000;

SessionInfo InfoOf(uint64_t id, const PeerCredentials& creds, const std::string& name) {
  SessionInfo info;
  info.id = id;
  info.creds = creds;
  info.name = name;
  return info;
}

class SessionRegistryTest : public ::testing::Test {
 protected:
  // Reserves and publishes a session of `creds`; its id.
  uint64_t Open(const PeerCredentials& creds, bool capped = true) {
    absl::StatusOr<SessionRegistry::Reservation> r = registry_.Reserve(creds, capped);
    EXPECT_TRUE(r.ok()) << r.status();
    if (!r.ok()) return 0;
    EXPECT_TRUE(registry_.Publish(InfoOf(r->id, creds, "t")).ok());
    return r->id;
  }

  SessionRegistry registry_{kFirst, 2};
  const PeerCredentials a_{101, 1000, 1000};
  const PeerCredentials b_{102, 1000, 1000};
  const PeerCredentials c_{103, 1000, 1000};
};

TEST_F(SessionRegistryTest, AReservedSessionIsFoundOnlyOncePublished) {
  absl::StatusOr<SessionRegistry::Reservation> r = registry_.Reserve(a_, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(r->id, kFirst);
  EXPECT_FALSE(r->existing.has_value());
  EXPECT_EQ(registry_.Find(a_, r->id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_TRUE(registry_.List().empty());
  ASSERT_TRUE(registry_.Publish(InfoOf(r->id, a_, "web")).ok());
  absl::StatusOr<SessionInfo> found = registry_.Find(a_, r->id);
  ASSERT_TRUE(found.ok());
  EXPECT_EQ(found->name, "web");
  EXPECT_EQ(registry_.Find(b_, r->id).status().code(), absl::StatusCode::kPermissionDenied);
  // The same process registering again gets its session back.
  absl::StatusOr<SessionRegistry::Reservation> again = registry_.Reserve(a_, true);
  ASSERT_TRUE(again.ok());
  ASSERT_TRUE(again->existing.has_value());
  EXPECT_EQ(again->existing->id, r->id);
}

TEST_F(SessionRegistryTest, AnAbortedReservationLeavesNoTrace) {
  absl::StatusOr<SessionRegistry::Reservation> r = registry_.Reserve(a_, true);
  ASSERT_TRUE(r.ok());
  registry_.Abort(r->id);
  EXPECT_EQ(registry_.Publish(InfoOf(r->id, a_, "t")).code(),
            absl::StatusCode::kFailedPrecondition);
  // The pid and the uid's place are free again; ids are never handed out twice.
  absl::StatusOr<SessionRegistry::Reservation> next = registry_.Reserve(a_, true);
  ASSERT_TRUE(next.ok());
  EXPECT_FALSE(next->existing.has_value());
  EXPECT_EQ(next->id, kFirst + 1);
}

TEST_F(SessionRegistryTest, ASessionEndedBeforeItsPublishIsNotPublished) {
  absl::StatusOr<SessionRegistry::Reservation> r = registry_.Reserve(a_, true);
  ASSERT_TRUE(r.ok());
  EXPECT_FALSE(registry_.End(r->id).has_value());  // nothing published to end yet
  const absl::Status s = registry_.Publish(InfoOf(r->id, a_, "t"));
  EXPECT_EQ(s.code(), absl::StatusCode::kUnavailable) << s;
  EXPECT_TRUE(registry_.List().empty());
  EXPECT_TRUE(registry_.Reserve(a_, true).ok());  // the pid is free again
}

TEST_F(SessionRegistryTest, ClosingFailsLaterPublishesAndReserves) {
  const uint64_t open = Open(a_);
  absl::StatusOr<SessionRegistry::Reservation> r = registry_.Reserve(b_, true);
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(registry_.Close(), std::vector<uint64_t>{open});
  EXPECT_EQ(registry_.Publish(InfoOf(r->id, b_, "t")).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(registry_.Reserve(c_, true).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(SessionRegistryTest, TheUidCapCountsReservedSessions) {
  Open(a_);
  ASSERT_TRUE(registry_.Reserve(b_, true).ok());  // reserved, not yet published
  EXPECT_EQ(registry_.Reserve(c_, true).status().code(), absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(registry_.Reserve(c_, /*capped=*/false).ok());
}

TEST_F(SessionRegistryTest, EndingTellsWatchersAndWaiters) {
  const uint64_t id = Open(a_);
  std::atomic<int> calls{0};
  ASSERT_TRUE(registry_.AddWatcher(a_, id, 1, [&] { ++calls; }).ok());
  EXPECT_EQ(registry_.AddWatcher(a_, id, 1, [] {}).status().code(),
            absl::StatusCode::kResourceExhausted);
  std::thread waiter([&] {
    absl::StatusOr<SessionInfo> s = registry_.WaitForChange(a_, id, 0, [] { return false; });
    ASSERT_TRUE(s.ok());
    EXPECT_TRUE(s->ended);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  std::optional<SessionInfo> ended = registry_.End(id);
  waiter.join();
  ASSERT_TRUE(ended.has_value());
  EXPECT_TRUE(ended->ended);
  EXPECT_EQ(calls, 1);
  EXPECT_EQ(registry_.Find(a_, id).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(registry_.Update(id, [](SessionInfo&) {}).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(SessionRegistryTest, UpdateBumpsTheGeneration) {
  const uint64_t id = Open(a_);
  absl::StatusOr<SessionInfo> after = registry_.Update(id, [](SessionInfo& s) { s.weight = 7; });
  ASSERT_TRUE(after.ok());
  EXPECT_EQ(after->weight, 7u);
  EXPECT_EQ(after->generation, 1u);
  absl::StatusOr<SessionInfo> seen = registry_.WaitForChange(a_, id, 0, [] { return false; });
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->generation, 1u);
}

// A second registration of a process waits for the first to be published, then gets its
// session: one process never holds two.
TEST_F(SessionRegistryTest, ASecondReserveOfAPidWaitsForTheFirst) {
  absl::StatusOr<SessionRegistry::Reservation> first = registry_.Reserve(a_, true);
  ASSERT_TRUE(first.ok());
  std::atomic<bool> returned{false};
  absl::StatusOr<SessionRegistry::Reservation> second;
  std::thread t([&] {
    second = registry_.Reserve(a_, true);
    returned = true;
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(returned);
  ASSERT_TRUE(registry_.Publish(InfoOf(first->id, a_, "t")).ok());
  t.join();
  ASSERT_TRUE(second.ok());
  ASSERT_TRUE(second->existing.has_value());
  EXPECT_EQ(second->existing->id, first->id);
}

TEST_F(SessionRegistryTest, LingeringSessionsAreTakenOnce) {
  registry_.AddLingering(5);
  registry_.AddLingering(6);
  EXPECT_TRUE(registry_.TakeLingering(5));
  EXPECT_FALSE(registry_.TakeLingering(5));
  EXPECT_EQ(registry_.TakeAllLingering(), std::vector<uint64_t>{6});
}

// Many registrations and ends at once: every published session is found, ids are unique.
TEST_F(SessionRegistryTest, ConcurrentRegistrationsAndEndsKeepTheRegistryWhole) {
  SessionRegistry registry(1, 1000);
  std::vector<std::thread> threads;
  std::atomic<int> published{0};
  for (int t = 0; t < 8; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 200; ++i) {
        const PeerCredentials creds{t * 1000 + i + 1, 1000u + t, 1000u + t};
        absl::StatusOr<SessionRegistry::Reservation> r = registry.Reserve(creds, false);
        ASSERT_TRUE(r.ok());
        if (i % 3 == 0) registry.End(r->id);  // ended before publish: fails
        if (registry.Publish(InfoOf(r->id, creds, "t")).ok()) ++published;
        if (i % 2 == 0) registry.End(r->id);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  const std::vector<SessionInfo> left = registry.List();
  int expected = 0;
  for (int i = 0; i < 200; ++i) expected += (i % 3 != 0) && (i % 2 != 0);
  EXPECT_EQ(static_cast<int>(left.size()), 8 * expected);
  EXPECT_EQ(published, 8 * (200 - 67));
  for (size_t i = 1; i < left.size(); ++i) EXPECT_LT(left[i - 1].id, left[i].id);
}

}  // namespace
}  // namespace missile::daemon
