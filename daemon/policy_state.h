// The policy set at run time (missilectl set), as kept across daemon restarts in the state file
// (daemon.state_file; by default policy.toml in systemd's state directory, /var/lib/missile).
//
// What is kept: each class's defaults that an administrator changed (priority, tenant quota,
// class quota, the LS class's latency budget), and per tenant the class, priority and weight it
// was left with and the quota and latency budget it was given. A tenant is a new process after a restart, so it is matched by what stays the same
// across restarts: its name together with its uid (never its pid or session). The uid is part
// of the key because a name is whatever a tenant chose to register with: another user taking a
// name in use does not inherit that name's policy.
//
// The file is TOML written by missiled only (SavePolicyState: a temporary file beside it,
// fsync, rename, fsync of the directory, so a crash leaves the old file or the new one, never a
// mix). LoadPolicyState reports a file that cannot be read or parsed as an error for the caller
// to log and ignore; it never fixes one up.
// Thread-safety: plain values and free functions; the file functions touch only their path.
#ifndef MISSILE_DAEMON_POLICY_STATE_H_
#define MISSILE_DAEMON_POLICY_STATE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/common/tenant_class.h"

namespace missile::daemon {

// A class's defaults as changed at run time; unset: the configuration's value.
struct ClassPolicyState {
  std::optional<int> priority;
  std::optional<uint64_t> tenant_quota_bytes;
  std::optional<uint64_t> class_quota_bytes;
  std::optional<uint32_t> budget_pct = std::nullopt;  // LS: 100..1000
  bool operator==(const ClassPolicyState&) const = default;
};

// One tenant's policy, by name and uid.
struct TenantPolicyState {
  std::string name;
  uint32_t uid = 0;
  TenantClass cls = TenantClass::kBestEffort;
  int priority = 0;
  uint32_t weight = 0;
  std::optional<uint64_t> quota_bytes;  // set by an administrator for this tenant
  std::optional<uint32_t> budget_pct = std::nullopt;  // its own LS latency budget, 100..1000
  bool operator==(const TenantPolicyState&) const = default;
};

struct PolicyState {
  ClassPolicyState ls;
  ClassPolicyState be;
  std::vector<TenantPolicyState> tenants;  // at most one per (name, uid), sorted by both

  ClassPolicyState& of(TenantClass cls) {
    return cls == TenantClass::kLatencySensitive ? ls : be;
  }
  // The tenant's entry, or nullptr.
  const TenantPolicyState* Find(std::string_view name, uint32_t uid) const;
  // Replaces the entry of (tenant.name, tenant.uid), or adds it in order.
  void Put(const TenantPolicyState& tenant);
  bool empty() const;
  bool operator==(const PolicyState&) const = default;
};

// The file's text. ParsePolicyState(FormatPolicyState(s)) == s.
std::string FormatPolicyState(const PolicyState& state);

// INVALID_ARGUMENT ("line N: <what>") for text that is not a state file of this version, with
// values out of range, or with a tenant twice.
absl::StatusOr<PolicyState> ParsePolicyState(std::string_view text);

// NOT_FOUND when there is no file; the errno's code when it cannot be read; INVALID_ARGUMENT
// (naming the path) when it does not parse.
absl::StatusOr<PolicyState> LoadPolicyState(const std::string& path);

// Writes the file atomically (see the top of this file), mode 0644. The directory must exist.
absl::Status SavePolicyState(const std::string& path, const PolicyState& state);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_POLICY_STATE_H_
