#include "core.h"

#include <sys/random.h>
#include <unistd.h>

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

// Session ids start at a random base (from the instance id): a restarted daemon hands out other
// ids than the one before, so a request a shim sent in an ended session never names a new one.
// 1 + a multiple of 2^20 below 2^52.
uint64_t FirstSessionId(const std::string& instance) {
  const uint64_t base = std::stoull(instance.substr(0, 8), nullptr, 16);
  return ((base & ((uint64_t{1} << 32) - 1)) << 20) + 1;
}

}  // namespace

DaemonCore::DaemonCore(CoreOptions options, std::vector<Gpu> gpus)
    : options_(std::move(options)),
      instance_(NewInstanceId()),
      gpus_(std::move(gpus)),
      authorizer_(options_.admin_gid),
      policy_(options_.state_file, options_.ls, options_.be),
      registry_(FirstSessionId(instance_), options_.max_sessions_per_uid),
      watcher_([this](uint64_t key) { OnProcessExit(key); }) {}

DaemonCore::~DaemonCore() { Stop(); }

absl::Status DaemonCore::Start() {
  RestorePolicy();
  return watcher_.Start();
}

void DaemonCore::BeginShutdown() {
  stopping_ = true;
  registry_.WakeAll();
}

void DaemonCore::Stop() {
  if (stopped_.exchange(true)) return;
  BeginShutdown();
  watcher_.Stop();
  // A registration under way publishes nothing from here on; it undoes itself.
  for (uint64_t id : registry_.Close()) EndSession(id, "daemon stopping");
  for (uint64_t id : registry_.TakeAllLingering()) watcher_.Unwatch(id);
}

void DaemonCore::BeforeGpuCalls(std::string_view what) const {
  if (options_.before_gpu_calls) options_.before_gpu_calls(what);
}

namespace {

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
  // Before any lock: it may wait on the kubelet.
  const TenantIdentityOutcome resolved =
      ResolveTenantIdentity(options_.pod_resolver.get(), claimed, k8s_devices);
  const bool capped = !authorizer_.IsAdmin(creds);  // before any lock: may read the group database
  absl::ReaderMutexLock policy_lock(&policy_mu_);
  absl::StatusOr<SessionRegistry::Reservation> reserved = registry_.Reserve(creds, capped);
  if (!reserved.ok()) return reserved.status();
  if (reserved->existing) return *reserved->existing;  // the process registered already
  absl::StatusOr<SessionInfo> info =
      OpenReserved(reserved->id, creds, name, cls, requested_quota, resolved.identity);
  if (info.ok()) LogIdentityOutcome(info->id, resolved);
  return info;
}

absl::StatusOr<SessionInfo> DaemonCore::OpenReserved(uint64_t id, const PeerCredentials& creds,
                                                     const std::string& name, TenantClass cls,
                                                     uint64_t requested_quota,
                                                     const K8sIdentity& k8s) {
  SessionInfo info;
  info.id = id;
  info.creds = creds;
  info.name = name;
  info.k8s = k8s;
  info.cls = cls;
  info.priority = policy_.class_defaults(cls).priority;
  info.weight = WeightOf(info.priority);
  // An administrator's policy for this name and uid, kept from an earlier session.
  const std::optional<TenantPolicyState> kept = policy_.FindTenant(name, creds.uid);
  if (kept) {
    info.cls = kept->cls;
    info.priority = kept->priority;
    info.weight = kept->weight;
    info.budget_pct = kept->budget_pct.value_or(0);
  }
  info.started = std::chrono::steady_clock::now();
  info.token.resize(16);
  if (getrandom(info.token.data(), info.token.size(), 0) != 16) {
    registry_.Abort(id);
    return absl::InternalError("getrandom failed");
  }
  if (absl::Status s = watcher_.Watch(id, creds.pid); !s.ok()) {
    registry_.Abort(id);
    return s;
  }
  if (absl::Status s = AddToGpus(info, requested_quota, kept ? kept->quota_bytes : std::nullopt);
      !s.ok()) {
    watcher_.Unwatch(id);
    registry_.Abort(id);
    return s;
  }
  if (absl::Status s = registry_.Publish(info); !s.ok()) {
    // The process exited, EndSession ended it, or the daemon began stopping meanwhile.
    BeforeGpuCalls("unregister");
    RemoveFromGpus(id, /*process_lives=*/false);
    watcher_.Unwatch(id);
    Log()->info("session {}: pid {} uid {} not registered: {}", id, creds.pid, creds.uid,
                std::string(s.message()));
    return s;
  }
  sessions_opened_.fetch_add(1, std::memory_order_relaxed);
  Log()->info("session {}: pid {} uid {} registered as '{}' ({}, priority {}, weight {}){}{}",
              info.id, creds.pid, creds.uid, name, TenantClassName(info.cls), info.priority,
              info.weight, PodNote(k8s), kept ? "; policy kept for this name and uid" : "");
  return info;
}

absl::Status DaemonCore::AddToGpus(const SessionInfo& info, uint64_t requested_quota,
                                   std::optional<uint64_t> kept_quota) {
  BeforeGpuCalls("register");
  for (size_t g = 0; g < gpus_.size(); ++g) {
    absl::Status s = gpus_[g].pool->AddTenant(info.id, info.cls, requested_quota);
    if (s.ok() && kept_quota) {
      s = gpus_[g].pool->SetTenantQuota(info.id, *kept_quota);
      if (!s.ok()) gpus_[g].pool->RemoveTenant(info.id);
    }
    if (!s.ok()) {
      for (size_t undo = 0; undo < g; ++undo) gpus_[undo].pool->RemoveTenant(info.id);
      return s;
    }
  }
  // A pacing slot from the start, so the LS tenants of a GPU know there is a BE tenant to tell
  // before the BE's first launch (the shim maps the region at its first work item).
  for (Gpu& gpu : gpus_) {
    if (!gpu.pacing) continue;
    if (absl::Status s = gpu.pacing->Assign(info.id, info.creds.pid, info.cls, info.weight);
        !s.ok()) {
      Log()->warn("session {}: its GPU work is not paced: {}", info.id, std::string(s.message()));
    }
  }
  PushBudget(info);
  return absl::OkStatus();
}

uint32_t DaemonCore::BudgetOf(const SessionInfo& session) const {
  if (session.budget_pct != 0) return session.budget_pct;
  return policy_.class_defaults(session.cls).budget_pct;
}

void DaemonCore::PushBudget(const SessionInfo& session) {
  const uint32_t pct = BudgetOf(session);
  for (Gpu& gpu : gpus_) {
    if (gpu.pacing) gpu.pacing->SetBudget(session.id, pct);
  }
}

size_t DaemonCore::RemoveFromGpus(uint64_t session, bool process_lives) {
  size_t returned = 0;
  for (Gpu& gpu : gpus_) {
    if (gpu.arbiter) gpu.arbiter->CloseChannel(session);
    if (gpu.pacing) gpu.pacing->Leave(session);
    returned += gpu.pool->RemoveTenant(session, process_lives).size();
  }
  return returned;
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
  if (auto s = registry_.Find(creds, session); !s.ok()) return s.status();
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
  if (auto s = registry_.Find(creds, session); !s.ok()) return s.status();
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  return gpus_[gpu].pool->Free(session, ids);
}

absl::StatusOr<Usage> DaemonCore::GetUsage(const PeerCredentials& creds, uint64_t session,
                                           uint32_t gpu) {
  if (auto s = registry_.Find(creds, session); !s.ok()) return s.status();
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  return gpus_[gpu].pool->GetUsage(session);
}

absl::StatusOr<SessionInfo> DaemonCore::WaitForChange(const PeerCredentials& creds,
                                                      uint64_t session, uint64_t seen,
                                                      const std::function<bool()>& cancelled) {
  return registry_.WaitForChange(creds, session, seen, cancelled);
}

void DaemonCore::EndSession(uint64_t session, const std::string& reason) {
  const std::optional<SessionInfo> s = registry_.End(session);  // its watchers are told
  if (!s) return;
  sessions_ended_.fetch_add(1, std::memory_order_relaxed);
  const bool lives = watcher_.Lives(session);
  // A process that still runs stays watched, so its exit ends the count of what it may still
  // map; otherwise its pidfd goes now.
  const bool linger = lives && !stopping_;
  if (!linger) watcher_.Unwatch(session);
  BeforeGpuCalls("end");
  const size_t returned = RemoveFromGpus(session, lives);
  // Recorded once the pools counted it. An exit before this line is reported again at the
  // watcher's next wake-up: a pidfd stays readable.
  if (linger) registry_.AddLingering(session);
  if (lives) {
    // Blocks it was handed are destroyed unscrubbed and never leased again (vram_pool.h).
    Log()->warn("session {} ('{}', pid {}) ended while its process runs: {}; {} blocks released "
                "(those it was handed stay counted as possibly mapped until it exits)",
                session, s->name, s->creds.pid, reason, returned);
    return;
  }
  Log()->info("session {} ('{}', pid {}) ended: {}; {} blocks returned to the pools", session,
              s->name, s->creds.pid, reason, returned);
}

void DaemonCore::SideChannelClosed(uint64_t session, const std::string& reason) {
  for (Gpu& gpu : gpus_) {
    if (gpu.arbiter) gpu.arbiter->CloseChannel(session);
  }
  Log()->info("session {}: {}; the session goes on until its process exits", session, reason);
}

void DaemonCore::OnProcessExit(uint64_t key) {
  EndSession(key, "process exited");  // nothing if it ended before
  ForgetLingering(key);                // nothing unless it ended before
}

void DaemonCore::ForgetLingering(uint64_t session) {
  if (!registry_.TakeLingering(session)) return;
  watcher_.Unwatch(session);
  BeforeGpuCalls("forget");
  uint64_t bytes = 0;
  for (Gpu& gpu : gpus_) bytes += gpu.pool->ForgetReleased(session);
  Log()->info("the process of ended session {} exited; {} bytes it may have mapped are free",
              session, bytes);
}

absl::StatusOr<SessionInfo> DaemonCore::GetSession(const PeerCredentials& creds,
                                                   uint64_t session) const {
  return registry_.Find(creds, session);
}

absl::StatusOr<uint64_t> DaemonCore::AddWatcher(const PeerCredentials& creds, uint64_t session,
                                                size_t max_watchers,
                                                std::function<void()> on_change) {
  return registry_.AddWatcher(creds, session, max_watchers, std::move(on_change));
}

void DaemonCore::RemoveWatcher(uint64_t session, uint64_t watcher) {
  registry_.RemoveWatcher(session, watcher);
}

std::vector<SessionInfo> DaemonCore::ListSessions() const { return registry_.List(); }

ClassDefaults DaemonCore::class_defaults(TenantClass cls) const {
  return policy_.class_defaults(cls);
}

std::chrono::steady_clock::duration DaemonCore::uptime() const {
  return std::chrono::steady_clock::now() - started_;
}

bool DaemonCore::IsAdmin(const PeerCredentials& creds) const { return authorizer_.IsAdmin(creds); }

std::optional<PacingSettings> DaemonCore::pacing_settings() const {
  for (const Gpu& gpu : gpus_) {
    if (gpu.pacing) return gpu.pacing->settings();
  }
  return std::nullopt;
}

absl::StatusOr<PacingUpdate> DaemonCore::SetPacing(const PeerCredentials& creds,
                                                   const PacingChange& change) {
  if (absl::Status s = authorizer_.Check(creds, "change pacing"); !s.ok()) return s;
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

absl::Status DaemonCore::AuthenticateSideChannel(const PeerCredentials& creds, uint64_t session,
                                                 std::string_view token) const {
  absl::StatusOr<SessionInfo> s = registry_.Find(creds, session);
  if (!s.ok()) return s.status();
  if (s->token != token) return absl::PermissionDeniedError("bad side-channel token");
  return absl::OkStatus();
}

absl::StatusOr<std::vector<int>> DaemonCore::FetchBlocks(const PeerCredentials& creds,
                                                         uint64_t session, uint32_t gpu,
                                                         const std::vector<BlockId>& ids) {
  if (auto s = registry_.Find(creds, session); !s.ok()) return s.status();
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
  absl::StatusOr<SessionInfo> info = registry_.Find(creds, session);
  if (!info.ok()) return info.status();
  if (!gpus_[gpu].arbiter) return absl::UnavailableError("no PCIe arbiter on this GPU");
  return gpus_[gpu].arbiter->OpenChannel(session, info->cls, info->weight);
}

absl::StatusOr<std::pair<int, int>> DaemonCore::OpenPacing(const PeerCredentials& creds,
                                                           uint64_t session, uint32_t gpu) {
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  // Shared, so no policy change comes between the session's policy read here and its slot's.
  absl::ReaderMutexLock policy_lock(&policy_mu_);
  absl::StatusOr<SessionInfo> info = registry_.Find(creds, session);
  if (!info.ok()) return info.status();
  if (!gpus_[gpu].pacing) return absl::UnavailableError("no pacing domain on this GPU");
  auto fds = gpus_[gpu].pacing->Join(session, info->creds.pid, info->cls, info->weight);
  if (!fds.ok()) return fds.status();
  // A slot taken only now (none was free at registration) starts with no budget of its own.
  gpus_[gpu].pacing->SetBudget(session, BudgetOf(*info));
  return std::make_pair(fds->directory, fds->lanes);
}

absl::StatusOr<int> DaemonCore::OpenPeerLanes(const PeerCredentials& creds, uint64_t session,
                                              uint32_t gpu, uint32_t slot, uint64_t epoch) {
  if (absl::Status s = CheckGpu(gpu); !s.ok()) return s;
  if (auto s = registry_.Find(creds, session); !s.ok()) return s.status();
  if (!gpus_[gpu].pacing) return absl::UnavailableError("no pacing domain on this GPU");
  return gpus_[gpu].pacing->OpenPeerLanes(session, slot, epoch);
}

}  // namespace missile::daemon
