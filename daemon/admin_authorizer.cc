#include "admin_authorizer.h"

#include <grp.h>
#include <pwd.h>

#include <algorithm>
#include <string>
#include <utility>

namespace missile::daemon {

std::optional<std::vector<gid_t>> AdminAuthorizer::SystemGroups(uid_t uid) {
  passwd pw{}, *result = nullptr;
  std::vector<char> buf(16384);
  if (getpwuid_r(uid, &pw, buf.data(), buf.size(), &result) != 0 || result == nullptr) {
    return std::nullopt;
  }
  int n = 64;
  std::vector<gid_t> groups(n);
  if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) {
    groups.resize(n);
    if (getgrouplist(pw.pw_name, pw.pw_gid, groups.data(), &n) < 0) return std::nullopt;
  }
  groups.resize(n);
  return groups;
}

AdminAuthorizer::AdminAuthorizer(std::optional<unsigned> admin_gid, GroupLookup groups)
    : admin_gid_(admin_gid), groups_(std::move(groups)) {}

bool AdminAuthorizer::IsAdmin(const fdpass::PeerCredentials& creds) const {
  if (creds.uid == 0) return true;
  if (!admin_gid_.has_value()) return false;
  if (creds.gid == *admin_gid_) return true;
  const std::optional<std::vector<gid_t>> groups = groups_(creds.uid);
  if (!groups) return false;
  return std::find(groups->begin(), groups->end(), *admin_gid_) != groups->end();
}

absl::Status AdminAuthorizer::Check(const fdpass::PeerCredentials& creds,
                                    std::string_view action) const {
  if (IsAdmin(creds)) return absl::OkStatus();
  return absl::PermissionDeniedError("uid " + std::to_string(creds.uid) + " may not " +
                                     std::string(action) + ": root or the admin group only");
}

}  // namespace missile::daemon
