// The daemon's domain logic: tenant sessions, their VRAM on every GPU, and the admin
// operations, with no gRPC in sight (rpc_server.cc translates protobuf to these calls).
//
// A session belongs to one process, identified by the kernel-reported credentials of its
// connection. It ends when the process exits (a pidfd per session, watched by one thread) or the
// daemon stops; everything it held on every GPU goes back to the pools at once. A closed side
// channel or Watch stream (a stalled daemon, a shim that gave up waiting) does not end it: the
// process may still map its blocks, and registers again into the same session.
// A session that ends while its process lives (daemon stopping, EndSession from a test) leaves
// the blocks it was handed "released, may still be mapped" (vram_pool.h) until the process exits.
// The two servers in front of it, RpcServer (gRPC) and SideChannelServer (descriptors), own
// their sockets and wire formats; DaemonCore owns no socket. Its GPUs are plain Gpu values over
// a BlockSource, so it runs in one process over fake sources in tests.
//
// DaemonCore is a facade over four parts, each with its own lock: SessionRegistry (the sessions,
// their watchers), ProcessWatcher (the pidfds and their thread), AdminAuthorizer (who is an
// administrator) and PolicyStore (the policy set at run time, its state file). It calls the
// GPUs' pools, arbiters and pacing domains itself, never while it holds a registry lock: a
// registration reserves its id, adds the tenant to the GPUs, then publishes it (or undoes it
// when the session ended or the daemon stopped in between).
// Thread-safety: every public method may be called from any thread.
#ifndef MISSILE_DAEMON_CORE_H_
#define MISSILE_DAEMON_CORE_H_

#include <atomic>
#include <chrono>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "admin_authorizer.h"
#include "copy_arbiter.h"
#include "gpu.h"
#include "log_limiter.h"
#include "missile/common/fd_passing.h"
#include "missile/common/k8s_identity.h"
#include "missile/common/tenant_class.h"
#include "pacing_domain.h"
#include "pod_identity_resolver.h"
#include "policy_state.h"
#include "policy_store.h"
#include "process_watcher.h"
#include "session_registry.h"
#include "vram_pool.h"

namespace missile::daemon {

struct CoreOptions {
  std::string fd_socket_path;  // reported to tenants at registration; SideChannelServer serves it
  std::optional<unsigned> admin_gid;  // members may change policy; root always may
  ClassDefaults ls{-10};
  ClassDefaults be{10};
  // Where SetPolicy's changes are kept across restarts (policy_state.h); "" = not kept.
  std::string state_file;
  // Sessions one uid may hold at once (limits.max_sessions_per_uid); administrators (IsAdmin)
  // are not held to it. Below the pacing slots of a GPU (64), so no one uid takes them all.
  size_t max_sessions_per_uid = 16;
  // NVIDIA MPS as missiled found it at start, for Status (MpsStatus in missile.proto).
  bool tenants_on_mps = false;
  bool mps_managed_by_missiled = false;  // [compute] mps = "start"
  std::string mps_pipe_directory;
  // Asked for a tenant's pod, namespace and container when it registers with device IDs
  // ([kubernetes] pod_resources_socket); null: the tenant's own claim is taken as it is.
  std::shared_ptr<PodIdentityResolver> pod_resolver;
  // For tests: called on the calling thread just before the core calls the GPUs' pools, arbiters
  // or pacing domains for a session or a class ("register", "unregister", "end", "forget",
  // "policy"), so a test can check that no registry lock is held then. Null in missiled.
  std::function<void(std::string_view what)> before_gpu_calls;
};


struct PolicyChange {
  std::optional<TenantClass> cls;
  std::optional<int> priority;
  std::optional<uint32_t> weight;
  std::optional<uint64_t> quota_bytes;
  std::optional<uint64_t> class_quota_bytes;
  // Instead of the bytes: a percentage of each GPU's pool, (0, 100], resolved per GPU.
  std::optional<double> quota_percent;
  std::optional<double> class_quota_percent;
  // LS: the latency budget in percent, 100..1000, of a tenant (its own) or of the LS class (its
  // tenants without their own follow it); 0 clears it.
  std::optional<uint32_t> budget_pct;
  // Apply a quota change even when live tenants hold more than their new quota; without it
  // such a change is FAILED_PRECONDITION naming them, and nothing changes.
  bool force = false;
};

// What DaemonCore::SetPacing changed: the policy in force before and after.
struct PacingUpdate {
  PacingSettings before;
  PacingSettings after;
};

struct PolicyTarget {
  std::optional<int> pid;
  std::optional<std::string> name;
  std::optional<TenantClass> cls;
};

class DaemonCore {
 public:
  DaemonCore(CoreOptions options, std::vector<Gpu> gpus);
  ~DaemonCore();
  DaemonCore(const DaemonCore&) = delete;
  DaemonCore& operator=(const DaemonCore&) = delete;

  // Restores the policy kept in options.state_file (a file that cannot be read or parsed is
  // logged and ignored, never fatal; one that does not parse is moved to <file>.bad) and starts
  // the process watcher.
  absl::Status Start();
  // Wakes every waiting Watch call so the servers can drain quickly; then Stop.
  void BeginShutdown();
  // Stops the process watcher and ends every session. Call after the servers have shut down.
  void Stop();
  bool stopping() const { return stopping_; }

  const std::vector<Gpu>& gpus() const { return gpus_; }
  const CoreOptions& options() const { return options_; }
  // 32 hex digits, random per daemon process (RegisterResponse.daemon_instance).
  const std::string& instance() const { return instance_; }

  // --- tenants ---
  // `k8s`: the pod, namespace and container the tenant says it runs in (any field may be empty);
  // a field out of bounds (common/k8s_identity.h) is INVALID_ARGUMENT, and nothing registers.
  // `k8s_devices`: the device IDs the kubelet allocated to its container; with a pod_resolver
  // they are looked up (before any lock is taken, so a slow kubelet holds up only this call, for
  // at most the resolver's deadline) and the answer replaces `k8s` (ResolveTenantIdentity). The
  // lookup never fails the registration.
  absl::StatusOr<SessionInfo> Register(const PeerCredentials& creds, const std::string& name,
                                       TenantClass cls, uint64_t requested_quota,
                                       const K8sIdentity& k8s = {},
                                       const std::vector<std::string>& k8s_devices = {})
      ABSL_LOCKS_EXCLUDED(policy_mu_);
  absl::StatusOr<std::vector<Lease>> Allocate(const PeerCredentials& creds, uint64_t session,
                                              uint32_t gpu, bool single, uint64_t bytes);
  absl::Status Free(const PeerCredentials& creds, uint64_t session, uint32_t gpu,
                    const std::vector<BlockId>& ids);
  absl::StatusOr<Usage> GetUsage(const PeerCredentials& creds, uint64_t session, uint32_t gpu);
  // Waits until the session's policy generation passes `seen`, it ends, or `cancelled()`.
  // Returns the session as it is then (ended = true once it is over).
  absl::StatusOr<SessionInfo> WaitForChange(const PeerCredentials& creds, uint64_t session,
                                            uint64_t seen, const std::function<bool()>& cancelled);
  // Ends the session (see the header comment); a process that still runs keeps its pidfd
  // watched, so its released memory is counted until it exits.
  void EndSession(uint64_t session, const std::string& reason);
  // The session's side channel closed or broke (`reason`): its copy channels close, so a new
  // side channel of the same process can open them again; the session goes on.
  void SideChannelClosed(uint64_t session, const std::string& reason);
  // The session as it is now; NOT_FOUND once it has ended.
  absl::StatusOr<SessionInfo> GetSession(const PeerCredentials& creds, uint64_t session) const;
  // Watchers, for Watch streams served without a thread each. `on_change` is called after each
  // policy change of the session and once when it ends (then the watcher is dropped), from the
  // thread that made the change, with no DaemonCore lock held except the watchers' own:
  // `on_change` must be quick and must not call AddWatcher or RemoveWatcher.
  // RESOURCE_EXHAUSTED when the session already has `max_watchers`.
  absl::StatusOr<uint64_t> AddWatcher(const PeerCredentials& creds, uint64_t session,
                                      size_t max_watchers, std::function<void()> on_change);
  // Once this returns, the watcher's `on_change` is not running and is never called again.
  void RemoveWatcher(uint64_t session, uint64_t watcher);
  // INVALID_ARGUMENT for a GPU index the daemon does not manage.
  absl::Status CheckGpu(uint32_t gpu) const;

  // --- side channel (SideChannelServer translates its wire format to these) ---
  // The session must belong to the caller's process and `token` must be its token.
  absl::Status AuthenticateSideChannel(const PeerCredentials& creds, uint64_t session,
                                       std::string_view token) const;
  // Descriptors of blocks the session holds on `gpu`, in the order of `ids`; all or none. The
  // caller sends and closes them.
  absl::StatusOr<std::vector<int>> FetchBlocks(const PeerCredentials& creds, uint64_t session,
                                               uint32_t gpu, const std::vector<BlockId>& ids);
  // The session's copy channel on `gpu`: the region's memfd and the doorbell's tenant end.
  absl::StatusOr<std::pair<int, int>> OpenCopyChannel(const PeerCredentials& creds,
                                                      uint64_t session, uint32_t gpu);
  // The session's pacing descriptors on `gpu`: the GPU's directory (read-only for the tenant)
  // and the session's lanes page (pacing_domain.h).
  absl::StatusOr<std::pair<int, int>> OpenPacing(const PeerCredentials& creds, uint64_t session,
                                                 uint32_t gpu) ABSL_LOCKS_EXCLUDED(policy_mu_);
  // A read-only descriptor of another session's published lanes page on `gpu`, for a BE
  // session (PacingDomain::OpenPeerLanes).
  absl::StatusOr<int> OpenPeerLanes(const PeerCredentials& creds, uint64_t session, uint32_t gpu,
                                    uint32_t slot, uint64_t epoch);

  // Advances while the process watcher's loop runs (at least every 200 ms), for the watchdog.
  uint64_t heartbeat() const { return watcher_.heartbeat(); }

  // --- admin ---
  // Root, or a member of options.admin_group (may read the group database: not on hot paths).
  bool IsAdmin(const PeerCredentials& creds) const;
  std::vector<SessionInfo> ListSessions() const;
  // Root or the admin group only. Logs who (uid, pid) changed what (before -> after), and
  // writes the policy to options.state_file, where a tenant registering later with the same
  // name and uid (after a restart too) gets its class, priority, weight, quota and latency
  // budget back.
  absl::StatusOr<uint32_t> SetPolicy(const PeerCredentials& creds, const PolicyTarget& target,
                                     const PolicyChange& change) ABSL_LOCKS_EXCLUDED(policy_mu_);
  ClassDefaults class_defaults(TenantClass cls) const;
  // The pacing policy in force (the same on every GPU); nullopt when no GPU is paced.
  std::optional<PacingSettings> pacing_settings() const;
  // Applies `change` to every GPU's pacing domain, where the shims read it at their next
  // decision. Root or the admin group only (PERMISSION_DENIED); a value out of range is
  // INVALID_ARGUMENT naming the field, and an empty change too; either way nothing changes.
  // Logs who (uid, pid) changed what (before -> after). Concurrent calls apply one at a time.
  absl::StatusOr<PacingUpdate> SetPacing(const PeerCredentials& creds, const PacingChange& change)
      ABSL_LOCKS_EXCLUDED(pacing_mu_);
  // The whole policy, from missiled itself (a configuration re-read on SIGHUP): every GPU gets
  // `settings`; returns the policy in force before and after.
  absl::StatusOr<PacingUpdate> ReplacePacing(const PacingSettings& settings)
      ABSL_LOCKS_EXCLUDED(pacing_mu_);
  std::chrono::steady_clock::duration uptime() const;
  // The wall-clock time the daemon started (missile_start_time_seconds).
  std::chrono::system_clock::time_point start_time() const { return started_wall_; }
  // Sessions registered and ended since the daemon started (for the metrics endpoint).
  uint64_t sessions_opened() const { return sessions_opened_.load(std::memory_order_relaxed); }
  uint64_t sessions_ended() const { return sessions_ended_.load(std::memory_order_relaxed); }

 private:
  // The registration's identity note (ResolveTenantIdentity), if any: a disagreement with the
  // tenant's claim as it comes, a failure to ask at most once per 10 s.
  void LogIdentityOutcome(uint64_t session, const TenantIdentityOutcome& outcome);
  // Register once `id` is reserved: the session's info, its process watched, the tenant on every
  // GPU (no registry lock held), then published. Undoes all of it when any step fails, or when
  // the session ended or the daemon began stopping before it could be published.
  absl::StatusOr<SessionInfo> OpenReserved(uint64_t id, const PeerCredentials& creds,
                                           const std::string& name, TenantClass cls,
                                           uint64_t requested_quota, const K8sIdentity& k8s)
      ABSL_SHARED_LOCKS_REQUIRED(policy_mu_);
  // The GPU side of a session: its tenant in every pool (with `kept_quota` when an
  // administrator set one) and its pacing slots; all or nothing.
  absl::Status AddToGpus(const SessionInfo& info, uint64_t requested_quota,
                         std::optional<uint64_t> kept_quota);
  // Takes the session off every GPU: copy channels closed, pacing slots left, its blocks back to
  // the pools (`process_lives`: see VramPool::RemoveTenant). Returns the blocks released.
  size_t RemoveFromGpus(uint64_t session, bool process_lives);
  // The process watched under `key` (a session id) exited.
  void OnProcessExit(uint64_t key);
  // The process of an ended session exited: its released memory stops counting.
  void ForgetLingering(uint64_t session);
  void BeforeGpuCalls(std::string_view what) const;
  // The latency budget a session's pacing slots get (PacingDomain::SetBudget): its own, else
  // its class's; 0 when neither is set ([compute] ls_budget_pct applies).
  uint32_t BudgetOf(const SessionInfo& session) const;
  // Gives the session's pacing slot on every GPU BudgetOf(session).
  void PushBudget(const SessionInfo& session);

  // --- admin policy (core_policy.cc) ---
  // SetPolicy once the caller and the request were checked; the ids of the sessions it changed
  // go to `changed`.
  absl::StatusOr<uint32_t> ApplyPolicy(const PeerCredentials& creds, const PolicyTarget& target,
                                       const PolicyChange& change, std::vector<uint64_t>* changed)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(policy_mu_);
  // The quota and priority parts of a policy change aimed at a whole class, made by `creds`.
  absl::Status SetClassPolicy(const PeerCredentials& creds, TenantClass cls,
                              const PolicyChange& change) ABSL_EXCLUSIVE_LOCKS_REQUIRED(policy_mu_);
  // A policy change for one matched session: its pools first, then its info in the registry,
  // then its arbiters and pacing domains; logs it and records it in the policy store. A session
  // that ends meanwhile is left alone.
  absl::Status ApplyToSession(const PeerCredentials& creds, const SessionInfo& session,
                              const PolicyTarget& target, const PolicyChange& change)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(policy_mu_);
  // With `change` applied to the `matched` sessions (and, for a class target, to its class),
  // one line for each tenant on each GPU, and each class, that would hold more than its quota.
  std::vector<std::string> OverQuota(const PolicyTarget& target, const PolicyChange& change,
                                     const std::vector<SessionInfo>& matched) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(policy_mu_);
  // Loads the state file into the policy store and applies its class defaults (Start).
  void RestorePolicy() ABSL_LOCKS_EXCLUDED(policy_mu_);

  const CoreOptions options_;
  const std::string instance_;
  // The GPUs' class quotas (Gpu::quota) change under policy_mu_ held exclusively.
  std::vector<Gpu> gpus_;
  const std::chrono::steady_clock::time_point started_ = std::chrono::steady_clock::now();
  const std::chrono::system_clock::time_point started_wall_ = std::chrono::system_clock::now();

  const AdminAuthorizer authorizer_;
  PolicyStore policy_;
  // Admin policy changes (SetPolicy, RestorePolicy) hold it exclusively, each with its pool
  // calls and its save; a registration holds it shared from its policy lookup to its
  // publication, so it gets a class's policy from before a change or after it, never a mix, and
  // a change sees every session it could apply to. Taken before any registry lock.
  absl::Mutex policy_mu_;
  SessionRegistry registry_;
  // Quota refusals are a tenant's own doing and may come in floods: one warning per interval.
  LogLimiter quota_log_{std::chrono::seconds(10)};
  LogLimiter pod_log_{std::chrono::seconds(10)};  // identities the kubelet did not give
  // Serialises SetPacing, so every GPU ends with the same policy.
  absl::Mutex pacing_mu_;

  std::atomic<bool> stopping_{false};
  std::atomic<bool> stopped_{false};
  std::atomic<uint64_t> sessions_opened_{0};
  std::atomic<uint64_t> sessions_ended_{0};
  // Last: destroyed first, so its thread never calls into a part already gone.
  ProcessWatcher watcher_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_CORE_H_
