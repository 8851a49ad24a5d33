#include "session_manager.h"

#include <errno.h>

#include <array>
#include <cstdint>
#include <cstring>
#include <string>

#include "missile/common/gpu_uuid.h"
#include "session_gpu.h"
#include "session_policy.h"

namespace missile::shim {
namespace {

// The daemon names its GPUs by UUID, spelled as common's FormatGpuUuid spells it.
std::string Uuid(const CUuuid& u) {
  std::array<uint8_t, 16> bytes;
  std::memcpy(bytes.data(), u.bytes, bytes.size());
  return FormatGpuUuid(bytes);
}

}  // namespace

SessionManager::SessionManager(const Config& config, const DriverApi& api,
                               SessionConnector* connector, spdlog::logger* log,
                               TpcMasker* masker)
    : config_(config), api_(api), connector_(connector), log_(log), masker_(masker) {}

SessionManager::~SessionManager() {
  {
    absl::MutexLock lock(&reconnect_mu_);
    stop_reconnect_ = true;
    reconnect_cv_.SignalAll();
  }
  if (reconnect_.joinable()) reconnect_.join();
}

TenantIdentity SessionManager::Identity() const {
  TenantIdentity who;
  who.socket_path = config_.socket_path;
  who.name = config_.tenant_name.empty() ? program_invocation_short_name : config_.tenant_name;
  who.latency_sensitive = config_.latency_sensitive;
  who.quota_bytes = config_.quota_bytes;
  who.timeout_ms = config_.daemon_timeout_ms;
  who.k8s = config_.k8s;
  who.k8s_devices = config_.k8s_devices;
  return who;
}

SessionClient* SessionManager::Client() {
  if (SessionClient* c = client_ptr_.load(std::memory_order_acquire)) return c;
  if (client_failed_.load(std::memory_order_acquire)) return nullptr;
  absl::MutexLock lock(&client_mu_);
  if (client_tried_) return clients_.empty() ? nullptr : clients_.back().get();
  client_tried_ = true;
  TenantIdentity who = Identity();
  absl::StatusOr<std::unique_ptr<SessionClient>> c;
  if (!connector_->SocketExists(who.socket_path)) {
    c = absl::UnavailableError("no socket at " + who.socket_path);
  } else {
    c = connector_->Connect(who);
  }
  if (!c.ok()) {
    if (config_.refuse_without_daemon) {
      log_->error("cannot reach missiled ({}); MISSILE_NO_DAEMON=refuse: device allocations will "
                  "fail with CUDA_ERROR_OUT_OF_MEMORY", std::string(c.status().message()));
    } else {
      log_->warn("cannot reach missiled ({}); the program uses the GPU directly, without quotas "
                 "(MISSILE_NO_DAEMON=passthrough)", std::string(c.status().message()));
    }
    client_failed_.store(true, std::memory_order_release);
    StartReconnect();  // registers once a daemon answers (started late, or restarting)
    return nullptr;
  }
  clients_.push_back(std::move(*c));
  SessionClient* raw = clients_.back().get();
  log_->info("registered with missiled as '{}' ({}), session {}", who.name,
             who.latency_sensitive ? "ls" : "be", raw->session_id());
  client_ptr_.store(raw, std::memory_order_release);
  // Watches the session from now on, so that an idle process registers again with a restarted
  // daemon within about a second, not at its next call.
  StartReconnect();
  return raw;
}

void SessionManager::ReconnectLoop() {
  absl::MutexLock lock(&reconnect_mu_);
  while (!stop_reconnect_) {
    reconnect_cv_.WaitWithTimeout(&reconnect_mu_, absl::Seconds(1));
    if (stop_reconnect_) break;
    SessionClient* current = client_ptr_.load(std::memory_order_acquire);
    if (current == nullptr && client_failed_.load(std::memory_order_acquire)) {
      reconnect_mu_.Unlock();
      RegisterLate();
      reconnect_mu_.Lock();
      continue;
    }
    if (current == nullptr || current->connected()) continue;
    bool give_up = false;
    {
      reconnect_mu_.Unlock();
      NoteEnded(current);  // a process that makes no call learns of the end here
      give_up = TryRegisterAgain(current);
      reconnect_mu_.Lock();
    }
    if (give_up) break;
  }
}

void SessionManager::RegisterLate() {
  TenantIdentity who = Identity();
  if (!connector_->Listening(who.socket_path)) return;
  absl::StatusOr<std::unique_ptr<SessionClient>> c = connector_->Connect(who);
  if (!c.ok()) {
    if (!register_failure_logged_.exchange(true)) {
      log_->warn("registering with missiled failed ({}); trying every second",
                 std::string(c.status().message()));
    }
    return;
  }
  SessionClient* raw = c->get();
  {
    absl::MutexLock lock(&client_mu_);
    clients_.push_back(std::move(*c));
  }
  client_ptr_.store(raw, std::memory_order_release);
  log_->warn("registered with missiled as '{}' ({}), session {}, which was not reachable when "
             "the process started: new device allocations are served by it; before, {} "
             "allocations ({} bytes) went to the driver directly, outside missiled's quota",
             who.name, who.latency_sensitive ? "ls" : "be", raw->session_id(),
             passthrough_calls(), passthrough_bytes());
}

bool SessionManager::TryRegisterAgain(SessionClient* ended) {
  TenantIdentity who = Identity();
  if (!connector_->Listening(who.socket_path)) return false;  // not (yet) restarted
  absl::StatusOr<std::unique_ptr<SessionClient>> c = connector_->Connect(who);
  if (!c.ok()) {
    if (!register_failure_logged_.exchange(true)) {
      log_->warn("registering again with missiled failed ({}); trying every second",
                 std::string(c.status().message()));
    }
    return false;
  }
  const NewSession kind = ClassifyNewSession(ended->instance(), ended->session_id(),
                                             (*c)->instance(), (*c)->session_id());
  if (kind == NewSession::kRefuse) {
    // A daemon without instance ids might lease this process a block it still maps. Dropping
    // the new client leaves the new session unused.
    log_->warn("missiled sends no instance id; the process goes on without registering again");
    return true;
  }
  SessionClient* raw = c->get();
  {
    absl::MutexLock lock(&client_mu_);
    clients_.push_back(std::move(*c));
  }
  // From here the per-GPU state of the ended session only takes frees: every path finds its
  // state by session and makes new state for this one.
  client_ptr_.store(raw, std::memory_order_release);
  const char* what = kind == NewSession::kRestartedDaemon
                         ? "with a restarted missiled"
                         : kind == NewSession::kSameSession
                               ? "with missiled, which kept this process's session and memory"
                               : "with missiled, which had ended this process's session while "
                                 "it ran and released its memory for good";
  const uint64_t calls = passthrough_since_end_.exchange(0);
  const uint64_t bytes = passthrough_bytes_since_end_.exchange(0);
  log_->warn("registered again {}, session {}: new device allocations are served by it; memory "
             "allocated before stays as it is; while the session was down, {} allocations ({} "
             "bytes) went to the driver directly, outside missiled's quota",
             what, raw->session_id(), calls, bytes);
  return false;
}

void SessionManager::NotePassthrough(uint64_t bytes) {
  passthrough_calls_.fetch_add(1, std::memory_order_relaxed);
  passthrough_bytes_.fetch_add(bytes, std::memory_order_relaxed);
  if (client_ptr_.load(std::memory_order_acquire) == nullptr) return;  // never registered
  passthrough_since_end_.fetch_add(1, std::memory_order_relaxed);
  passthrough_bytes_since_end_.fetch_add(bytes, std::memory_order_relaxed);
}

bool SessionManager::connected() const {
  SessionClient* c = client_ptr_.load(std::memory_order_acquire);
  return c != nullptr && c->connected();
}

SessionClient* SessionManager::Serving() {
  SessionClient* c = Client();
  if (c == nullptr || c->connected()) return c;
  NoteEnded(c);
  StartReconnect();
  return nullptr;
}

void SessionManager::NoteEnded(SessionClient* ended) {
  if (lost_logged_for_.exchange(ended) == ended) return;
  if (config_.refuse_without_daemon) {
    log_->error("the session with missiled has ended; new device allocations fail with "
                "CUDA_ERROR_OUT_OF_MEMORY (MISSILE_NO_DAEMON=refuse) until a restarted "
                "missiled takes the process back");
  } else {
    log_->warn("the session with missiled has ended; new device allocations go to the driver "
               "directly, without quotas (MISSILE_NO_DAEMON=passthrough), until a restarted "
               "missiled takes the process back");
  }
  absl::MutexLock lock(&listener_mu_);
  if (end_listener_) end_listener_(ended);
}

void SessionManager::StartReconnect() {
  if (!reconnect_started_.exchange(true)) reconnect_ = std::thread([this] { ReconnectLoop(); });
}

absl::StatusOr<const GpuLink*> SessionManager::LinkOf(SessionClient* session, CUdevice dev) {
  CUuuid uuid{};
  if (CUresult r = api_.DeviceGetUuid(&uuid, dev); r != CUDA_SUCCESS) {
    return DriverStatus(api_, "cuDeviceGetUuid", r);
  }
  std::string id = Uuid(uuid);
  const GpuLink* link = nullptr;
  for (const GpuLink& g : session->gpus()) {
    if (g.uuid == id) link = &g;
  }
  if (link == nullptr) return absl::NotFoundError("missiled does not manage " + id);
  return link;
}

SessionGpu* SessionManager::GpuOf(CUdevice dev) {
  SessionClient* session = Client();
  if (session == nullptr) return nullptr;
  const int key = static_cast<int>(dev);
  const bool cached = key >= 0 && key < kCachedDevices;
  if (cached) {
    SessionGpu* recent = recent_[key].load(std::memory_order_acquire);
    if (recent != nullptr && recent->session() == session) return recent;
  }
  absl::MutexLock lock(&gpus_mu_);
  SessionGpu*& slot = gpu_of_[{session, key}];
  if (slot == nullptr) {
    gpus_.push_back(std::make_unique<SessionGpu>(this, session, dev, api_, log_, masker_));
    slot = gpus_.back().get();
  }
  if (cached) recent_[key].store(slot, std::memory_order_release);
  return slot;
}

SessionGpu* SessionManager::CurrentGpu() {
  if (Client() == nullptr) return nullptr;  // no daemon: no driver call either
  CUdevice dev = 0;
  if (api_.CtxGetDevice == nullptr || api_.CtxGetDevice(&dev) != CUDA_SUCCESS) return nullptr;
  return GpuOf(dev);
}

void SessionManager::ForEachGpu(const std::function<void(const SessionGpu&)>& fn) const {
  absl::MutexLock lock(&gpus_mu_);
  for (const auto& g : gpus_) fn(*g);
}

void SessionManager::SetEndListener(std::function<void(SessionClient*)> listener) {
  absl::MutexLock lock(&listener_mu_);
  end_listener_ = std::move(listener);
}

}  // namespace missile::shim
