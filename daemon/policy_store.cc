#include "policy_store.h"

#include <cstdio>
#include <utility>

#include "logger.h"

namespace missile::daemon {

namespace {

std::shared_ptr<spdlog::logger> Log() { return GetLogger(kCoreLog); }

}  // namespace

PolicyStore::PolicyStore(std::string state_file, ClassDefaults ls, ClassDefaults be)
    : state_file_(std::move(state_file)), ls_(ls), be_(be) {}

ClassDefaults PolicyStore::class_defaults(TenantClass cls) const {
  absl::MutexLock lock(&mu_);
  return cls == TenantClass::kLatencySensitive ? ls_ : be_;
}

std::optional<TenantPolicyState> PolicyStore::FindTenant(std::string_view name,
                                                         uint32_t uid) const {
  absl::MutexLock lock(&mu_);
  const TenantPolicyState* kept = state_.Find(name, uid);
  if (kept == nullptr) return std::nullopt;
  return *kept;
}

void PolicyStore::PutTenant(const TenantPolicyState& tenant) {
  absl::MutexLock lock(&mu_);
  state_.Put(tenant);
}

void PolicyStore::ChangeClass(TenantClass cls, std::optional<int> priority,
                              std::optional<uint64_t> tenant_quota_bytes,
                              std::optional<uint64_t> class_quota_bytes,
                              std::optional<uint32_t> budget_pct) {
  absl::MutexLock lock(&mu_);
  ClassPolicyState& kept = state_.of(cls);
  ClassDefaults& defaults = cls == TenantClass::kLatencySensitive ? ls_ : be_;
  if (priority) {
    defaults.priority = *priority;
    kept.priority = priority;
  }
  if (budget_pct) {
    defaults.budget_pct = *budget_pct;
    kept.budget_pct = *budget_pct == 0 ? std::nullopt : budget_pct;
  }
  if (tenant_quota_bytes) kept.tenant_quota_bytes = tenant_quota_bytes;
  if (class_quota_bytes) kept.class_quota_bytes = class_quota_bytes;
}

PolicyState PolicyStore::state() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

void PolicyStore::Save() const {
  if (state_file_.empty()) return;
  absl::MutexLock save_lock(&save_mu_);
  if (absl::Status s = SavePolicyState(state_file_, state()); !s.ok()) {
    Log()->error("policy state file not written, the change holds until missiled stops: {}",
                 std::string(s.message()));
  }
}

std::optional<PolicyState> PolicyStore::Load() const {
  if (state_file_.empty()) {
    Log()->info("policy set at run time is not kept across restarts (no daemon.state_file and "
                "no systemd state directory)");
    return std::nullopt;
  }
  absl::StatusOr<PolicyState> loaded = LoadPolicyState(state_file_);
  if (absl::IsNotFound(loaded.status())) {
    Log()->info("policy state file {}: none yet; policy changes will be kept there", state_file_);
    return std::nullopt;
  }
  if (!loaded.ok()) {
    // A file that does not parse is kept for the administrator, beside the new one the next
    // change writes; one that cannot be read is left where it is.
    std::string kept_as;
    const std::string bad = state_file_ + ".bad";
    if (absl::IsInvalidArgument(loaded.status()) &&
        rename(state_file_.c_str(), bad.c_str()) == 0) {
      kept_as = "; moved to " + bad;
    }
    Log()->error("policy state file ignored, starting with the configuration's policy: {}{}",
                 std::string(loaded.status().message()), kept_as);
    return std::nullopt;
  }
  return *std::move(loaded);
}

void PolicyStore::Restore(PolicyState state) {
  absl::MutexLock lock(&mu_);
  state_ = std::move(state);
  Log()->info("policy state file {}: restored {} tenant entries{}", state_file_,
              state_.tenants.size(),
              state_.ls == ClassPolicyState{} && state_.be == ClassPolicyState{}
                  ? ""
                  : " and the class defaults changed at run time");
}

}  // namespace missile::daemon
