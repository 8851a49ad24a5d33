// The policy an administrator set at run time, and the state file that keeps it across
// restarts (policy_state.h): each class's defaults (priority, the LS class's latency budget;
// the quotas as the file keeps them) and each tenant's policy by name and uid, which a tenant registering later with the
// same name and uid gets back.
//
// Owns the class defaults, the PolicyState and the state file's path. It applies nothing to
// sessions, pools or pacing domains: DaemonCore does, and records here what it applied.
// Thread-safety: every method may be called from any thread. Reads and changes take mu_ only
// for the copy; Save and Load touch the file with mu_ released (Save holds save_mu_, so two
// saves never interleave and the file ends with the store as the last one found it).
#ifndef MISSILE_DAEMON_POLICY_STORE_H_
#define MISSILE_DAEMON_POLICY_STORE_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/tenant_class.h"
#include "policy_state.h"

namespace missile::daemon {

struct ClassDefaults {
  int priority = 0;
  // LS: the latency budget, in percent, of its tenants without their own; 0: none set, they
  // follow [compute] ls_budget_pct. Set at run time only.
  uint32_t budget_pct = 0;
};

class PolicyStore {
 public:
  // `state_file` "": the policy is not kept across restarts (Save and Load do nothing).
  PolicyStore(std::string state_file, ClassDefaults ls, ClassDefaults be);
  PolicyStore(const PolicyStore&) = delete;
  PolicyStore& operator=(const PolicyStore&) = delete;

  const std::string& state_file() const { return state_file_; }

  ClassDefaults class_defaults(TenantClass cls) const ABSL_LOCKS_EXCLUDED(mu_);
  // The policy kept for the tenant (name, uid), if any.
  std::optional<TenantPolicyState> FindTenant(std::string_view name, uint32_t uid) const
      ABSL_LOCKS_EXCLUDED(mu_);
  // Replaces the tenant's entry, or adds it.
  void PutTenant(const TenantPolicyState& tenant) ABSL_LOCKS_EXCLUDED(mu_);
  // A class changed at run time: a priority or a budget changes the class's defaults (a budget
  // of 0 clears it, and the file keeps none); each value given is what the file keeps for the
  // class (quotas in bytes, as on the first GPU).
  void ChangeClass(TenantClass cls, std::optional<int> priority,
                   std::optional<uint64_t> tenant_quota_bytes,
                   std::optional<uint64_t> class_quota_bytes,
                   std::optional<uint32_t> budget_pct = std::nullopt) ABSL_LOCKS_EXCLUDED(mu_);
  // What the file would hold now.
  PolicyState state() const ABSL_LOCKS_EXCLUDED(mu_);

  // Writes state() to the state file. An error is logged, and the policy holds until missiled
  // stops.
  void Save() const ABSL_LOCKS_EXCLUDED(save_mu_, mu_);
  // Reads the state file. nullopt, logged, when there is none or it cannot be used: a file that
  // does not parse is moved to <file>.bad for the administrator; one that cannot be read stays.
  std::optional<PolicyState> Load() const ABSL_LOCKS_EXCLUDED(mu_);
  // Makes `state` (from Load) the store's, class defaults aside: DaemonCore applies those to the
  // GPUs and calls ChangeClass for each.
  void Restore(PolicyState state) ABSL_LOCKS_EXCLUDED(mu_);

 private:
  const std::string state_file_;
  mutable absl::Mutex save_mu_ ABSL_ACQUIRED_BEFORE(mu_);
  mutable absl::Mutex mu_;
  ClassDefaults ls_ ABSL_GUARDED_BY(mu_);
  ClassDefaults be_ ABSL_GUARDED_BY(mu_);
  PolicyState state_ ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_POLICY_STORE_H_
