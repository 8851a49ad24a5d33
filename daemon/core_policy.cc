// DaemonCore's admin policy (SetPolicy) and the state file that keeps it across restarts
// (policy_state.h). The sessions themselves are in core.cc.
#include <unistd.h>

#include <cstdio>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/strings/str_join.h"
#include "core.h"
#include "internal/core_session.h"
#include "logger.h"
#include "missile/common/size.h"

namespace missile::daemon {

using core_internal::ValidateName;
using core_internal::WeightOf;

namespace {

std::shared_ptr<spdlog::logger> Log() { return GetLogger(kCoreLog); }

// The checks of a policy request that need no state: one target, values in range, a change
// that fits the target.
absl::Status CheckPolicyRequest(const PolicyTarget& target, const PolicyChange& change) {
  int targets = target.pid.has_value() + target.name.has_value() + target.cls.has_value();
  if (targets != 1) return absl::InvalidArgumentError("name exactly one target: pid, name or class");
  // Checked like a registered name, so a name no tenant can have is refused before it is
  // echoed in a "no tenant named" error.
  if (target.name) {
    if (absl::Status s = ValidateName(*target.name); !s.ok()) return s;
  }
  if (change.priority && (*change.priority < -20 || *change.priority > 19)) {
    return absl::InvalidArgumentError("priority must be in [-20, 19], got " +
                                      std::to_string(*change.priority));
  }
  if (change.weight && (*change.weight < 1 || *change.weight > (1u << 20))) {
    return absl::InvalidArgumentError("weight must be in [1, 1048576], got " +
                                      std::to_string(*change.weight));
  }
  if (change.class_quota_bytes && !target.cls) {
    return absl::InvalidArgumentError("a class quota needs a class target");
  }
  if (target.cls && change.cls) {
    return absl::InvalidArgumentError("a class target cannot change class");
  }
  if (!change.cls && !change.priority && !change.weight && !change.quota_bytes &&
      !change.class_quota_bytes) {
    return absl::InvalidArgumentError("nothing to change");
  }
  return absl::OkStatus();
}

// "what a -> b" when a and b differ, else "".
template <typename T>
std::string Str(const T& v) {
  if constexpr (std::is_arithmetic_v<T>) {
    return std::to_string(v);
  } else {
    return std::string(v);
  }
}

template <typename T>
std::string Change(std::string_view what, const T& a, const T& b) {
  if (a == b) return "";
  return std::string(what) + " " + Str(a) + " -> " + Str(b);
}

std::string Joined(std::vector<std::string> parts) {
  std::erase(parts, "");
  return parts.empty() ? "unchanged" : absl::StrJoin(parts, ", ");
}

std::string Bytes(uint64_t b) { return FormatSize(b); }

}  // namespace

absl::Status DaemonCore::SetClassPolicyLocked(const PeerCredentials& creds, TenantClass cls,
                                              const PolicyChange& change) {
  ClassDefaults& defaults = cls == TenantClass::kLatencySensitive ? ls_ : be_;
  const int priority_before = defaults.priority;
  const QuotaPolicy quota_before =
      gpus_.empty() ? QuotaPolicy{} : gpus_[0].quota[ClassIndex(cls)];
  if (change.quota_bytes || change.class_quota_bytes) {
    // Check every GPU first, so a change valid on one GPU and not on another changes nothing.
    std::vector<QuotaPolicy> next;
    for (Gpu& gpu : gpus_) {
      QuotaPolicy q = gpu.quota[ClassIndex(cls)];
      if (change.quota_bytes) q.tenant_quota_bytes = *change.quota_bytes;
      if (change.class_quota_bytes) q.class_quota_bytes = *change.class_quota_bytes;
      if (q.tenant_quota_bytes > q.class_quota_bytes) {
        return absl::InvalidArgumentError("a tenant quota cannot exceed its class quota");
      }
      next.push_back(q);
    }
    for (size_t g = 0; g < gpus_.size(); ++g) {
      if (absl::Status s = gpus_[g].pool->SetClassQuota(cls, next[g]); !s.ok()) return s;
      gpus_[g].quota[ClassIndex(cls)] = next[g];
    }
  }
  if (change.priority) defaults.priority = *change.priority;
  ClassPolicyState& kept = policy_.of(cls);
  if (change.priority) kept.priority = change.priority;
  if (change.quota_bytes) kept.tenant_quota_bytes = change.quota_bytes;
  if (change.class_quota_bytes) kept.class_quota_bytes = change.class_quota_bytes;
  const QuotaPolicy quota_after =
      gpus_.empty() ? QuotaPolicy{} : gpus_[0].quota[ClassIndex(cls)];
  Log()->info("class {} defaults changed by uid {} pid {}: {}", TenantClassName(cls), creds.uid,
              creds.pid,
              Joined({Change("priority", priority_before, defaults.priority),
                      Change("tenant quota", Bytes(quota_before.tenant_quota_bytes),
                             Bytes(quota_after.tenant_quota_bytes)),
                      Change("class quota", Bytes(quota_before.class_quota_bytes),
                             Bytes(quota_after.class_quota_bytes))}));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> DaemonCore::SetPolicy(const PeerCredentials& creds,
                                               const PolicyTarget& target,
                                               const PolicyChange& change) {
  std::vector<uint64_t> changed;
  absl::StatusOr<uint32_t> n;
  {
    // One change and its save at a time, so the file ends with the last change.
    absl::MutexLock save_lock(&save_mu_);
    n = ApplyPolicy(creds, target, change, &changed);
    if (n.ok()) SavePolicyLocked();
  }
  for (uint64_t id : changed) NotifyWatchers(id, /*ended=*/false);
  return n;
}

absl::Status DaemonCore::ApplyToSessionLocked(const PeerCredentials& creds, Session& session,
                                              const PolicyTarget& target,
                                              const PolicyChange& change) {
  SessionInfo& info = session.info;
  const SessionInfo before = info;
  const TenantPolicyState* kept = policy_.Find(info.name, info.creds.uid);
  std::optional<uint64_t> quota = kept ? kept->quota_bytes : std::nullopt;
  std::optional<uint64_t> quota_before;
  if (!gpus_.empty()) {
    if (absl::StatusOr<Usage> u = gpus_[0].pool->GetUsage(info.id); u.ok()) {
      quota_before = u->quota_bytes;
    }
  }
  for (Gpu& gpu : gpus_) {
    if (change.cls) {
      if (absl::Status st = gpu.pool->SetTenantClass(info.id, *change.cls); !st.ok()) return st;
    }
    if (change.quota_bytes && !target.cls) {
      if (absl::Status st = gpu.pool->SetTenantQuota(info.id, *change.quota_bytes); !st.ok()) {
        return st;
      }
      quota = change.quota_bytes;
    }
  }
  if (change.cls) info.cls = *change.cls;
  // A tenant moved to another class takes that class's priority (and so its weight), as if
  // it had registered there, unless the same change names a priority or weight of its own.
  if (change.cls && !change.priority) {
    info.priority = (*change.cls == TenantClass::kLatencySensitive ? ls_ : be_).priority;
  }
  if (change.priority) info.priority = *change.priority;
  if (change.priority || change.cls) info.weight = WeightOf(info.priority);
  if (change.weight) info.weight = *change.weight;
  for (Gpu& gpu : gpus_) {
    if (gpu.arbiter) gpu.arbiter->SetPolicy(info.id, info.cls, info.weight);
    if (gpu.pacing) gpu.pacing->SetPolicy(info.id, info.cls, info.weight);
  }
  ++info.generation;
  policy_.Put({info.name, info.creds.uid, info.cls, info.priority, info.weight, quota});
  std::string quota_change;
  if (quota_before && change.quota_bytes && !target.cls) {
    quota_change = Change("quota", Bytes(*quota_before), Bytes(*change.quota_bytes));
  }
  Log()->info("session {} ('{}', pid {}, uid {}): policy changed by uid {} pid {}: {}", info.id,
              info.name, info.creds.pid, info.creds.uid, creds.uid, creds.pid,
              Joined({Change("class", std::string(TenantClassName(before.cls)),
                             std::string(TenantClassName(info.cls))),
                      Change("priority", before.priority, info.priority),
                      Change("weight", before.weight, info.weight), quota_change}));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> DaemonCore::ApplyPolicy(const PeerCredentials& creds,
                                                 const PolicyTarget& target,
                                                 const PolicyChange& change,
                                                 std::vector<uint64_t>* changed) {
  if (!IsAdmin(creds)) {
    return absl::PermissionDeniedError("uid " + std::to_string(creds.uid) +
                                       " may not change policy: root or the admin group only");
  }
  if (absl::Status s = CheckPolicyRequest(target, change); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  std::vector<std::shared_ptr<Session>> matched;
  for (const auto& [id, s] : sessions_) {
    if ((target.pid && s->info.creds.pid == *target.pid) ||
        (target.name && s->info.name == *target.name) || (target.cls && s->info.cls == *target.cls)) {
      matched.push_back(s);
    }
  }
  // A name is whatever a tenant chose to register with, so another user can take a name in
  // use: changing every tenant of that name would let them ride along with (or hijack) an
  // administrator's change meant for someone else. Within one uid the name is the owner's own.
  if (target.name) {
    std::set<uint32_t> uids;
    for (const auto& s : matched) uids.insert(s->info.creds.uid);
    if (uids.size() > 1) {
      return absl::FailedPreconditionError(
          "tenants of several uids (" + absl::StrJoin(uids, ", ") + ") are named '" +
          *target.name + "': a name is not an identity; name the tenant by pid");
    }
  }
  if (matched.empty() && !target.cls) {
    return absl::NotFoundError(target.pid ? "no tenant with pid " + std::to_string(*target.pid)
                                          : "no tenant named '" + *target.name + "'");
  }
  if (target.cls) {
    if (absl::Status s = SetClassPolicyLocked(creds, *target.cls, change); !s.ok()) return s;
  }
  for (auto& s : matched) {
    changed->push_back(s->info.id);
    if (absl::Status st = ApplyToSessionLocked(creds, *s, target, change); !st.ok()) return st;
  }
  changed_.SignalAll();
  return static_cast<uint32_t>(matched.size());
}

void DaemonCore::SavePolicyLocked() {
  if (options_.state_file.empty()) return;
  PolicyState snapshot;
  {
    absl::MutexLock lock(&mu_);
    snapshot = policy_;
  }
  if (absl::Status s = SavePolicyState(options_.state_file, snapshot); !s.ok()) {
    Log()->error("policy state file not written, the change holds until missiled stops: {}",
                 std::string(s.message()));
  }
}

void DaemonCore::RestorePolicy() {
  if (options_.state_file.empty()) {
    Log()->info("policy set at run time is not kept across restarts (no daemon.state_file and "
                "no systemd state directory)");
    return;
  }
  absl::StatusOr<PolicyState> loaded = LoadPolicyState(options_.state_file);
  if (absl::IsNotFound(loaded.status())) {
    Log()->info("policy state file {}: none yet; policy changes will be kept there",
                options_.state_file);
    return;
  }
  if (!loaded.ok()) {
    // A file that does not parse is kept for the administrator, beside the new one the next
    // change writes; one that cannot be read is left where it is.
    std::string kept_as;
    const std::string bad = options_.state_file + ".bad";
    if (absl::IsInvalidArgument(loaded.status()) &&
        rename(options_.state_file.c_str(), bad.c_str()) == 0) {
      kept_as = "; moved to " + bad;
    }
    Log()->error("policy state file ignored, starting with the configuration's policy: {}{}",
                 std::string(loaded.status().message()), kept_as);
    return;
  }
  absl::MutexLock lock(&mu_);
  const PeerCredentials self{.pid = getpid(), .uid = getuid(), .gid = getgid()};
  for (TenantClass cls : {TenantClass::kLatencySensitive, TenantClass::kBestEffort}) {
    const ClassPolicyState& c = loaded->of(cls);
    if (c == ClassPolicyState{}) continue;
    PolicyChange change{.cls = std::nullopt,
                        .priority = c.priority,
                        .weight = std::nullopt,
                        .quota_bytes = c.tenant_quota_bytes,
                        .class_quota_bytes = c.class_quota_bytes};
    if (absl::Status s = SetClassPolicyLocked(self, cls, change); !s.ok()) {
      Log()->warn("policy state file {}: class {} defaults not restored: {}", options_.state_file,
                  TenantClassName(cls), std::string(s.message()));
    }
  }
  policy_ = *std::move(loaded);
  Log()->info("policy state file {}: restored {} tenant entries{}", options_.state_file,
              policy_.tenants.size(),
              policy_.ls == ClassPolicyState{} && policy_.be == ClassPolicyState{}
                  ? ""
                  : " and the class defaults changed at run time");
}

}  // namespace missile::daemon
