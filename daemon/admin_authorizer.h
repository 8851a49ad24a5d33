// Who may make the daemon's admin calls (SetPolicy, SetPacing) and who is held to the per-uid
// session cap: root, and members of the configured admin group. Membership is the caller's gid
// as the kernel reported it (SO_PEERCRED), or a group the group database lists for its user
// (getgrouplist). The credentials themselves come from the servers, never from a request.
//
// Owns the admin gid and the group lookup; no mutable state, so no lock.
// Thread-safety: every method may be called from any thread. IsAdmin may read the group
// database (files, or NSS: possibly the network): not on hot paths, and not under a lock that
// other calls wait on.
#ifndef MISSILE_DAEMON_ADMIN_AUTHORIZER_H_
#define MISSILE_DAEMON_ADMIN_AUTHORIZER_H_

#include <sys/types.h>

#include <functional>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "missile/common/fd_passing.h"

namespace missile::daemon {

class AdminAuthorizer {
 public:
  // The groups the group database lists for `uid`'s user (primary group included); nullopt
  // when the user or its groups cannot be found.
  using GroupLookup = std::function<std::optional<std::vector<gid_t>>(uid_t uid)>;

  // The system's group database: getpwuid_r, then getgrouplist.
  static std::optional<std::vector<gid_t>> SystemGroups(uid_t uid);

  // `admin_gid` nullopt: only root is an administrator.
  explicit AdminAuthorizer(std::optional<unsigned> admin_gid,
                           GroupLookup groups = &AdminAuthorizer::SystemGroups);

  // Root, or a member of the admin group.
  bool IsAdmin(const fdpass::PeerCredentials& creds) const;
  // OK for an administrator; otherwise PERMISSION_DENIED: "uid N may not <action>: root or the
  // admin group only".
  absl::Status Check(const fdpass::PeerCredentials& creds, std::string_view action) const;

 private:
  const std::optional<unsigned> admin_gid_;
  const GroupLookup groups_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_ADMIN_AUTHORIZER_H_
