// The gRPC connections RpcServer has accepted: each one's peer credentials (SO_PEERCRED), by
// descriptor number, and the per-uid limits on them (docs/operations.md, "Limits and
// timeouts").
//
// gRPC gives calls no peer credentials, so RpcServer accepts connections itself and records
// them here before handing them to gRPC; a call's peer ("fd:<number>") finds them again. gRPC
// closes a connection's descriptor without telling anyone, so an entry also holds the socket's
// inode at accept and a duplicate of the descriptor (`watch`): while the duplicate is open the
// inode cannot be reused, so "the number still names that inode" is exactly "gRPC still has the
// connection open". A closed connection's entry is dropped (and its duplicate closed) when it
// is looked up, when its uid or the total reaches a cap, and in the periodic ExpireIdle; so the
// counts are of open connections, and the map stays within twice the open connections.
//
// Limits: a connection of a uid that already holds `per_uid` open connections, or when all uids
// together hold `total`, is refused (RESOURCE_EXHAUSTED) unless the caller's `is_admin` says the
// peer is root or in the admin group: administrators' connections are counted like any other
// but never refused. A connection that has not registered a session and made no call for
// `idle_timeout` is shut down (through the duplicate, never by a number gRPC may have reused).
// Thread-safety: any thread.
#ifndef MISSILE_DAEMON_PEER_REGISTRY_H_
#define MISSILE_DAEMON_PEER_REGISTRY_H_

#include <sys/stat.h>
#include <sys/types.h>

#include <chrono>
#include <cstddef>
#include <functional>
#include <optional>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/fd_passing.h"

namespace missile::daemon {

using fdpass::PeerCredentials;

struct ConnectionLimits {
  size_t per_uid = 64;  // open connections of one uid, beyond which a non-admin is refused
  size_t total = 4096;  // open connections of all uids, beyond which a non-admin is refused
  std::chrono::milliseconds idle_timeout{10000};  // with no session and no call
};

class PeerRegistry {
 public:
  using Clock = std::chrono::steady_clock;

  explicit PeerRegistry(ConnectionLimits limits = {});
  ~PeerRegistry();  // closes the duplicates (not the connections gRPC owns)
  PeerRegistry(const PeerRegistry&) = delete;
  PeerRegistry& operator=(const PeerRegistry&) = delete;

  // Records the connection on `fd` if the limits allow it; RESOURCE_EXHAUSTED (saying which
  // limit) and nothing recorded otherwise: the caller closes `fd`. `is_admin` is asked only when
  // a cap is reached.
  absl::Status Admit(int fd, const PeerCredentials& creds, const std::function<bool()>& is_admin);
  // Records the connection whatever the limits (as an administrator's).
  void Record(int fd, const PeerCredentials& creds);
  // The credentials behind a gRPC peer string ("fd:12"), if that connection is still open; the
  // lookup counts as the connection's activity.
  std::optional<PeerCredentials> Lookup(const std::string& peer);
  // The connection behind `peer` carries a session (Register or Watch succeeded on it): it is
  // never closed as idle.
  void MarkSession(const std::string& peer);
  // Shuts down the open connections with no session and no activity since `now - idle_timeout`
  // and drops the closed ones. How many it shut down.
  size_t ExpireIdle(Clock::time_point now);

  size_t size() const;  // entries, closed ones not yet dropped included
  // Open connections of `uid`, and of all uids (drops closed ones first).
  size_t OpenOf(uid_t uid);
  size_t OpenTotal();

 private:
  struct Entry {
    PeerCredentials creds;
    dev_t dev = 0;
    ino_t ino = 0;
    int watch = -1;  // our duplicate of the connection; -1 if none could be made
    bool session = false;
    bool shut = false;  // shut down as idle; gRPC closes it next
    Clock::time_point active;
  };
  static bool StillOpen(int fd, const Entry& entry);
  // Drops the entries whose connection gRPC has closed (all, or only those of `uid`).
  void SweepLocked(std::optional<uid_t> uid) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseLocked(int fd) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  size_t OfUidLocked(uid_t uid) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // False (nothing recorded) when no duplicate of `fd` could be made and `need_watch`.
  bool Insert(int fd, const PeerCredentials& creds, bool need_watch);
  static std::optional<int> FdOf(const std::string& peer);

  const ConnectionLimits limits_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<int, Entry> by_fd_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uid_t, size_t> of_uid_ ABSL_GUARDED_BY(mu_);  // entries by uid
  size_t next_sweep_ ABSL_GUARDED_BY(mu_) = 64;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_PEER_REGISTRY_H_
