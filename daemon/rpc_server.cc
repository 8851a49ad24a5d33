#include "rpc_server.h"

#include <fcntl.h>
#include <grpcpp/server_posix.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "daemon_limits.h"
#include "logger.h"
#include "missile/pcie_sched/fair_scheduler.h"
#include "spdlog/spdlog.h"

namespace missile::daemon {
namespace {

namespace v1 = ::missile::v1;

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

v1::TenantClass ToProto(TenantClass cls) {
  return cls == TenantClass::kLatencySensitive ? v1::LATENCY_SENSITIVE : v1::BEST_EFFORT;
}

absl::StatusOr<TenantClass> FromProto(v1::TenantClass cls) {
  switch (cls) {
    case v1::LATENCY_SENSITIVE: return TenantClass::kLatencySensitive;
    case v1::BEST_EFFORT: return TenantClass::kBestEffort;
    default: return absl::InvalidArgumentError("tenant class must be LATENCY_SENSITIVE or BEST_EFFORT");
  }
}

void FillUsage(uint32_t gpu, const Usage& u, v1::Usage* out) {
  out->set_gpu_index(gpu);
  out->set_quota_bytes(u.quota_bytes);
  out->set_used_bytes(u.used_bytes);
  out->set_available_bytes(u.available_bytes);
}

void FillGpu(uint32_t index, const Gpu& gpu, v1::GpuInfo* out) {
  const DeviceInfo& info = gpu.info;
  out->set_index(index);
  out->set_uuid(info.uuid);
  out->set_name(info.name);
  out->set_total_bytes(info.total_bytes);
  out->set_granularity_bytes(info.granularity);
  out->set_colours(gpu.colours);
}

void FillPacing(const PacingSettings& s, v1::PacingPolicy* out) {
  out->set_pacing(s.pacing);
  out->set_window_items(s.window_items);
  out->set_window_us(s.window_ns / 1000);
  out->set_ls_idle_us(s.ls_idle_ns / 1000);
  out->set_ls_stale_ms(s.ls_stale_ns / 1000000);
  out->set_max_hold_ms(s.max_hold_ns / 1000000);
  out->set_unknown_us(s.unknown_ns / 1000);
  out->set_share_slack_us(s.share_slack_ns / 1000);
  out->set_refill_us(s.refill_ns / 1000);
}

void FillCompute(uint32_t gpu, const PacingStats& st, v1::ComputeUse* out) {
  out->set_gpu_index(gpu);
  out->set_submissions(st.submissions);
  out->set_held_ms(static_cast<double>(st.held_ns) / 1e6);
  out->set_held_count(st.held_count);
  out->set_inflight(st.inflight);
  out->set_gpu_ms(static_cast<double>(st.gpu_ns) / 1e6);
  out->set_ls_busy_share(st.busy_share);
  out->set_held_share(st.held_share);
}

constexpr uint32_t kProtocolVersion = 1;

// One Watch stream, served without a thread: DaemonCore calls OnChange when the session's policy
// changes or it ends, and the reactor writes the session's state (one write in flight at a
// time; changes during a write are folded into the next one). A stream that breaks or is
// cancelled ends the session, as the shim's end of it is gone.
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
    Stop(watcher, "watch stream closed");
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
    Stop(watcher, "watch stream closed");
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

  // Unregisters (so OnChange is not running and never runs again) and ends the session.
  void Stop(uint64_t watcher, const char* reason) {
    if (watcher != 0) core_->RemoveWatcher(session_, watcher);
    core_->EndSession(session_, reason);
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
    // Fields are only ever added within a major version (see the proto), so any other number
    // is a shim built for a contract this daemon does not serve; 0 is a client that sent none.
    if (req->protocol_version() != kProtocolVersion) {
      return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                          "the client speaks protocol version " +
                              std::to_string(req->protocol_version()) + ", missiled speaks " +
                              std::to_string(kProtocolVersion) +
                              ": use a shim from the same Missile release as the daemon");
    }
    auto cls = FromProto(req->tenant_class());
    if (!cls.ok()) return ToGrpc(cls.status());
    auto session = core_->Register(*creds, req->name(), *cls, req->requested_quota_bytes());
    if (!session.ok()) return ToGrpc(session.status());
    resp->set_protocol_version(kProtocolVersion);
    resp->set_session_id(session->id);
    resp->set_side_channel_token(session->token);
    resp->set_side_channel_path(core_->options().fd_socket_path);
    resp->set_tenant_class(ToProto(session->cls));
    resp->set_daemon_instance(core_->instance());
    for (size_t g = 0; g < core_->gpus().size(); ++g) {
      FillGpu(static_cast<uint32_t>(g), core_->gpus()[g], resp->add_gpus());
    }
    return grpc::Status::OK;
  }

  grpc::Status Allocate(grpc::ServerContext* ctx, const v1::AllocateRequest* req,
                        v1::AllocateResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown(ctx);
    if (req->shape() != v1::AllocateRequest::CHUNKS && req->shape() != v1::AllocateRequest::SINGLE) {
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "shape must be CHUNKS or SINGLE");
    }
    auto leases = core_->Allocate(*creds, req->session_id(), req->gpu_index(),
                                  req->shape() == v1::AllocateRequest::SINGLE, req->bytes());
    if (!leases.ok()) return ToGrpc(leases.status());
    for (const Lease& l : *leases) {
      v1::Block* b = resp->add_blocks();
      b->set_id(l.id);
      b->set_bytes(l.bytes);
      b->set_colours(l.colours.bits());
    }
    auto usage = core_->GetUsage(*creds, req->session_id(), req->gpu_index());
    if (usage.ok()) FillUsage(req->gpu_index(), *usage, resp->mutable_usage());
    return grpc::Status::OK;
  }

  grpc::Status Free(grpc::ServerContext* ctx, const v1::FreeRequest* req,
                    v1::FreeResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown(ctx);
    std::vector<BlockId> ids(req->block_ids().begin(), req->block_ids().end());
    if (ids.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no blocks to free");
    absl::Status s = core_->Free(*creds, req->session_id(), req->gpu_index(), ids);
    if (!s.ok()) return ToGrpc(s);
    auto usage = core_->GetUsage(*creds, req->session_id(), req->gpu_index());
    if (usage.ok()) FillUsage(req->gpu_index(), *usage, resp->mutable_usage());
    return grpc::Status::OK;
  }

  grpc::Status GetUsage(grpc::ServerContext* ctx, const v1::GetUsageRequest* req,
                        v1::Usage* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) return Unknown(ctx);
    auto usage = core_->GetUsage(*creds, req->session_id(), req->gpu_index());
    if (!usage.ok()) return ToGrpc(usage.status());
    FillUsage(req->gpu_index(), *usage, resp);
    return grpc::Status::OK;
  }

  grpc::ServerWriteReactor<v1::SessionEvent>* Watch(grpc::CallbackServerContext* ctx,
                                                     const v1::WatchRequest* req) override {
    auto creds = peers_->Lookup(ctx->peer());
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

  grpc::Status Status(grpc::ServerContext* ctx, const v1::StatusRequest*,
                      v1::StatusResponse* resp) override {
    resp->set_version(MISSILE_VERSION);
    resp->set_uptime_s(
        std::chrono::duration_cast<std::chrono::seconds>(core_->uptime()).count());
    const auto& gpus = core_->gpus();
    for (size_t g = 0; g < gpus.size(); ++g) {
      PoolSnapshot snap = gpus[g].pool->Snapshot();
      v1::PoolStatus* p = resp->add_pools();
      FillGpu(static_cast<uint32_t>(g), gpus[g], p->mutable_gpu());
      p->set_capacity_bytes(snap.capacity_bytes);
      p->set_created_bytes(snap.created_bytes);
      p->set_leased_bytes(snap.leased_bytes);
      p->set_cached_bytes(snap.cached_bytes);
      p->set_tenants(static_cast<uint32_t>(snap.tenants.size()));
      p->set_colour_note(gpus[g].colour_note);
      for (size_t c = 0; c < snap.colours.size(); ++c) {
        v1::ColourUse* u = p->add_colours();
        u->set_colour(static_cast<uint32_t>(c));
        u->set_capacity_bytes(snap.colours[c].created_bytes);
        u->set_used_bytes(snap.colours[c].leased_bytes);
        ColourRole role = snap.colours[c].role;
        u->set_reserved_for(role == ColourRole::kLatencySensitive ? "ls"
                            : role == ColourRole::kBestEffort   ? "be"
                                                                : "shared");
      }
    }
    for (TenantClass cls : {TenantClass::kLatencySensitive, TenantClass::kBestEffort}) {
      v1::ClassPolicy* c = resp->add_classes();
      c->set_tenant_class(ToProto(cls));
      ClassDefaults d = core_->class_defaults(cls);
      c->set_priority(d.priority);
      auto w = pcie::WeightFromPriority(d.priority);
      c->set_weight(w.ok() ? *w : 0);
      if (!gpus.empty()) {
        c->set_tenant_quota_bytes(gpus[0].quota[ClassIndex(cls)].tenant_quota_bytes);
        c->set_class_quota_bytes(gpus[0].quota[ClassIndex(cls)].class_quota_bytes);
      }
    }
    resp->set_tenants(static_cast<uint32_t>(core_->ListSessions().size()));
    if (std::optional<PacingSettings> pacing = core_->pacing_settings()) {
      FillPacing(*pacing, resp->mutable_pacing());
    }
    (void)ctx;
    return grpc::Status::OK;
  }

  grpc::Status ListTenants(grpc::ServerContext* ctx, const v1::ListTenantsRequest*,
                           v1::ListTenantsResponse* resp) override {
    auto now = std::chrono::steady_clock::now();
    std::vector<std::vector<PcieUse>> pcie;
    for (const Gpu& gpu : core_->gpus()) {
      pcie.push_back(gpu.arbiter ? gpu.arbiter->Usage() : std::vector<PcieUse>());
    }
    for (const SessionInfo& s : core_->ListSessions()) {
      v1::TenantInfo* t = resp->add_tenants();
      t->set_session_id(s.id);
      t->set_pid(s.creds.pid);
      t->set_uid(s.creds.uid);
      t->set_name(s.name);
      t->set_tenant_class(ToProto(s.cls));
      t->set_priority(s.priority);
      t->set_weight(s.weight);
      t->set_connected_s(std::chrono::duration_cast<std::chrono::seconds>(now - s.started).count());
      for (size_t g = 0; g < core_->gpus().size(); ++g) {
        auto usage = core_->gpus()[g].pool->GetUsage(s.id);
        if (usage.ok()) FillUsage(static_cast<uint32_t>(g), *usage, t->add_usage());
        for (const PcieUse& u : pcie[g]) {
          if (u.session != s.id) continue;
          v1::PcieUse* p = t->add_pcie();
          p->set_gpu_index(static_cast<uint32_t>(g));
          p->set_h2d_bytes(u.bytes[0]);
          p->set_d2h_bytes(u.bytes[1]);
          p->set_h2d_share(u.share[0]);
          p->set_d2h_share(u.share[1]);
        }
        if (const Gpu& gpu = core_->gpus()[g]; gpu.pacing) {
          if (std::optional<PacingStats> st = gpu.pacing->Stats(s.id)) {
            FillCompute(static_cast<uint32_t>(g), *st, t->add_compute());
          }
        }
      }
    }
    (void)ctx;
    return grpc::Status::OK;
  }

  grpc::Status SetPolicy(grpc::ServerContext* ctx, const v1::SetPolicyRequest* req,
                         v1::SetPolicyResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "cannot identify the caller");
    }
    PolicyTarget target;
    switch (req->target_case()) {
      case v1::SetPolicyRequest::kPid: target.pid = static_cast<int>(req->pid()); break;
      case v1::SetPolicyRequest::kName: target.name = req->name(); break;
      case v1::SetPolicyRequest::kTenantClass: {
        auto cls = FromProto(req->tenant_class());
        if (!cls.ok()) return ToGrpc(cls.status());
        target.cls = *cls;
        break;
      }
      default:
        return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no target: give a pid, name or class");
    }
    PolicyChange change;
    if (req->has_new_class()) {
      auto cls = FromProto(req->new_class());
      if (!cls.ok()) return ToGrpc(cls.status());
      change.cls = *cls;
    }
    if (req->has_priority()) change.priority = req->priority();
    if (req->has_weight()) change.weight = req->weight();
    if (req->has_quota_bytes()) change.quota_bytes = req->quota_bytes();
    if (req->has_class_quota_bytes()) change.class_quota_bytes = req->class_quota_bytes();
    auto changed = core_->SetPolicy(*creds, target, change);
    if (!changed.ok()) return ToGrpc(changed.status());
    resp->set_tenants_changed(*changed);
    return grpc::Status::OK;
  }

  grpc::Status SetPacing(grpc::ServerContext* ctx, const v1::SetPacingRequest* req,
                         v1::SetPacingResponse* resp) override {
    auto creds = peers_->Lookup(ctx->peer());
    if (!creds) {
      return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, "cannot identify the caller");
    }
    PacingChange change;
    if (req->has_pacing()) change.pacing = req->pacing();
    if (req->has_window_items()) change.window_items = req->window_items();
    if (req->has_window_us()) change.window_us = req->window_us();
    if (req->has_ls_idle_us()) change.ls_idle_us = req->ls_idle_us();
    if (req->has_ls_stale_ms()) change.ls_stale_ms = req->ls_stale_ms();
    if (req->has_max_hold_ms()) change.max_hold_ms = req->max_hold_ms();
    if (req->has_unknown_us()) change.unknown_us = req->unknown_us();
    if (req->has_share_slack_us()) change.share_slack_us = req->share_slack_us();
    if (req->has_refill_us()) change.refill_us = req->refill_us();
    absl::StatusOr<PacingUpdate> update = core_->SetPacing(*creds, change);
    if (!update.ok()) return ToGrpc(update.status());
    FillPacing(update->after, resp->mutable_pacing());
    FillPacing(update->before, resp->mutable_previous());
    return grpc::Status::OK;
  }

 private:
  DaemonCore* core_;
  PeerRegistry* peers_;
};

}  // namespace

bool PeerRegistry::StillOpen(int fd, const Entry& entry) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_dev == entry.dev && st.st_ino == entry.ino;
}

void PeerRegistry::Record(int fd, const PeerCredentials& creds) {
  Entry entry{creds};
  struct stat st;
  if (fstat(fd, &st) == 0) {
    entry.dev = st.st_dev;
    entry.ino = st.st_ino;
  }
  absl::MutexLock lock(&mu_);
  by_fd_[fd] = entry;
  // gRPC closes a connection's descriptor without telling us, so closed ones are found by
  // looking: a sweep each time the map has doubled since the last one keeps the cost amortised
  // O(1) per connection and the map within twice the open connections.
  if (by_fd_.size() >= next_sweep_) {
    absl::erase_if(by_fd_, [](const auto& kv) { return !StillOpen(kv.first, kv.second); });
    next_sweep_ = std::max<size_t>(64, 2 * by_fd_.size());
  }
}

std::optional<PeerCredentials> PeerRegistry::Lookup(const std::string& peer) {
  // gRPC may percent-encode the peer; the descriptor number is the trailing digits.
  size_t pos = peer.find("fd");
  if (pos == std::string::npos) return std::nullopt;
  size_t digits = peer.find_first_of("0123456789", pos);
  if (digits == std::string::npos) return std::nullopt;
  int fd = atoi(peer.c_str() + digits);
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return std::nullopt;
  if (!StillOpen(fd, it->second)) {
    by_fd_.erase(it);
    return std::nullopt;
  }
  return it->second.creds;
}

size_t PeerRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return by_fd_.size();
}

RpcServer::RpcServer(DaemonCore* core) : core_(core), accept_log_(limits::kLogInterval) {}

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

void RpcServer::AcceptLoop() {
  rlimit lim{};
  getrlimit(RLIMIT_NOFILE, &lim);
  const int top = static_cast<int>(std::min<rlim_t>(lim.rlim_cur, 1 << 20)) - 64;
  while (!stopping_) {
    // gRPC drives the connection with its event engine: the descriptor must be non-blocking.
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (stopping_) break;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
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
    peers_.Record(fd, creds);
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
