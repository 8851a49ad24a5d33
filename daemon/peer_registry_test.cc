#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "rpc_server.h"

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

}  // namespace
}  // namespace missile::daemon
