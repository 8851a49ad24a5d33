// The daemon's side channel: a second Unix socket on which tenants fetch file descriptors (VRAM
// blocks, their copy channel, their pacing page), which gRPC cannot carry. A peer of RpcServer:
// it owns its socket and the wire protocol (common/include/missile/common/fd_passing.h,
// version 2) and translates each request into a DaemonCore call.
//
// A connection starts with a Hello naming a session; it is accepted only if the connection's
// SO_PEERCRED pid owns the session and the token matches; a session's new connection replaces
// its old one (a shim that gave up on a stalled daemon and registered again). Each later request
// gets one Reply, with the descriptors attached when its status is OK. A connection that closes
// or breaks does not end its session (only the process's exit does: DaemonCore); its copy
// channels close, so the next connection can open them again.
//
// One thread serves every connection with epoll, so idle connections cost a descriptor each and
// no thread. The limits in limits.h apply: a connection that does not greet within
// kSideHandshakeTimeout, or leaves a request half-sent for kSideMessageTimeout, is closed; each
// uid may hold max_per_uid connections (administrators: any number). Accept failures from exhausted
// descriptors or memory pause accepting for kAcceptBackoff and never stop the loop.
// Replies are sent without blocking: a peer that sends requests without reading the replies
// until its socket buffer is full has its connection closed.
// Thread-safety: Start and Shutdown are called from one thread (the daemon's main thread); all
// connection state belongs to the serving thread.
#ifndef MISSILE_DAEMON_SIDE_CHANNEL_SERVER_H_
#define MISSILE_DAEMON_SIDE_CHANNEL_SERVER_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <deque>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "core.h"
#include "daemon_limits.h"
#include "log_limiter.h"
#include "missile/common/fd_passing.h"

namespace missile::daemon {

class SideChannelServer {
 public:
  // `max_per_uid`: connections one uid may hold open (limits.max_side_connections_per_uid);
  // root and the admin group are not held to it nor to kMaxSideConnections.
  explicit SideChannelServer(DaemonCore* core,
                             size_t max_per_uid = limits::kMaxSideConnectionsPerUid);
  ~SideChannelServer();
  SideChannelServer(const SideChannelServer&) = delete;
  SideChannelServer& operator=(const SideChannelServer&) = delete;

  // Listens on `path` (created with `mode`, group `gid` if given) and serves until Shutdown.
  absl::Status Start(const std::string& path, unsigned mode, std::optional<unsigned> gid);
  // Stops accepting, closes every connection (DaemonCore::Stop ends the sessions), waits for the serving
  // thread and removes the socket. Idempotent.
  void Shutdown();

 private:
  using Clock = std::chrono::steady_clock;
  struct Conn {
    int fd = -1;
    uint64_t serial = 0;  // tells a connection from a later one on the same descriptor
    PeerCredentials creds;
    uint64_t session = 0;  // 0 until the hello is accepted
    Clock::time_point accepted;
    // Set while a message is incomplete (the hello, or a request that started arriving).
    std::optional<Clock::time_point> deadline;
    size_t got = 0;  // bytes of the current message received so far
    alignas(fdpass::FetchRequest) unsigned char buf[sizeof(fdpass::FetchRequest)];
  };

  void Loop();
  void AcceptReady();
  // Reads what has arrived on `c` and answers complete messages; false once `c` was closed.
  bool OnReadable(Conn* c);
  void OnHello(Conn* c, const fdpass::Hello& hello);
  void OnRequest(Conn* c, const fdpass::FetchRequest& req);
  // Closes the connection; an accepted session is told with `reason` (nullptr: tells nothing).
  void Close(Conn* c, const char* reason);
  void ExpireDeadlines(Clock::time_point now);
  void PauseAccepting(Clock::time_point now);
  // Reads and checks the hello; the session it names, or why it was refused.
  absl::StatusOr<uint64_t> Greet(const Conn& c, const fdpass::Hello& hello);
  // The descriptors that answer one request (the caller sends and closes them).
  absl::StatusOr<std::vector<int>> Answer(const PeerCredentials& creds, uint64_t session,
                                          const fdpass::FetchRequest& req);
  void Refused(const PeerCredentials& creds, const std::string& why);

  DaemonCore* const core_;
  const size_t max_per_uid_;
  std::string path_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;  // eventfd: Shutdown wakes the loop
  std::atomic<bool> stopping_{false};
  std::thread loop_;

  // Owned by the loop thread.
  absl::flat_hash_map<int, std::unique_ptr<Conn>> conns_;
  absl::flat_hash_map<unsigned, size_t> per_uid_;
  absl::flat_hash_map<uint64_t, int> greeted_sessions_;  // session -> its connection's descriptor
  // {descriptor, serial} of ungreeted connections, oldest first; entries of connections that
  // greeted or closed since are skipped.
  std::deque<std::pair<int, uint64_t>> pending_;
  size_t pending_count_ = 0;
  uint64_t next_serial_ = 1;
  std::optional<Clock::time_point> accept_paused_until_;
  LogLimiter refusals_log_;
  LogLimiter accept_log_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_SIDE_CHANNEL_SERVER_H_
