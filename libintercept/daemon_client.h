// The shim's connection to missiled: the gRPC Tenant service for control, the side channel for
// the descriptors of VRAM blocks, and a Watch stream that keeps the session alive and carries
// policy changes.
//
// Connect registers the process (name, class and quota from the environment, see config.h),
// opens the side channel with the session's secret token and starts the watch thread.
// Allocate leases blocks and fetches their descriptors (the caller imports and closes them).
// It implements SessionClient (session_client.h), the interface the rest of the shim uses.
// Every call is bounded by the tenant's timeout (TenantIdentity::timeout_ms): each RPC has that
// deadline, each side-channel read and write that timeout, and the channel's keepalive pings
// must be answered within it. A daemon that misses it is treated as gone: this client ends
// (connected() turns false, its side channel closes) and the shim follows MISSILE_NO_DAEMON.
// The daemon keeps the session while the process lives; SessionManager registers again, into
// the same session, once the daemon answers.
// Thread-safety: every method may be called from any thread; the side channel is used under a
// mutex, one request-reply at a time.
#ifndef MISSILE_LIBINTERCEPT_DAEMON_CLIENT_H_
#define MISSILE_LIBINTERCEPT_DAEMON_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "missile/common/fd_passing.h"
#include "session_client.h"

namespace grpc {
class ClientContext;
class Status;
}  // namespace grpc

namespace missile::shim {

class DaemonClient final : public SessionClient {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Connect(const TenantIdentity& who);
  ~DaemonClient() override;

  const std::vector<GpuLink>& gpus() const override { return gpus_; }
  uint64_t session_id() const override { return session_id_; }
  const std::string& instance() const override { return instance_; }

  absl::StatusOr<std::vector<BlockLease>> Allocate(uint32_t gpu, bool single,
                                                   uint64_t bytes) override;
  absl::Status Free(uint32_t gpu, const std::vector<uint64_t>& block_ids) override;
  absl::StatusOr<TenantUsage> Usage(uint32_t gpu) override;
  absl::StatusOr<std::pair<int, int>> OpenCopyChannel(uint32_t gpu) override;
  absl::StatusOr<std::pair<int, int>> OpenPacing(uint32_t gpu) override;
  absl::StatusOr<int> OpenPeerLanes(uint32_t gpu, uint32_t slot, uint64_t epoch) override;

  // Once false, calls fail without sending anything: the gRPC channel would reach a restarted
  // daemon, which never knew this session.
  bool connected() const override { return connected_.load(std::memory_order_acquire); }
  bool AwaitEnd(absl::Duration limit) const override;

 private:
  // Sends the side-channel request `req` and returns the `descriptors` descriptors of
  // the reply (the caller's to close); `what` names the object in errors.
  absl::StatusOr<std::vector<int>> OpenOnSideChannel(const fdpass::FetchRequest& req,
                                                     size_t descriptors, const char* what);
  struct Rpc;  // gRPC channel and stub, kept out of this header
  explicit DaemonClient(int timeout_ms);
  absl::Status FetchDescriptors(uint32_t gpu, std::vector<BlockLease>* leases);
  void WatchLoop();
  void SetDeadline(grpc::ClientContext* ctx) const;
  // The call's status as an absl::Status naming `what`; a deadline missed or a daemon gone
  // also ends the session (Abandon).
  absl::Status Checked(const grpc::Status& s, const std::string& what);
  // `s` from a side-channel exchange; a timeout, a closed or a garbled channel also closes the
  // channel and ends the session.
  absl::Status SideFailed(absl::Status s) ABSL_EXCLUSIVE_LOCKS_REQUIRED(side_mu_);
  // Treats the daemon as gone: connected() turns false and the Watch stream is cancelled.
  void Abandon();

  std::unique_ptr<Rpc> rpc_;
  const int timeout_ms_;
  uint64_t session_id_ = 0;
  std::string instance_;
  std::vector<GpuLink> gpus_;
  absl::Mutex side_mu_;
  int side_fd_ ABSL_GUARDED_BY(side_mu_) = -1;
  std::atomic<bool> connected_{false};
  std::thread watcher_;
};

// Opens DaemonClient sessions on the daemon's Unix socket.
class DaemonConnector final : public SessionConnector {
 public:
  bool SocketExists(const std::string& path) override;
  bool Listening(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<SessionClient>> Connect(const TenantIdentity& who) override;
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_DAEMON_CLIENT_H_
