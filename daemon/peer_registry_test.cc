#include <sys/socket.h>
#include <unistd.h>

#include <poll.h>

#include <chrono>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "peer_registry.h"

namespace missile::daemon {
namespace {

TEST(PeerRegistryTest, AClosedOrReusedDescriptorIsNotTheRecordedPeer) {
  PeerRegistry peers;
  int pair[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
  const int fd = pair[0];
  peers.Record(fd, PeerCredentials{4242, 1000, 1000});
  const std::string peer = "fd:" + std::to_string(fd);
  ASSERT_TRUE(peers.Lookup(peer).has_value());
  EXPECT_EQ(peers.Lookup(peer)->uid, 1000u);

  // The connection closes and its number goes to another socket: not the same peer.
  close(fd);
  int again[2];
  ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, again), 0);
  ASSERT_EQ(again[0], fd);
  EXPECT_FALSE(peers.Lookup(peer).has_value());
  EXPECT_EQ(peers.size(), 0u) << "the stale entry is dropped";
  close(pair[1]);
  close(again[0]);
  close(again[1]);
}

TEST(PeerRegistryTest, ClosedConnectionsDoNotAccumulate) {
  PeerRegistry peers;
  for (int i = 0; i < 10000; ++i) {
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    peers.Record(pair[0], PeerCredentials{4242, 1000, 1000});
    close(pair[0]);
    close(pair[1]);
  }
  EXPECT_LE(peers.size(), 128u);
}

// A socket pair: `ours` as the daemon's accepted connection, `theirs` as the client's end.
struct Conn {
  int ours = -1;
  int theirs = -1;
  Conn() {
    int pair[2];
    EXPECT_EQ(socketpair(AF_UNIX, SOCK_STREAM, 0, pair), 0);
    ours = pair[0];
    theirs = pair[1];
  }
  ~Conn() {
    if (ours >= 0) close(ours);
    if (theirs >= 0) close(theirs);
  }
  // Whether the client's end reads end of stream (the daemon's end was shut down or closed).
  bool ClosedForClient() const {
    pollfd p{theirs, POLLIN, 0};
    char c;
    return poll(&p, 1, 0) > 0 && recv(theirs, &c, 1, MSG_DONTWAIT) == 0;
  }
};

ConnectionLimits Limits(size_t per_uid, size_t total, int idle_ms = 10000) {
  ConnectionLimits l;
  l.per_uid = per_uid;
  l.total = total;
  l.idle_timeout = std::chrono::milliseconds(idle_ms);
  return l;
}

const auto kNever = [] { return false; };
const auto kAlways = [] { return true; };

TEST(PeerRegistryLimitsTest, AUidPastItsCapIsRefusedAndOthersAreNot) {
  PeerRegistry peers(Limits(3, 100));
  std::vector<Conn> conns(6);
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(peers.Admit(conns[i].ours, PeerCredentials{100 + i, 1000, 1000}, kNever).ok());
  }
  absl::Status refused = peers.Admit(conns[3].ours, PeerCredentials{103, 1000, 1000}, kNever);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_connections_per_uid"), std::string::npos);
  EXPECT_EQ(peers.OpenOf(1000), 3u);
  // Another uid is not held to uid 1000's count; an administrator is not held to any cap.
  EXPECT_TRUE(peers.Admit(conns[4].ours, PeerCredentials{104, 1001, 1001}, kNever).ok());
  EXPECT_TRUE(peers.Admit(conns[5].ours, PeerCredentials{105, 1000, 1000}, kAlways).ok());
  EXPECT_EQ(peers.OpenOf(1000), 4u);
}

TEST(PeerRegistryLimitsTest, AClosedConnectionGivesItsPlaceBack) {
  PeerRegistry peers(Limits(2, 100));
  Conn a, b, c;
  ASSERT_TRUE(peers.Admit(a.ours, PeerCredentials{1, 1000, 1000}, kNever).ok());
  ASSERT_TRUE(peers.Admit(b.ours, PeerCredentials{2, 1000, 1000}, kNever).ok());
  ASSERT_FALSE(peers.Admit(c.ours, PeerCredentials{3, 1000, 1000}, kNever).ok());
  close(a.ours);  // as gRPC closes a connection: without telling the registry
  a.ours = -1;
  EXPECT_TRUE(peers.Admit(c.ours, PeerCredentials{3, 1000, 1000}, kNever).ok());
  EXPECT_EQ(peers.OpenOf(1000), 2u);
}

TEST(PeerRegistryLimitsTest, TheTotalCapHoldsAcrossUids) {
  PeerRegistry peers(Limits(10, 4));
  std::vector<Conn> conns(6);
  for (int i = 0; i < 4; ++i) {
    ASSERT_TRUE(peers.Admit(conns[i].ours, PeerCredentials{i + 1, 2000u + i, 0}, kNever).ok());
  }
  absl::Status refused = peers.Admit(conns[4].ours, PeerCredentials{9, 3000, 0}, kNever);
  EXPECT_EQ(refused.code(), absl::StatusCode::kResourceExhausted);
  EXPECT_NE(refused.message().find("max_connections"), std::string::npos);
  EXPECT_TRUE(peers.Admit(conns[5].ours, PeerCredentials{10, 0, 0}, kAlways).ok());
  EXPECT_EQ(peers.OpenTotal(), 5u);
}

TEST(PeerRegistryLimitsTest, IdleConnectionsWithoutASessionAreShutDown) {
  PeerRegistry peers(Limits(64, 4096, 1000));
  Conn idle, busy, tenant;
  ASSERT_TRUE(peers.Admit(idle.ours, PeerCredentials{1, 1000, 1000}, kNever).ok());
  ASSERT_TRUE(peers.Admit(busy.ours, PeerCredentials{2, 1000, 1000}, kNever).ok());
  ASSERT_TRUE(peers.Admit(tenant.ours, PeerCredentials{3, 1000, 1000}, kNever).ok());
  peers.MarkSession("fd:" + std::to_string(tenant.ours));
  const auto now = PeerRegistry::Clock::now();
  EXPECT_EQ(peers.ExpireIdle(now + std::chrono::milliseconds(500)), 0u);
  // A call 300 ms after `now`: at now + 1200 ms that connection has been quiet for 900 ms.
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  ASSERT_TRUE(peers.Lookup("ipv4:fd%3A" + std::to_string(busy.ours)).has_value());
  EXPECT_EQ(peers.ExpireIdle(now + std::chrono::milliseconds(1200)), 1u);
  EXPECT_TRUE(idle.ClosedForClient());
  EXPECT_FALSE(busy.ClosedForClient());
  EXPECT_FALSE(tenant.ClosedForClient());
  // Later, the call-less connection goes too; the one with a session never does.
  EXPECT_EQ(peers.ExpireIdle(now + std::chrono::hours(1)), 1u);
  EXPECT_TRUE(busy.ClosedForClient());
  EXPECT_FALSE(tenant.ClosedForClient());
}

}  // namespace
}  // namespace missile::daemon
