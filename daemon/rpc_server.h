// The daemon's gRPC face: the Tenant and Admin services of missile.v1 on one Unix socket, each
// call attributed to the process on the other end by the kernel (SO_PEERCRED).
//
// gRPC does not expose a connection's peer credentials, so the daemon accepts connections
// itself: it reads SO_PEERCRED, moves the descriptor to a number not recently used (so numbers
// are not recycled between connections), records the credentials under that number and hands
// the connection to gRPC (AddInsecureChannelFromFd), whose calls then report their peer as
// "fd:<number>". The services only translate protobuf to DaemonCore calls.
// Owning the accept is also what lets the daemon limit connections per uid: gRPC's own accept
// path knows no uid and offers no hook before a connection costs a descriptor and a transport,
// while here a connection over a cap (PeerRegistry::Admit) is closed before gRPC ever sees it,
// and connections that never register a session are shut down after limits.idle_timeout_ms.
// Thread-safety: RpcServer's methods are called from the main thread; the services run on
// gRPC's threads.
#ifndef MISSILE_DAEMON_RPC_SERVER_H_
#define MISSILE_DAEMON_RPC_SERVER_H_

#include <grpcpp/grpcpp.h>

#include <atomic>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "core.h"
#include "log_limiter.h"
#include "missile/v1/missile.grpc.pb.h"
#include "peer_registry.h"

namespace missile::daemon {

// RpcServer's limits on connections (docs/operations.md, "Limits and timeouts").
struct RpcServerOptions {
  ConnectionLimits connections;
  // Non-admin connections are refused while the lowest free descriptor number is within this
  // many (at most a quarter) of the descriptor limit, so root's missilectl gets through.
  size_t admin_reserve_fds = 1024;
};

class RpcServer {
 public:
  explicit RpcServer(DaemonCore* core, RpcServerOptions options = {});
  ~RpcServer();

  // Listens on `path` (created with `mode`, group `gid` if given) and serves until Shutdown.
  absl::Status Start(const std::string& path, unsigned mode, std::optional<unsigned> gid);
  void Shutdown();

 private:
  void AcceptLoop();
  // Whether the accepted connection `fd` (lowest free number: `accepted_number`) may stay; logs
  // a refusal (rate-limited).
  bool Admit(int fd, int accepted_number, int descriptor_limit, const PeerCredentials& creds);

  DaemonCore* core_;
  const RpcServerOptions options_;
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
  LogLimiter refuse_log_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_RPC_SERVER_H_
