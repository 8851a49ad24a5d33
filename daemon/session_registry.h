// The daemon's tenant sessions: each one's id, process, name, class, priority, weight and token,
// found by id or by the pid that owns it; the ended sessions whose process still runs; and the
// Watch streams of each session. Nothing here calls a pool, an arbiter or a pacing domain: a
// registration reserves its id here (Reserve), DaemonCore adds the tenant to the GPUs with no
// registry lock held, then publishes it (Publish) or gives the id back (Abort).
//
// Owns the sessions, guarded by mu_, and the watchers, guarded by watchers_mu_ (taken before
// mu_ where both are held, so a session cannot end between a watcher's check and its
// registration unnoticed).
// Thread-safety: every method may be called from any thread. No method calls out while it holds
// mu_, except WaitForChange's `cancelled`; watchers' callbacks run under watchers_mu_ only.
#ifndef MISSILE_DAEMON_SESSION_REGISTRY_H_
#define MISSILE_DAEMON_SESSION_REGISTRY_H_

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/fd_passing.h"
#include "missile/common/k8s_identity.h"
#include "missile/common/tenant_class.h"

namespace missile::daemon {

using fdpass::PeerCredentials;

struct SessionInfo {
  uint64_t id = 0;
  PeerCredentials creds;
  std::string name;
  // From the kubelet where options.pod_resolver found the tenant's devices, else as the tenant
  // registered it; empty fields: not known.
  K8sIdentity k8s;
  TenantClass cls = TenantClass::kBestEffort;
  int priority = 0;
  uint32_t weight = 0;
  // Its own LS latency budget in percent (missilectl set --budget-pct); 0: none, it follows
  // its class's.
  uint32_t budget_pct = 0;
  std::string token;  // 16 random bytes
  std::chrono::steady_clock::time_point started;
  uint64_t generation = 0;  // bumped on every policy change
  bool ended = false;
};

class SessionRegistry {
 public:
  // Ids are handed out from `first_id` up. A caller Reserve calls `capped` may hold at most
  // `max_sessions_per_uid` sessions per uid, reserved ones included.
  SessionRegistry(uint64_t first_id, size_t max_sessions_per_uid);
  SessionRegistry(const SessionRegistry&) = delete;
  SessionRegistry& operator=(const SessionRegistry&) = delete;

  struct Reservation {
    uint64_t id = 0;                      // reserved for the new session; 0 with `existing`
    std::optional<SessionInfo> existing;  // the process's session, when it has one already
  };
  // Reserves an id for a new session of creds.pid, or returns the session it has. Waits while
  // another registration of the same pid is between its Reserve and its Publish or Abort.
  // RESOURCE_EXHAUSTED when `capped` and creds.uid holds its most; UNAVAILABLE once closed.
  absl::StatusOr<Reservation> Reserve(const PeerCredentials& creds, bool capped)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Publishes the reserved session `info` (info.id from Reserve, info.creds as given there).
  // UNAVAILABLE, and the reservation is gone, when it was ended (End) or the registry closed
  // since Reserve: the caller undoes what it did for the session.
  absl::Status Publish(const SessionInfo& info) ABSL_LOCKS_EXCLUDED(mu_);
  // Gives back a reservation that will not be published.
  void Abort(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);

  // Ends the session: it is found no more, its waiters return, and its watchers are called once
  // more and dropped. Returns it as it was then; nullopt when no session of that id is
  // published (a reserved one is marked, so that its Publish fails).
  std::optional<SessionInfo> End(uint64_t id) ABSL_LOCKS_EXCLUDED(watchers_mu_, mu_);
  // Every later Reserve and Publish fails (the daemon is stopping). Returns the ids of the
  // published sessions, for the caller to end.
  std::vector<uint64_t> Close() ABSL_LOCKS_EXCLUDED(mu_);
  // Wakes every WaitForChange; from now on they return at once.
  void WakeAll() ABSL_LOCKS_EXCLUDED(mu_);

  // The session if it is published and belongs to creds.pid: NOT_FOUND for none (or one that
  // ended), PERMISSION_DENIED for another process's.
  absl::StatusOr<SessionInfo> Find(const PeerCredentials& creds, uint64_t id) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // The published sessions, by id.
  std::vector<SessionInfo> List() const ABSL_LOCKS_EXCLUDED(mu_);
  // Applies `change` to the published session, bumps its generation and wakes its waiters;
  // returns it as it is after. NOT_FOUND once it has ended. `change` runs under mu_: it must be
  // quick and call nothing outside the SessionInfo.
  absl::StatusOr<SessionInfo> Update(uint64_t id, const std::function<void(SessionInfo&)>& change)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Waits until the session's generation passes `seen`, it ends, WakeAll, or `cancelled()`
  // (asked at least every 200 ms, under mu_). Returns the session as it is then.
  absl::StatusOr<SessionInfo> WaitForChange(const PeerCredentials& creds, uint64_t id,
                                            uint64_t seen, const std::function<bool()>& cancelled)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Ended sessions whose process still ran then (the pools count what they were handed until it
  // exits).
  void AddLingering(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether `id` was lingering; it is not any more.
  bool TakeLingering(uint64_t id) ABSL_LOCKS_EXCLUDED(mu_);
  std::vector<uint64_t> TakeAllLingering() ABSL_LOCKS_EXCLUDED(mu_);

  // Watchers of a published session, for Watch streams served without a thread each (see
  // DaemonCore::AddWatcher). RESOURCE_EXHAUSTED when it has `max_watchers` already.
  absl::StatusOr<uint64_t> AddWatcher(const PeerCredentials& creds, uint64_t id,
                                      size_t max_watchers, std::function<void()> on_change)
      ABSL_LOCKS_EXCLUDED(watchers_mu_, mu_);
  // Once this returns, the watcher's `on_change` is not running and is never called again.
  void RemoveWatcher(uint64_t id, uint64_t watcher) ABSL_LOCKS_EXCLUDED(watchers_mu_);
  // Calls the session's watchers; `ended` drops them afterwards.
  void NotifyWatchers(uint64_t id, bool ended) ABSL_LOCKS_EXCLUDED(watchers_mu_);

 private:
  struct Reserved {
    PeerCredentials creds;
    bool ended = false;  // End came before Publish
  };

  absl::StatusOr<std::shared_ptr<SessionInfo>> FindLocked(const PeerCredentials& creds,
                                                          uint64_t id) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t SessionsOfUidLocked(unsigned uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Forgets a reservation and wakes registrations of the same pid waiting on it.
  void DropReservedLocked(uint64_t id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const size_t max_sessions_per_uid_;

  absl::Mutex watchers_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  absl::flat_hash_map<uint64_t, absl::flat_hash_map<uint64_t, std::function<void()>>> watchers_
      ABSL_GUARDED_BY(watchers_mu_);
  uint64_t next_watcher_ ABSL_GUARDED_BY(watchers_mu_) = 1;

  mutable absl::Mutex mu_;
  absl::CondVar changed_;  // a session changed, ended, was published or given back
  // Shared with WaitForChange calls, which see it ended after End erased it.
  absl::flat_hash_map<uint64_t, std::shared_ptr<SessionInfo>> sessions_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Reserved> reserved_ ABSL_GUARDED_BY(mu_);
  // Published and reserved sessions alike.
  absl::flat_hash_map<int, uint64_t> session_by_pid_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_set<uint64_t> lingering_ ABSL_GUARDED_BY(mu_);
  uint64_t next_id_ ABSL_GUARDED_BY(mu_);
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
  bool woken_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_SESSION_REGISTRY_H_
