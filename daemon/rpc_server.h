// The daemon's gRPC face: the Tenant and Admin services of missile.v1 on one Unix socket, each
// call attributed to the process on the other end by the kernel (SO_PEERCRED).
//
// gRPC does not expose a connection's peer credentials, so the daemon accepts connections
// itself: it reads SO_PEERCRED, moves the descriptor to a number not recently used (so numbers
// are not recycled between connections), records the credentials under that number and hands
// the connection to gRPC (AddInsecureChannelFromFd), whose calls then report their peer as
// "fd:<number>". The services only translate protobuf to DaemonCore calls.
// Thread-safety: RpcServer's methods are called from the main thread; the services run on
// gRPC's threads.
#ifndef MISSILE_DAEMON_RPC_SERVER_H_
#define MISSILE_DAEMON_RPC_SERVER_H_

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/synchronization/mutex.h"
#include "core.h"
#include "log_limiter.h"
#include "missile/v1/missile.grpc.pb.h"

namespace missile::daemon {

// The peer credentials of each accepted connection, by descriptor number. An entry also holds
// the socket's inode at accept: once that descriptor is closed (or its number reused by another
// socket) the entry is stale, is never returned, and is dropped (at lookup, and in sweeps as
// connections are recorded), so the map does not grow with every connection ever accepted.
// Thread-safety: any thread.
class PeerRegistry {
 public:
  void Record(int fd, const PeerCredentials& creds);
  // The credentials behind a gRPC peer string ("fd:12"), if that connection is still open.
  std::optional<PeerCredentials> Lookup(const std::string& peer);
  size_t size() const;

 private:
  struct Entry {
    PeerCredentials creds;
    dev_t dev = 0;
    ino_t ino = 0;
  };
  static bool StillOpen(int fd, const Entry& entry);

  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Entry> by_fd_ ABSL_GUARDED_BY(mu_);
  size_t next_sweep_ ABSL_GUARDED_BY(mu_) = 64;
};

class RpcServer {
 public:
  explicit RpcServer(DaemonCore* core);
  ~RpcServer();

  // Listens on `path` (created with `mode`, group `gid` if given) and serves until Shutdown.
  absl::Status Start(const std::string& path, unsigned mode, std::optional<unsigned> gid);
  void Shutdown();

 private:
  void AcceptLoop();

  DaemonCore* core_;
  PeerRegistry peers_;
  std::unique_ptr<grpc::Service> tenant_service_;
  std::unique_ptr<grpc::Service> admin_service_;
  std::unique_ptr<grpc::Server> server_;
  std::string path_;
  int listen_fd_ = -1;
  std::atomic<int> next_fd_{256};
  std::atomic<bool> stopping_{false};
  std::thread acceptor_;
  LogLimiter accept_log_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_RPC_SERVER_H_
