#include "core.h"

#include <grp.h>
#include <poll.h>
#include <pwd.h>
#include <sys/epoll.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstring>

#include "absl/strings/escaping.h"
#include "internal/core_session.h"
#include "logger.h"

namespace missile::daemon {

using core_internal::ValidateName;
using core_internal::WeightOf;

namespace {

std::shared_ptr<spdlog::logger> Log() { return GetLogger(kCoreLog); }

}  // namespace

SessionInfo DaemonCore::SnapshotOf(const Session& session) const {
  absl::MutexLock lock(&mu_);
  return session.info;
}

namespace {

std::string NewInstanceId() {
  unsigned char raw[16] = {};
  if (getrandom(raw, sizeof(raw), 0) != static_cast<ssize_t>(sizeof(raw))) {
    // No entropy: the start time and pid still tell two daemon processes apart.
    const uint64_t t = static_cast<uint64_t>(std::chrono::steady_clock::now().time_since_epoch().count());
    const uint64_t pid = static_cast<uint64_t>(getpid());
    memcpy(raw, &t, 8);
    memcpy(raw + 8, &pid, 8);
  }
  return absl::BytesToHexString(
      absl::string_view(reinterpret_cast<const char*>(raw), sizeof(raw)));
}

}  // namespace

DaemonCore::DaemonCore(CoreOptions options, std::vector<Gpu> gpus)
    : options_(std::move(options)),
      instance_(NewInstanceId()),
      gpus_(std::move(gpus)),
      ls_(options_.ls),
      be_(options_.be) {
  // 1 + a multiple of 2^20 below 2^52, from the instance id.
  const uint64_t base = std::stoull(instance_.substr(0, 8), nullptr, 16);
  absl::MutexLock lock(&mu_);
  next_session_ = ((base & ((uint64_t{1} << 32) - 1)) << 20) + 1;
}

DaemonCore::~DaemonCore() { Stop(); }

absl::Status DaemonCore::Start() {
  RestorePolicy();
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  if (epoll_fd_ < 0) return absl::InternalError(std::string("epoll_create1: ") + strerror(errno));
  process_watcher_ = std::thread([this] { WatchProcesses(); });
  return absl::OkStatus();
}

void DaemonCore::BeginShutdown() {
  stopping_ = true;
  absl::MutexLock lock(&mu_);
  changed_.SignalAll();
}

void DaemonCore::Stop() {
  if (stopped_.exchange(true)) return;
  BeginShutdown();
  if (process_watcher_.joinable()) process_watcher_.join();
  std::vector<uint64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) ids.push_back(id);
  }
  for (uint64_t id : ids) EndSession(id, "daemon stopping");
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, pidfd] : lingering_) close(pidfd);
    lingering_.clear();
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
}

namespace {

// A pacing slot from the start, so the LS tenants of a GPU know there is a BE tenant to tell
// before the BE's first launch (the shim maps the region at its first work item).
void AssignPacingSlots(std::vector<Gpu>& gpus, const SessionInfo& info) {
  for (Gpu& gpu : gpus) {
    if (!gpu.pacing) continue;
    if (absl::Status s = gpu.pacing->Assign(info.id, info.creds.pid, info.cls, info.weight);
        !s.ok()) {
      Log()->warn("session {}: its GPU work is not paced: {}", info.id, std::string(s.message()));
    }
  }
}

// "; pod NAMESPACE/POD, container C" for the registration's log line ("-" for a name not known,
// no container when none is), or nothing outside Kubernetes.
std::string PodNote(const K8sIdentity& k8s) {
  if (k8s.empty()) return "";
  auto known = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return "; pod " + known(k8s.k8s_namespace) + "/" + known(k8s.pod) +
         (k8s.container.empty() ? "" : ", container " + k8s.container);
}

}  // namespace

void DaemonCore::LogIdentityOutcome(uint64_t session, const TenantIdentityOutcome& outcome) {
  if (outcome.note.empty()) return;
  if (!outcome.failed) {
    Log()->warn("session {}: {}", session, outcome.note);
    return;
  }
  // A kubelet that is down fails every registration the same way: rate-limited.
  uint64_t suppressed = 0;
  if (!pod_log_.Allow(&suppressed)) return;
  Log()->warn("session {}: {}{}", session, outcome.note,
              suppressed == 0 ? ""
                              : " (" + std::to_string(suppressed) + " more like it not logged)");
}

absl::StatusOr<SessionInfo> DaemonCore::Register(const PeerCredentials& creds,
                                                 const std::string& name, TenantClass cls,
                                                 uint64_t requested_quota,
                                                 const K8sIdentity& claimed,
                                                 const std::vector<std::string>& k8s_devices) {
  if (absl::Status s = ValidateName(name); !s.ok()) return s;
  if (absl::Status s = ValidateK8sIdentity(claimed); !s.ok()) return s;
  // Before mu_: it may wait on the kubelet.
  const TenantIdentityOutcome resolved =
      ResolveTenantIdentity(options_.pod_resolver.get(), claimed, k8s_devices);
  const K8sIdentity& k8s = resolved.identity;
  const bool capped = !IsAdmin(creds);  // before mu_: it may read the group database
  absl::MutexLock lock(&mu_);
  if (auto it = session_by_pid_.find(creds.pid); it != session_by_pid_.end()) {
    return sessions_.at(it->second)->info;  // the process registered already
  }
  if (capped) {
    const size_t of_uid = std::count_if(sessions_.begin(), sessions_.end(), [&](const auto& kv) {
      return kv.second->info.creds.uid == creds.uid;
    });
    if (of_uid >= options_.max_sessions_per_uid) {
      return absl::ResourceExhaustedError(
          "uid " + std::to_string(creds.uid) + " already has " + std::to_string(of_uid) +
          " sessions, the most one uid may hold (limits.max_sessions_per_uid); end one first");
    }
  }
  auto session = std::make_shared<Session>();
  SessionInfo& info = session->info;
  info.id = next_session_++;
  info.creds = creds;
  info.name = name;
  info.k8s = k8s;
  info.cls = cls;
  info.priority = (cls == TenantClass::kLatencySensitive ? ls_ : be_).priority;
  info.weight = WeightOf(info.priority);
  // An administrator's policy for this name and uid, kept from an earlier session.
  const TenantPolicyState* kept = policy_.Find(name, creds.uid);
  if (kept != nullptr) {
    info.cls = kept->cls;
    info.priority = kept->priority;
    info.weight = kept->weight;
  }
  info.started = std::chrono::steady_clock::now();
  info.token.resize(16);
  if (getrandom(info.token.data(), info.token.size(), 0) != 16) {
    return absl::InternalError("getrandom failed");
  }
  session->pidfd = static_cast<int>(syscall(SYS_pidfd_open, creds.pid, 0));
  if (session->pidfd < 0) {
    return absl::FailedPreconditionError("cannot watch process " + std::to_string(creds.pid) +
                                         ": " + strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = info.id;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, session->pidfd, &ev);
  for (size_t g = 0; g < gpus_.size(); ++g) {
    absl::Status s = gpus_[g].pool->AddTenant(info.id, info.cls, requested_quota);
    if (s.ok() && kept != nullptr && kept->quota_bytes) {
      s = gpus_[g].pool->SetTenantQuota(info.id, *kept->quota_bytes);
      if (!s.ok()) gpus_[g].pool->RemoveTenant(info.id);
    }
    if (!s.ok()) {
      for (size_t undo = 0; undo < g; ++undo) gpus_[undo].pool->RemoveTenant(info.id);
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, session->pidfd, nullptr);
      close(session->pidfd);
      return s;
    }
  }
  AssignPacingSlots(gpus_, info);
  sessions_[info.id] = session;
  session_by_pid_[creds.pid] = info.id;
  sessions_opened_.fetch_add(1, std::memory_order_relaxed);
  Log()->info("session {}: pid {} uid {} registered as '{}' ({}, priority {}, weight {}){}{}",
              info.id, creds.pid, creds.uid, name, TenantClassName(info.cls), info.priority,
              info.weight, PodNote(k8s), kept != nullptr ? "; policy kept for this name and uid" : "");
  LogIdentityOutcome(info.id, resolved);
  return info;
}

absl::StatusOr<std::shared_ptr<DaemonCore::Session>> DaemonCore::Authenticate(
    const PeerCredentials& creds, uint64_t session) const {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(session);
  if (it == sessions_.end() || it->second->info.ended) {
    return absl::NotFoundError("no session " + std::to_string(session));
  }
  if (it->second->info.creds.pid != creds.pid) {
    return absl::PermissionDeniedError("session " + std::to_string(session) +
                                       " belongs to another process");
  }
  return it->second;
}

absl::Status DaemonCore::CheckGpu(uint32_t gpu) const {
  if (gpu >= gpus_.size()) {
    return absl::InvalidArgumentError("no GPU " + std::to_string(gpu) + " (the daemon manages " +
                                      std::to_string(gpus_.size()) + ")");
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Lease>> DaemonCore::Allocate(const PeerCredentials& creds,
                                                        uint64_t session, uint32_t gpu,
                                                        bool single, uint64_t bytes) {
  if (auto s = Authenticate(creds, session); !s.ok()) return s.status();
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  VramPool& pool = *gpus_[gpu].pool;
  uint64_t granularity = gpus_[gpu].info.granularity;
  if (bytes == 0 || bytes % granularity != 0) {
    return absl::InvalidArgumentError("allocation of " + std::to_string(bytes) +
                                      " bytes is not a positive multiple of the granularity (" +
                                      std::to_string(granularity) + ")");
  }
  absl::StatusOr<std::vector<Lease>> leases;
  if (single) {
    absl::StatusOr<Lease> lease = pool.AllocateBlock(session, bytes);
    if (lease.ok()) {
      leases = std::vector<Lease>{*lease};
    } else {
      leases = lease.status();
    }
  } else {
    leases = pool.AllocateChunks(session, bytes / granularity);
  }
  uint64_t suppressed = 0;
  if (absl::IsResourceExhausted(leases.status()) && quota_log_.Allow(&suppressed)) {
    Log()->warn("session {} (pid {}): {} bytes on GPU {} refused: {}{}", session, creds.pid, bytes,
                gpu, std::string(leases.status().message()),
                suppressed == 0 ? ""
                                : " (" + std::to_string(suppressed) +
                                      " more refusals not logged since the last one)");
  }
  return leases;
}

absl::Status DaemonCore::Free(const PeerCredentials& creds, uint64_t session, uint32_t gpu,
                              const std::vector<BlockId>& ids) {
  if (auto s = Authenticate(creds, session); !s.ok()) return s.status();
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  return gpus_[gpu].pool->Free(session, ids);
}

absl::StatusOr<Usage> DaemonCore::GetUsage(const PeerCredentials& creds, uint64_t session,
                                           uint32_t gpu) {
  if (auto s = Authenticate(creds, session); !s.ok()) return s.status();
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  return gpus_[gpu].pool->GetUsage(session);
}

absl::StatusOr<SessionInfo> DaemonCore::WaitForChange(const PeerCredentials& creds,
                                                      uint64_t session, uint64_t seen,
                                                      const std::function<bool()>& cancelled) {
  auto s = Authenticate(creds, session);
  if (!s.ok()) return s.status();
  std::shared_ptr<Session> held = *s;
  absl::MutexLock lock(&mu_);
  while (!held->info.ended && held->info.generation <= seen && !stopping_) {
    changed_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
    if (cancelled()) break;
  }
  return held->info;
}

namespace {

// Whether the process behind `pidfd` still runs (a pidfd turns readable when it exits).
bool ProcessLives(int pidfd) {
  if (pidfd < 0) return false;
  pollfd p{pidfd, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

}  // namespace

void DaemonCore::EndSession(uint64_t session, const std::string& reason) {
  std::shared_ptr<Session> s;
  bool lives = false;
  int lingering_pidfd = -1;
  {
    absl::MutexLock lock(&mu_);
    auto it = sessions_.find(session);
    if (it == sessions_.end()) return;
    s = it->second;
    sessions_.erase(it);
    session_by_pid_.erase(s->info.creds.pid);
    s->info.ended = true;
    sessions_ended_.fetch_add(1, std::memory_order_relaxed);
    lives = ProcessLives(s->pidfd);
    if (lives && !stopping_) {
      lingering_pidfd = s->pidfd;  // stays in epoll_fd_; recorded once the pools counted it
    } else if (s->pidfd >= 0) {
      if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, s->pidfd, nullptr);
      close(s->pidfd);
    }
    s->pidfd = -1;
    changed_.SignalAll();
  }
  NotifyWatchers(session, /*ended=*/true);
  size_t returned = 0;
  for (Gpu& gpu : gpus_) {
    if (gpu.arbiter) gpu.arbiter->CloseChannel(session);
    if (gpu.pacing) gpu.pacing->Leave(session);
    returned += gpu.pool->RemoveTenant(session, lives).size();
  }
  if (lingering_pidfd >= 0) {
    // Its exit ends the count of what it may still map. An exit before this line is seen at
    // the watcher's next wait: a pidfd stays readable.
    absl::MutexLock lock(&mu_);
    lingering_[session] = lingering_pidfd;
  }
  if (lives) {
    // Blocks it was handed are destroyed unscrubbed and never leased again (vram_pool.h).
    Log()->warn("session {} ('{}', pid {}) ended while its process runs: {}; {} blocks released "
                "(those it was handed stay counted as possibly mapped until it exits)",
                session, s->info.name, s->info.creds.pid, reason, returned);
    return;
  }
  Log()->info("session {} ('{}', pid {}) ended: {}; {} blocks returned to the pools", session,
              s->info.name, s->info.creds.pid, reason, returned);
}

void DaemonCore::SideChannelClosed(uint64_t session, const std::string& reason) {
  for (Gpu& gpu : gpus_) {
    if (gpu.arbiter) gpu.arbiter->CloseChannel(session);
  }
  Log()->info("session {}: {}; the session goes on until its process exits", session, reason);
}

void DaemonCore::ForgetLingering(uint64_t session) {
  {
    absl::MutexLock lock(&mu_);
    auto it = lingering_.find(session);
    if (it == lingering_.end()) return;
    if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second, nullptr);
    close(it->second);
    lingering_.erase(it);
  }
  uint64_t bytes = 0;
  for (Gpu& gpu : gpus_) bytes += gpu.pool->ForgetReleased(session);
  Log()->info("the process of ended session {} exited; {} bytes it may have mapped are free",
              session, bytes);
}

absl::StatusOr<SessionInfo> DaemonCore::GetSession(const PeerCredentials& creds,
                                                   uint64_t session) const {
  auto s = Authenticate(creds, session);
  if (!s.ok()) return s.status();
  return SnapshotOf(**s);
}

absl::StatusOr<uint64_t> DaemonCore::AddWatcher(const PeerCredentials& creds, uint64_t session,
                                                size_t max_watchers,
                                                std::function<void()> on_change) {
  absl::MutexLock lock(&watchers_mu_);
  if (auto s = Authenticate(creds, session); !s.ok()) return s.status();
  auto& of_session = watchers_[session];
  if (of_session.size() >= max_watchers) {
    return absl::ResourceExhaustedError("session " + std::to_string(session) + " already has " +
                                        std::to_string(of_session.size()) + " watch streams");
  }
  uint64_t id = next_watcher_++;
  of_session.emplace(id, std::move(on_change));
  return id;
}

void DaemonCore::RemoveWatcher(uint64_t session, uint64_t watcher) {
  absl::MutexLock lock(&watchers_mu_);
  auto it = watchers_.find(session);
  if (it == watchers_.end()) return;
  it->second.erase(watcher);
  if (it->second.empty()) watchers_.erase(it);
}

void DaemonCore::NotifyWatchers(uint64_t session, bool ended) {
  absl::MutexLock lock(&watchers_mu_);
  auto it = watchers_.find(session);
  if (it == watchers_.end()) return;
  for (auto& [id, fn] : it->second) fn();
  if (ended) watchers_.erase(session);
}

std::vector<SessionInfo> DaemonCore::ListSessions() const {
  absl::MutexLock lock(&mu_);
  std::vector<SessionInfo> out;
  for (const auto& [id, s] : sessions_) out.push_back(s->info);
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

ClassDefaults DaemonCore::class_defaults(TenantClass cls) const {
  absl::MutexLock lock(&mu_);
  return cls == TenantClass::kLatencySensitive ? ls_ : be_;
}

std::chrono::steady_clock::duration DaemonCore::uptime() const {
  return std::chrono::steady_clock::now() - started_;
}

bool DaemonCore::IsAdmin(const PeerCredentials& creds) const {
  if (creds.uid == 0) return true;
  if (!options_.admin_gid.has_value()) return false;
  if (creds.gid == *options_.admin_gid) return true;
  passwd pw{}, *result = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(creds.uid, &pw, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return false;
  }
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return false;
  }
  groups.resize(n);
  return std::find(groups.begin(), groups.end(), *options_.admin_gid) != groups.end();
}

std::optional<PacingSettings> DaemonCore::pacing_settings() const {
  for (const Gpu& gpu : gpus_) {
    if (gpu.pacing) return gpu.pacing->settings();
  }
  return std::nullopt;
}

absl::StatusOr<PacingUpdate> DaemonCore::SetPacing(const PeerCredentials& creds,
                                                   const PacingChange& change) {
  if (!IsAdmin(creds)) {
    return absl::PermissionDeniedError("uid " + std::to_string(creds.uid) +
                                       " may not change pacing: root or the admin group only");
  }
  if (change.empty()) return absl::InvalidArgumentError("nothing to change");
  absl::MutexLock lock(&pacing_mu_);
  std::optional<PacingSettings> before = pacing_settings();
  if (!before) return absl::FailedPreconditionError("no GPU of this daemon is paced");
  absl::StatusOr<PacingSettings> after = ApplyPacingChange(*before, change);
  if (!after.ok()) return after.status();
  for (Gpu& gpu : gpus_) {
    if (gpu.pacing) gpu.pacing->Configure(*after);
  }
  Log()->info("pacing changed by uid {} pid {}: {}", creds.uid, creds.pid,
              DescribePacingChange(*before, *after));
  return PacingUpdate{*before, *after};
}

absl::StatusOr<PacingUpdate> DaemonCore::ReplacePacing(const PacingSettings& settings) {
  absl::MutexLock lock(&pacing_mu_);
  std::optional<PacingSettings> before = pacing_settings();
  if (!before) return absl::FailedPreconditionError("no GPU of this daemon is paced");
  for (Gpu& gpu : gpus_) {
    if (gpu.pacing) gpu.pacing->Configure(settings);
  }
  Log()->info("pacing changed by a configuration re-read: {}",
              DescribePacingChange(*before, settings));
  return PacingUpdate{*before, settings};
}

void DaemonCore::WatchProcesses() {
  epoll_event events[32];
  while (!stopping_) {
    heartbeat_.fetch_add(1, std::memory_order_relaxed);
    int n = epoll_wait(epoll_fd_, events, 32, 200);
    for (int i = 0; i < n; ++i) {
      EndSession(events[i].data.u64, "process exited");  // nothing if it ended before
      ForgetLingering(events[i].data.u64);                // nothing unless it ended before
    }
  }
}

absl::Status DaemonCore::AuthenticateSideChannel(const PeerCredentials& creds, uint64_t session,
                                                 std::string_view token) const {
  auto s = Authenticate(creds, session);
  if (!s.ok()) return s.status();
  if ((*s)->info.token != token) return absl::PermissionDeniedError("bad side-channel token");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> DaemonCore::FetchBlocks(const PeerCredentials& creds,
                                                         uint64_t session, uint32_t gpu,
                                                         const std::vector<BlockId>& ids) {
  if (auto s = Authenticate(creds, session); !s.ok()) return s.status();
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  std::vector<int> fds;
  for (BlockId id : ids) {
    absl::StatusOr<int> fd = gpus_[gpu].pool->DuplicateDescriptor(session, id);
    if (!fd.ok()) {
      for (int f : fds) close(f);
      return fd.status();
    }
    fds.push_back(*fd);
  }
  return fds;
}

absl::StatusOr<std::pair<int, int>> DaemonCore::OpenCopyChannel(const PeerCredentials& creds,
                                                                uint64_t session, uint32_t gpu) {
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  auto held = Authenticate(creds, session);
  if (!held.ok()) return held.status();
  if (!gpus_[gpu].arbiter) return absl::UnavailableError("no PCIe arbiter on this GPU");
  SessionInfo info = SnapshotOf(**held);
  return gpus_[gpu].arbiter->OpenChannel(session, info.cls, info.weight);
}

absl::StatusOr<std::pair<int, int>> DaemonCore::OpenPacing(const PeerCredentials& creds,
                                                           uint64_t session, uint32_t gpu) {
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  auto held = Authenticate(creds, session);
  if (!held.ok()) return held.status();
  if (!gpus_[gpu].pacing) return absl::UnavailableError("no pacing domain on this GPU");
  SessionInfo info = SnapshotOf(**held);
  auto fds = gpus_[gpu].pacing->Join(session, info.creds.pid, info.cls, info.weight);
  if (!fds.ok()) return fds.status();
  return std::make_pair(fds->directory, fds->lanes);
}

absl::StatusOr<int> DaemonCore::OpenPeerLanes(const PeerCredentials& creds, uint64_t session,
                                              uint32_t gpu, uint32_t slot, uint64_t epoch) {
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  auto held = Authenticate(creds, session);
  if (!held.ok()) return held.status();
  if (!gpus_[gpu].pacing) return absl::UnavailableError("no pacing domain on this GPU");
  return gpus_[gpu].pacing->OpenPeerLanes(session, slot, epoch);
}

}  // namespace missile::daemon
