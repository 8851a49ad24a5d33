#include "daemon_client.h"

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <algorithm>
#include <cstring>

#include "missile/common/fd_passing.h"
#include "missile/v1/missile.grpc.pb.h"

namespace missile::shim {
namespace {

namespace v1 = ::missile::v1;
constexpr uint32_t kProtocolVersion = 1;
// How often the channel pings the daemon while a session is open: a stopped or wedged daemon is
// noticed within this plus the timeout even when the program makes no call, so its copies
// waiting for grants are let through (the copy gate's watcher follows connected()).
constexpr int kKeepaliveMs = 1000;

absl::Status FromGrpc(const grpc::Status& s, const std::string& what) {
  if (s.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                      what + ": " + s.error_message());
}

}  // namespace

struct DaemonClient::Rpc {
  std::shared_ptr<grpc::Channel> channel;
  std::unique_ptr<v1::Tenant::Stub> stub;
  grpc::ClientContext watch_ctx;
};

DaemonClient::DaemonClient(int timeout_ms) : rpc_(std::make_unique<Rpc>()), timeout_ms_(timeout_ms) {}

void DaemonClient::SetDeadline(grpc::ClientContext* ctx) const {
  ctx->set_deadline(std::chrono::system_clock::now() + std::chrono::milliseconds(timeout_ms_));
}

absl::Status DaemonClient::Checked(const grpc::Status& s, const std::string& what) {
  // A daemon that does not answer within the deadline is treated as gone: the caller then
  // follows MISSILE_NO_DAEMON instead of waiting on it again at every call.
  if (s.error_code() == grpc::StatusCode::DEADLINE_EXCEEDED ||
      s.error_code() == grpc::StatusCode::UNAVAILABLE) {
    Abandon();
  }
  return FromGrpc(s, what);
}

void DaemonClient::Abandon() {
  connected_.store(false, std::memory_order_release);
  rpc_->watch_ctx.TryCancel();
}

DaemonClient::~DaemonClient() {
  connected_ = false;
  rpc_->watch_ctx.TryCancel();
  if (watcher_.joinable()) watcher_.join();
  absl::MutexLock lock(&side_mu_);
  if (side_fd_ >= 0) close(side_fd_);
}

absl::StatusOr<std::unique_ptr<DaemonClient>> DaemonClient::Connect(const TenantIdentity& who) {
  std::unique_ptr<DaemonClient> c(new DaemonClient(who.timeout_ms));
  grpc::ChannelArguments args;
  args.SetInt(GRPC_ARG_ENABLE_RETRIES, 0);
  // Keepalive pings on the open Watch stream, answered by the daemon's transport: one that is
  // not answered within the timeout closes the connection, which ends the session.
  args.SetInt(GRPC_ARG_KEEPALIVE_TIME_MS, kKeepaliveMs);
  args.SetInt(GRPC_ARG_KEEPALIVE_TIMEOUT_MS, who.timeout_ms);
  args.SetInt(GRPC_ARG_KEEPALIVE_PERMIT_WITHOUT_CALLS, 1);
  args.SetInt(GRPC_ARG_HTTP2_MAX_PINGS_WITHOUT_DATA, 0);
  c->rpc_->channel = grpc::CreateCustomChannel("unix:" + who.socket_path,
                                               grpc::InsecureChannelCredentials(), args);
  c->rpc_->stub = v1::Tenant::NewStub(c->rpc_->channel);
  const int connect_ms = std::min(2000, who.timeout_ms);
  if (!c->rpc_->channel->WaitForConnected(std::chrono::system_clock::now() +
                                          std::chrono::milliseconds(connect_ms))) {
    return absl::UnavailableError("missiled is not answering on " + who.socket_path);
  }
  v1::RegisterRequest req;
  req.set_protocol_version(kProtocolVersion);
  req.set_name(who.name);
  req.set_tenant_class(who.latency_sensitive ? v1::LATENCY_SENSITIVE : v1::BEST_EFFORT);
  req.set_requested_quota_bytes(who.quota_bytes);
  req.set_k8s_pod(who.k8s.pod);
  req.set_k8s_namespace(who.k8s.k8s_namespace);
  req.set_k8s_container(who.k8s.container);
  for (const std::string& id : who.k8s_devices) req.add_k8s_device_ids(id);
  v1::RegisterResponse resp;
  grpc::ClientContext ctx;
  c->SetDeadline(&ctx);
  if (absl::Status s = FromGrpc(c->rpc_->stub->Register(&ctx, req, &resp), "register"); !s.ok()) {
    return s;
  }
  c->session_id_ = resp.session_id();
  c->instance_ = resp.daemon_instance();
  for (const v1::GpuInfo& g : resp.gpus()) {
    c->gpus_.push_back(
        {g.index(), g.uuid(), g.total_bytes(), g.granularity_bytes(), std::max(1u, g.colours())});
  }
  if (resp.side_channel_token().size() != 16) {
    return absl::DataLossError("register: malformed side-channel token");
  }
  int fd = -1;
  // Every read and write on the side channel is bounded by the timeout too.
  if (absl::Status s = fdpass::ConnectUnix(resp.side_channel_path(), &fd, who.timeout_ms);
      !s.ok()) {
    return s;
  }
  fdpass::Hello hello;
  hello.session_id = c->session_id_;
  memcpy(hello.token, resp.side_channel_token().data(), 16);
  fdpass::Reply reply;
  absl::Status s = fdpass::SendMessage(fd, &hello, sizeof(hello));
  if (s.ok()) s = fdpass::ReceiveMessage(fd, &reply, sizeof(reply));
  if (s.ok() && reply.status != 0) {
    s = absl::Status(static_cast<absl::StatusCode>(reply.status), "side channel refused");
  }
  if (!s.ok()) {
    close(fd);
    return s;
  }
  {
    absl::MutexLock lock(&c->side_mu_);
    c->side_fd_ = fd;
  }
  c->connected_ = true;
  DaemonClient* raw = c.get();
  c->watcher_ = std::thread([raw] { raw->WatchLoop(); });
  return c;
}

void DaemonClient::WatchLoop() {
  v1::WatchRequest req;
  req.set_session_id(session_id_);
  auto reader = rpc_->stub->Watch(&rpc_->watch_ctx, req);
  v1::SessionEvent event;
  while (reader->Read(&event)) {
    // Policy changes (class, weight) matter to the copy scheduler; memory reads usage on demand.
  }
  reader->Finish();
  connected_ = false;
  // The session is over for this client: its side channel goes too, so the daemon sees it
  // closed (a later registration of this process opens a new one).
  absl::MutexLock lock(&side_mu_);
  if (side_fd_ >= 0) close(side_fd_);
  side_fd_ = -1;
}

bool DaemonClient::AwaitEnd(absl::Duration limit) const {
  const absl::Time until = absl::Now() + limit;
  while (connected() && absl::Now() < until) absl::SleepFor(absl::Milliseconds(5));
  return !connected();
}

absl::Status DaemonClient::SideFailed(absl::Status s) {
  // A reply that did not come in time may still come later and would be taken for the answer
  // to the next request: the channel cannot be used again, and the session is over.
  if (absl::IsDeadlineExceeded(s) || absl::IsUnavailable(s) || absl::IsDataLoss(s)) {
    if (side_fd_ >= 0) close(side_fd_);
    side_fd_ = -1;
    Abandon();
  }
  return s;
}

absl::Status DaemonClient::FetchDescriptors(uint32_t gpu, std::vector<BlockLease>* leases) {
  absl::MutexLock lock(&side_mu_);
  if (side_fd_ < 0) return absl::UnavailableError("no side channel");
  if (!connected()) return absl::UnavailableError("the session with missiled ended");
  for (size_t done = 0; done < leases->size();) {
    fdpass::FetchRequest req;
    req.op = fdpass::kFetchBlocks;
    req.gpu = gpu;
    req.count = static_cast<uint32_t>(
        std::min<size_t>(fdpass::kMaxFdsPerMessage, leases->size() - done));
    for (uint32_t i = 0; i < req.count; ++i) req.block_ids[i] = (*leases)[done + i].id;
    fdpass::Reply reply;
    std::vector<int> fds;
    absl::Status s = fdpass::SendMessage(side_fd_, &req, sizeof(req));
    if (s.ok()) s = fdpass::ReceiveMessage(side_fd_, &reply, sizeof(reply), &fds);
    if (s.ok() && reply.status != 0) {
      s = absl::Status(static_cast<absl::StatusCode>(reply.status), "fetching block descriptors");
    }
    if (s.ok() && fds.size() != req.count) {
      s = absl::DataLossError("fetching block descriptors: wrong descriptor count");
    }
    if (!s.ok()) {
      for (int fd : fds) close(fd);
      // The batches fetched before this one are the caller's no more: it returns the blocks.
      for (size_t i = 0; i < done; ++i) {
        close((*leases)[i].fd);
        (*leases)[i].fd = -1;
      }
      return SideFailed(s);
    }
    for (uint32_t i = 0; i < req.count; ++i) (*leases)[done + i].fd = fds[i];
    done += req.count;
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> DaemonClient::OpenOnSideChannel(const fdpass::FetchRequest& req,
                                                                 size_t descriptors,
                                                                 const char* what) {
  if (!connected()) return absl::UnavailableError("the session with missiled ended");
  absl::MutexLock lock(&side_mu_);
  if (side_fd_ < 0) return absl::UnavailableError("no side channel");
  fdpass::Reply reply;
  std::vector<int> fds;
  absl::Status s = fdpass::SendMessage(side_fd_, &req, sizeof(req));
  if (s.ok()) s = fdpass::ReceiveMessage(side_fd_, &reply, sizeof(reply), &fds);
  if (s.ok() && reply.status != 0) {
    s = absl::Status(static_cast<absl::StatusCode>(reply.status), std::string("opening the ") + what);
  }
  if (s.ok() && fds.size() != descriptors) {
    s = absl::DataLossError(std::string(what) + ": expected " + std::to_string(descriptors) +
                            " descriptors");
  }
  if (!s.ok()) {
    for (int fd : fds) close(fd);
    return SideFailed(s);
  }
  return fds;
}

absl::StatusOr<std::pair<int, int>> DaemonClient::OpenCopyChannel(uint32_t gpu) {
  fdpass::FetchRequest req;
  req.op = fdpass::kOpenCopyChannel;
  req.gpu = gpu;
  absl::StatusOr<std::vector<int>> fds = OpenOnSideChannel(req, 2, "copy channel");
  if (!fds.ok()) return fds.status();
  return std::make_pair((*fds)[0], (*fds)[1]);
}

absl::StatusOr<std::pair<int, int>> DaemonClient::OpenPacing(uint32_t gpu) {
  fdpass::FetchRequest req;
  req.op = fdpass::kOpenPacing;
  req.gpu = gpu;
  absl::StatusOr<std::vector<int>> fds = OpenOnSideChannel(req, 2, "pacing regions");
  if (!fds.ok()) return fds.status();
  return std::make_pair((*fds)[0], (*fds)[1]);
}

absl::StatusOr<int> DaemonClient::OpenPeerLanes(uint32_t gpu, uint32_t slot, uint64_t epoch) {
  fdpass::FetchRequest req;
  req.op = fdpass::kOpenPeerLanes;
  req.gpu = gpu;
  req.reserved = slot;
  req.block_ids[0] = epoch;
  absl::StatusOr<std::vector<int>> fds = OpenOnSideChannel(req, 1, "a peer's pacing lanes");
  if (!fds.ok()) return fds.status();
  return (*fds)[0];
}

absl::StatusOr<std::vector<BlockLease>> DaemonClient::Allocate(uint32_t gpu, bool single,
                                                               uint64_t bytes) {
  if (!connected()) return absl::UnavailableError("the session with missiled ended");
  v1::AllocateRequest req;
  req.set_session_id(session_id_);
  req.set_gpu_index(gpu);
  req.set_shape(single ? v1::AllocateRequest::SINGLE : v1::AllocateRequest::CHUNKS);
  req.set_bytes(bytes);
  v1::AllocateResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (absl::Status s = Checked(rpc_->stub->Allocate(&ctx, req, &resp), "allocate"); !s.ok()) {
    return s;
  }
  std::vector<BlockLease> leases;
  for (const v1::Block& b : resp.blocks()) leases.push_back({b.id(), b.bytes(), -1});
  if (absl::Status s = FetchDescriptors(gpu, &leases); !s.ok()) {
    std::vector<uint64_t> ids;
    for (const auto& l : leases) ids.push_back(l.id);
    Free(gpu, ids).IgnoreError();  // give them back rather than leak them
    return s;
  }
  return leases;
}

absl::Status DaemonClient::Free(uint32_t gpu, const std::vector<uint64_t>& block_ids) {
  if (!connected()) return absl::UnavailableError("the session with missiled ended");
  v1::FreeRequest req;
  req.set_session_id(session_id_);
  req.set_gpu_index(gpu);
  for (uint64_t id : block_ids) req.add_block_ids(id);
  v1::FreeResponse resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  return Checked(rpc_->stub->Free(&ctx, req, &resp), "free");
}

absl::StatusOr<TenantUsage> DaemonClient::Usage(uint32_t gpu) {
  if (!connected()) return absl::UnavailableError("the session with missiled ended");
  v1::GetUsageRequest req;
  req.set_session_id(session_id_);
  req.set_gpu_index(gpu);
  v1::Usage resp;
  grpc::ClientContext ctx;
  SetDeadline(&ctx);
  if (absl::Status s = Checked(rpc_->stub->GetUsage(&ctx, req, &resp), "usage"); !s.ok()) {
    return s;
  }
  return TenantUsage{resp.quota_bytes(), resp.used_bytes(), resp.available_bytes()};
}

bool DaemonConnector::SocketExists(const std::string& path) {
  return access(path.c_str(), F_OK) == 0;
}

bool DaemonConnector::Listening(const std::string& path) {
  // A plain connect, without gRPC: cheap enough to try every second.
  sockaddr_un addr{};
  if (path.size() >= sizeof(addr.sun_path)) return false;
  addr.sun_family = AF_UNIX;
  memcpy(addr.sun_path, path.c_str(), path.size() + 1);
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  // A stopped daemon's full backlog would block the connect: bound it.
  (void)fdpass::SetIoTimeout(fd, 1000);
  bool ok = connect(fd, reinterpret_cast<const sockaddr*>(&addr), sizeof(addr)) == 0;
  close(fd);
  return ok;
}

absl::StatusOr<std::unique_ptr<SessionClient>> DaemonConnector::Connect(
    const TenantIdentity& who) {
  absl::StatusOr<std::unique_ptr<DaemonClient>> c = DaemonClient::Connect(who);
  if (!c.ok()) return c.status();
  return std::unique_ptr<SessionClient>(std::move(*c));
}

}  // namespace missile::shim
