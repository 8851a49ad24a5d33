// [limits]: what one uid may hold of the daemon (sessions, connections) and how long an idle
// connection may stay. Ranges here; the rules between the keys in CheckLimitRules.
#include <string>

#include "absl/strings/str_cat.h"
#include "daemon/internal/config_parser.h"

namespace missile::daemon::config_internal {

void Parser::ParseLimits(const toml::node& node, const std::string& path) {
  LimitsSection& l = c_->limits;
  Table(
      node, path,
      {{"max_sessions_per_uid",
        [&](Node n, Key k) { GetInt(n, k, 1, 32, &l.max_sessions_per_uid); }},
       {"max_connections_per_uid",
        [&](Node n, Key k) { GetInt(n, k, 1, 65536, &l.max_connections_per_uid); }},
       {"max_connections", [&](Node n, Key k) { GetInt(n, k, 1, 1048576, &l.max_connections); }},
       {"max_side_connections_per_uid",
        [&](Node n, Key k) { GetInt(n, k, 1, 65536, &l.max_side_connections_per_uid); }},
       {"idle_timeout_ms", [&](Node n, Key k) { GetInt(n, k, 100, 86400000, &l.idle_timeout_ms); }},
       {"admin_reserve_fds",
        [&](Node n, Key k) { GetInt(n, k, 64, 1048576, &l.admin_reserve_fds); }}});
}

void Parser::CheckLimitRules() {
  const LimitsSection& l = c_->limits;
  if (l.max_connections_per_uid < l.max_sessions_per_uid) {
    FailRule(
        "limits.max_connections_per_uid", "limits.max_sessions_per_uid",
        absl::StrCat("must be at least limits.max_sessions_per_uid (", l.max_sessions_per_uid,
                     "): each tenant process holds a connection, got ", l.max_connections_per_uid));
  }
  if (l.max_side_connections_per_uid < l.max_sessions_per_uid) {
    FailRule("limits.max_side_connections_per_uid", "limits.max_sessions_per_uid",
             absl::StrCat("must be at least limits.max_sessions_per_uid (", l.max_sessions_per_uid,
                          "): each session holds a side connection, got ",
                          l.max_side_connections_per_uid));
  }
  if (l.max_connections < l.max_connections_per_uid) {
    FailRule("limits.max_connections", "limits.max_connections_per_uid",
             absl::StrCat("must be at least limits.max_connections_per_uid (",
                          l.max_connections_per_uid, "), got ", l.max_connections));
  }
}

}  // namespace missile::daemon::config_internal
