#include "rpc_server.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <poll.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "daemon_limits.h"
#include "logger.h"
#include "rpc_handlers.h"
#include "spdlog/spdlog.h"

namespace missile::daemon {
namespace {

namespace v1 = ::missile::v1;

using rpc::FillUsage;
using rpc::ToGrpc;
using rpc::ToProto;

// One Watch stream, served without a thread: DaemonCore calls OnChange when the session's policy
// changes or it ends, and the reactor writes the session's state (one write in flight at a
// time; changes during a write are folded into the next one). A stream that breaks or is
// cancelled only drops its watcher: the session ends when its process exits (DaemonCore), since
// a stream also breaks when the daemon stalls while the process still maps its blocks.
// Thread-safety: OnChange runs on the thread that changed the session, the reactions on gRPC's
// threads; mu_ orders them. Finish is the last thing any path does with the reactor, since OnDone
// (which deletes it) may follow at once on another thread.
class WatchReactor final : public grpc::ServerWriteReactor<v1::SessionEvent> {
 public:
  WatchReactor(DaemonCore* core, std::optional<PeerCredentials> creds, uint64_t session,
               grpc::Status refused)
      : core_(core), session_(session) {
    if (!refused.ok()) {
      Finish(refused);
      return;
    }
    creds_ = *creds;
    absl::StatusOr<uint64_t> id = core_->AddWatcher(creds_, session_,
                                                    limits::kMaxWatchStreamsPerSession,
                                                    [this] { OnChange(); });
    if (!id.ok()) {
      Finish(ToGrpc(id.status()));
      return;
    }
    {
      absl::MutexLock lock(&mu_);
      watcher_ = *id;
    }
    OnChange();  // the first event: the session as it is
  }

  void OnWriteDone(bool ok) override {
    mu_.Lock();
    writing_ = false;
    if (finished_) {
      mu_.Unlock();
      return;
    }
    if (ok && dirty_) {
      dirty_ = false;
      std::optional<grpc::Status> finish = WriteLocked();
      mu_.Unlock();
      if (finish) Finish(*finish);
      return;
    }
    if (ok) {
      mu_.Unlock();
      return;
    }
    finished_ = true;
    uint64_t watcher = watcher_;
    mu_.Unlock();
    Stop(watcher);
    Finish(grpc::Status::CANCELLED);
  }

  void OnCancel() override {
    mu_.Lock();
    if (finished_) {
      mu_.Unlock();
      return;
    }
    finished_ = true;
    uint64_t watcher = watcher_;
    mu_.Unlock();
    Stop(watcher);
    Finish(grpc::Status::CANCELLED);
  }

  void OnDone() override { delete this; }

 private:
  void OnChange() {
    mu_.Lock();
    if (finished_) {
      mu_.Unlock();
      return;
    }
    if (writing_) {
      dirty_ = true;
      mu_.Unlock();
      return;
    }
    std::optional<grpc::Status> finish = WriteLocked();
    mu_.Unlock();
    if (finish) Finish(*finish);
  }

  // Starts a write of the session's state; the status to finish with instead once it ended.
  std::optional<grpc::Status> WriteLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    absl::StatusOr<SessionInfo> info = core_->GetSession(creds_, session_);
    if (!info.ok() || info->ended) {
      // Ended: DaemonCore drops the watcher itself after the end call.
      finished_ = true;
      return grpc::Status::OK;
    }
    event_.Clear();
    event_.set_tenant_class(ToProto(info->cls));
    event_.set_priority(info->priority);
    event_.set_weight(info->weight);
    for (size_t g = 0; g < core_->gpus().size(); ++g) {
      auto usage = core_->GetUsage(creds_, session_, static_cast<uint32_t>(g));
      if (usage.ok()) FillUsage(static_cast<uint32_t>(g), *usage, event_.add_usage());
    }
    writing_ = true;
    StartWrite(&event_);
    return std::nullopt;
  }

  // Unregisters, so OnChange is not running and never runs again. The session goes on.
  void Stop(uint64_t watcher) {
    if (watcher != 0) core_->RemoveWatcher(session_, watcher);
  }

  DaemonCore* const core_;
  const uint64_t session_;
  PeerCredentials creds_;
  absl::Mutex mu_;
  uint64_t watcher_ ABSL_GUARDED_BY(mu_) = 0;
  bool writing_ ABSL_GUARDED_BY(mu_) = false;
  bool dirty_ ABSL_GUARDED_BY(mu_) = false;
  bool finished_ ABSL_GUARDED_BY(mu_) = false;
  v1::SessionEvent event_ ABSL_GUARDED_BY(mu_);
};

class TenantService final : public v1::Tenant::WithCallbackMethod_Watch<v1::Tenant::Service> {
 public:
  TenantService(DaemonCore* core, PeerRegistry* peers) : core_(core), peers_(peers) {}

  grpc::Status Register(grpc::ServerContext* ctx, const v1::RegisterRequest* req,
                        v1::RegisterResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown(ctx);
    grpc::Status status = rpc::Register(core_, *creds, *req, resp);
    if (status.ok()) peers_->MarkSession(ctx->peer());
    return status;
  }

  grpc::Status Allocate(grpc::ServerContext* ctx, const v1::AllocateRequest* req,
                        v1::AllocateResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown(ctx);
    return rpc::Allocate(core_, *creds, *req, resp);
  }

  grpc::Status Free(grpc::ServerContext* ctx, const v1::FreeRequest* req,
                    v1::FreeResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown(ctx);
    return rpc::Free(core_, *creds, *req, resp);
  }

  grpc::Status GetUsage(grpc::ServerContext* ctx, const v1::GetUsageRequest* req,
                        v1::Usage* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown(ctx);
    return rpc::GetUsage(core_, *creds, *req, resp);
  }

  grpc::ServerWriteReactor<v1::SessionEvent>* Watch(grpc::CallbackServerContext* ctx,
                                                     const v1::WatchRequest* req) override {
    auto creds = peers_->Lookup(ctx->peer());
    // A stream of a live session of this process keeps the connection (a shim's channel may
    // reconnect and carry only its Watch stream, which makes no further calls).
    if (creds && core_->GetSession(*creds, req->session_id()).ok()) {
      peers_->MarkSession(ctx->peer());
    }
    return new WatchReactor(core_, creds, req->session_id(), creds ? grpc::Status::OK : Unknown(ctx));
  }

 private:
  static grpc::Status Unknown(grpc::ServerContextBase* ctx) {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED,
                        "cannot identify the calling process (peer " + ctx->peer() + ")");
  }

  DaemonCore* core_;
  PeerRegistry* peers_;
};

class AdminService final : public v1::Admin::Service {
 public:
  AdminService(DaemonCore* core, PeerRegistry* peers) : core_(core), peers_(peers) {}

  // Status and ListTenants need no caller; the lookup only counts as the connection's
  // activity (see PeerRegistry::ExpireIdle).
  grpc::Status Status(grpc::ServerContext* ctx, const v1::StatusRequest*,
                      v1::StatusResponse* resp) override {
    peers_->Lookup(ctx->peer());
    return rpc::Status(core_, resp);
  }

  grpc::Status ListTenants(grpc::ServerContext* ctx, const v1::ListTenantsRequest*,
                           v1::ListTenantsResponse* resp) override {
    peers_->Lookup(ctx->peer());
    return rpc::ListTenants(core_, resp);
  }

  grpc::Status SetPolicy(grpc::ServerContext* ctx, const v1::SetPolicyRequest* req,
                         v1::SetPolicyResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown();
    return rpc::SetPolicy(core_, *creds, *req, resp);
  }

  grpc::Status SetPacing(grpc::ServerContext* ctx, const v1::SetPacingRequest* req,
                         v1::SetPacingResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown();
    return rpc::SetPacing(core_, *creds, *req, resp);
  }

 private:
  static grpc::Status Unknown() {
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "cannot identify the caller");
  }

  DaemonCore* core_;
  PeerRegistry* peers_;
};

}  // namespace

RpcServer::RpcServer(DaemonCore* core, RpcServerOptions options)
    : core_(core),
      options_(options),
      peers_(options.connections),
      accept_log_(limits::kLogInterval),
      refuse_log_(limits::kLogInterval) {}

RpcServer::~RpcServer() { Shutdown(); }

absl::Status RpcServer::Start(const std::string& path, unsigned mode, std::optional<unsigned> gid) {
  path_ = path;
  if (absl::Status s = fdpass::ListenUnix(path, mode, &listen_fd_, gid); !s.ok()) return s;
  tenant_service_ = std::make_unique<TenantService>(core_, &peers_);
  admin_service_ = std::make_unique<AdminService>(core_, &peers_);
  grpc::ServerBuilder builder;
  builder.RegisterService(tenant_service_.get());
  builder.RegisterService(admin_service_.get());
  builder.SetMaxReceiveMessageSize(4 << 20);
  // Bounds the threads that serve unary calls; Watch streams hold none (WatchReactor).
  grpc::ResourceQuota quota("missiled");
  quota.SetMaxThreads(limits::kMaxRpcThreads);
  builder.SetResourceQuota(quota);
  // The shims ping every second on their Watch stream to notice a stopped daemon
  // (libintercept/daemon_client.cc); without these gRPC would answer such pings with GOAWAY
  // ("too many pings") and end every session.
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MIN_RECV_PING_INTERVAL_WITHOUT_DATA_MS, 500);
  builder.AddChannelArgument(GRPC_ARG_HTTP2_MAX_PING_STRIKES, 0);
  builder.AddChannelArgument(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  server_ = builder.BuildAndStart();
  if (!server_) return absl::InternalError("gRPC server failed to start");
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

bool RpcServer::Admit(int fd, int accepted_number, int descriptor_limit,
                      const PeerCredentials& creds) {
  // Asked only at a limit: it may read the group database.
  auto is_admin = [&] { return core_->IsAdmin(creds); };
  absl::Status admitted;
  // accept4 returns the lowest free number: at or above this, fewer than admin_reserve_fds
  // descriptors are free, and what is left is for the administrators. At most a quarter of the
  // limit, so that a daemon started under a small limit (by hand, with a hard limit of 1024)
  // still serves tenants; missiled warns at start when the limit is that small.
  const int reserve =
      static_cast<int>(std::min<size_t>(options_.admin_reserve_fds, descriptor_limit / 4));
  const int reserve_line = descriptor_limit - reserve;
  if (accepted_number >= reserve_line && !is_admin()) {
    admitted = absl::ResourceExhaustedError("descriptors low: the rest is kept for "
                                            "administrators (limits.admin_reserve_fds)");
  } else {
    admitted = peers_.Admit(fd, creds, is_admin);
  }
  if (admitted.ok()) return true;
  uint64_t suppressed = 0;
  if (refuse_log_.Allow(&suppressed)) {
    GetLogger(kRpcLog)->warn("connection from pid {} (uid {}) refused: {} ({} more refused since "
                             "the last warning)", creds.pid, creds.uid,
                             std::string(admitted.message()), suppressed);
  }
  return false;
}

// The descriptor limit in force, read at each accept: an operator may change it (prlimit).
static int DescriptorLimit() {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  return static_cast<int>(std::min<rlim_t>(lim.rlim_cur, 1 << 20));
}

void RpcServer::AcceptLoop() {
  auto next_expiry = std::chrono::steady_clock::now();
  while (!stopping_) {
    // Wakes at least every 250 ms to close idle connections (PeerRegistry::ExpireIdle).
    const auto now = std::chrono::steady_clock::now();
    if (now >= next_expiry) {
      peers_.ExpireIdle(now);
      next_expiry = now + std::chrono::milliseconds(250);
    }
    pollfd p{listen_fd_, POLLIN, 0};
    if (poll(&p, 1, 250) <= 0) continue;
    // gRPC drives the connection with its event engine: the descriptor must be non-blocking.
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (stopping_) break;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO || err == EAGAIN) continue;
      // Whatever failed (descriptors, memory), the loop goes on after a pause: a server that
      // stopped accepting would leave every later tenant and missilectl without an answer.
      uint64_t suppressed = 0;
      if (accept_log_.Allow(&suppressed)) {
        GetLogger(kRpcLog)->warn("accept failed: {}; retrying in {} ms ({} more since the last "
                                 "warning)", strerror(err),
                                 std::chrono::milliseconds(limits::kAcceptBackoff).count(),
                                 suppressed);
      }
      std::this_thread::sleep_for(limits::kAcceptBackoff);
      continue;
    }
    PeerCredentials creds;
    if (!fdpass::GetPeerCredentials(fd, &creds).ok()) {
      close(fd);
      continue;
    }
    const int accepted_number = fd;
    const int limit = DescriptorLimit();
    const int top = limit - 64;
    // Move to a number that has not been used recently, so a closed connection's number is not
    // reused (and its credentials mistaken) while a call of it may still be looked up.
    int start = next_fd_.fetch_add(1);
    if (start >= top) {
      next_fd_ = 256;
      start = 256;
    }
    int moved = fcntl(fd, F_DUPFD_CLOEXEC, start);
    if (moved >= 0) {
      close(fd);
      fd = moved;
      next_fd_ = fd + 1;
    }
    if (!Admit(fd, accepted_number, limit, creds)) {
      close(fd);
      continue;
    }
    grpc::AddInsecureChannelFromFd(server_.get(), fd);
  }
}

void RpcServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
    listen_fd_ = -1;
  }
}

}  // namespace missile::daemon
