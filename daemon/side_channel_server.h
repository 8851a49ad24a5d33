// The daemon's side channel: a second Unix socket on which tenants fetch file descriptors (VRAM
// blocks, their copy channel, their pacing page), which gRPC cannot carry. A peer of RpcServer:
// it owns its socket and the wire protocol (common/include/missile/common/fd_passing.h,
// version 2) and translates each request into a DaemonCore call.
//
// A connection starts with a Hello naming a session; it is accepted only if the connection's
// SO_PEERCRED pid owns the session and the token matches. Each later request gets one Reply, with
// the descriptors attached when its status is OK. A connection that closes or breaks ends its
// session.
// Thread-safety: Start and Shutdown are called from one thread (the daemon's main thread); each
// connection is served by a thread of its own.
#ifndef MISSILE_DAEMON_SIDE_CHANNEL_SERVER_H_
#define MISSILE_DAEMON_SIDE_CHANNEL_SERVER_H_

#include <atomic>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "core.h"
#include "missile/common/fd_passing.h"

namespace missile::daemon {

class SideChannelServer {
 public:
  explicit SideChannelServer(DaemonCore* core) : core_(core) {}
  ~SideChannelServer();
  SideChannelServer(const SideChannelServer&) = delete;
  SideChannelServer& operator=(const SideChannelServer&) = delete;

  // Listens on `path` (created with `mode`, group `gid` if given) and serves until Shutdown.
  absl::Status Start(const std::string& path, unsigned mode, std::optional<unsigned> gid);
  // Stops accepting, closes every connection (ending their sessions), waits for their threads
  // and removes the socket. Idempotent.
  void Shutdown();

 private:
  void AcceptLoop();
  void Serve(int sock);
  // Reads and checks the hello; the session it names, or why it was refused.
  absl::StatusOr<uint64_t> Greet(int sock, PeerCredentials* creds);
  // The descriptors that answer one request (the caller sends and closes them).
  absl::StatusOr<std::vector<int>> Answer(const PeerCredentials& creds, uint64_t session,
                                          const fdpass::FetchRequest& req);

  DaemonCore* const core_;
  std::string path_;
  int listen_fd_ = -1;
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  // Connections are served by detached threads, counted so Shutdown can wait for them.
  absl::Mutex mu_;
  std::vector<int> socks_ ABSL_GUARDED_BY(mu_);
  int threads_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_SIDE_CHANNEL_SERVER_H_
