// DaemonCore's admin policy (SetPolicy) and the state file that keeps it across restarts
// (policy_state.h). The sessions themselves are in core.cc.
#include <unistd.h>

#include <charconv>
#include <cstdio>
#include <set>
#include <string>
#include <type_traits>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
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

// A request's percentage read as the configuration reads "p%", so that it resolves on each GPU
// exactly as a percentage in missiled.toml does. INVALID_ARGUMENT outside (0, 100].
absl::StatusOr<SizeOrFraction> Percent(std::string_view field, double percent) {
  char buffer[512];  // fixed notation: a double's longest is about 330 characters
  const auto [end, ec] =
      std::to_chars(buffer, buffer + sizeof buffer - 1, percent, std::chars_format::fixed);
  absl::StatusOr<SizeOrFraction> value = absl::InvalidArgumentError("not a number");
  if (ec == std::errc()) value = ParseSizeOrPercent(std::string(buffer, end) + "%");
  if (!value.ok() || !value->is_fraction) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field),
                                                   " must be more than 0 and at most 100, got ",
                                                   percent));
  }
  return *value;
}

// The change's quotas on `gpu`, in bytes: a percentage is of that GPU's pool, as in the
// configuration. The percentages must have passed CheckPolicyRequest.
PolicyChange OnGpu(const PolicyChange& change, const Gpu& gpu) {
  PolicyChange on = change;
  const uint64_t pool = gpu.pool->capacity_bytes();
  if (change.quota_percent) {
    on.quota_bytes = Percent("", *change.quota_percent).value_or(SizeOrFraction{}).Resolve(pool);
  }
  if (change.class_quota_percent) {
    on.class_quota_bytes =
        Percent("", *change.class_quota_percent).value_or(SizeOrFraction{}).Resolve(pool);
  }
  on.quota_percent.reset();
  on.class_quota_percent.reset();
  return on;
}

bool ChangesAQuota(const PolicyChange& change) {
  return change.quota_bytes || change.quota_percent || change.class_quota_bytes ||
         change.class_quota_percent;
}

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
  if ((change.class_quota_bytes || change.class_quota_percent) && !target.cls) {
    return absl::InvalidArgumentError("a class quota needs a class target");
  }
  if (target.cls && change.cls) {
    return absl::InvalidArgumentError("a class target cannot change class");
  }
  if (!change.cls && !change.priority && !change.weight && !ChangesAQuota(change)) {
    return absl::InvalidArgumentError("nothing to change");
  }
  if ((change.quota_bytes && change.quota_percent) ||
      (change.class_quota_bytes && change.class_quota_percent)) {
    return absl::InvalidArgumentError("give a quota in bytes or as a percentage, not both");
  }
  if (change.quota_percent) {
    if (absl::StatusOr<SizeOrFraction> p = Percent("quota_percent", *change.quota_percent);
        !p.ok()) {
      return p.status();
    }
  }
  if (change.class_quota_percent) {
    if (absl::StatusOr<SizeOrFraction> p =
            Percent("class_quota_percent", *change.class_quota_percent);
        !p.ok()) {
      return p.status();
    }
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
  if (ChangesAQuota(change)) {
    // Check every GPU first, so a change valid on one GPU and not on another changes nothing.
    std::vector<QuotaPolicy> next;
    for (Gpu& gpu : gpus_) {
      const PolicyChange on = OnGpu(change, gpu);
      QuotaPolicy q = gpu.quota[ClassIndex(cls)];
      if (on.quota_bytes) q.tenant_quota_bytes = *on.quota_bytes;
      if (on.class_quota_bytes) q.class_quota_bytes = *on.class_quota_bytes;
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
  // The state file keeps bytes: a percentage is kept as what it came to on the first GPU.
  const PolicyChange first = gpus_.empty() ? change : OnGpu(change, gpus_[0]);
  if (first.quota_bytes) kept.tenant_quota_bytes = first.quota_bytes;
  if (first.class_quota_bytes) kept.class_quota_bytes = first.class_quota_bytes;
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
  std::optional<uint64_t> quota_after;  // on the first GPU, for the log and the state file
  for (Gpu& gpu : gpus_) {
    if (change.cls) {
      if (absl::Status st = gpu.pool->SetTenantClass(info.id, *change.cls); !st.ok()) return st;
    }
    const PolicyChange on = OnGpu(change, gpu);
    if (on.quota_bytes && !target.cls) {
      if (absl::Status st = gpu.pool->SetTenantQuota(info.id, *on.quota_bytes); !st.ok()) {
        return st;
      }
      if (!quota_after) quota_after = on.quota_bytes;
    }
  }
  if (quota_after) quota = quota_after;
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
  if (quota_before && quota_after) {
    quota_change = Change("quota", Bytes(*quota_before), Bytes(*quota_after));
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
  if (ChangesAQuota(change)) {
    // Lowering a quota takes nothing back, so a tenant above its new quota keeps what it holds
    // and cannot allocate again until it frees enough: likely a mistake (`--quota 95` was once
    // 95 bytes), so it must be asked for.
    const std::vector<std::string> over = OverQuotaLocked(target, change, matched);
    if (!over.empty() && !change.force) {
      return absl::FailedPreconditionError(
          "the new quota is below what tenants hold: " + absl::StrJoin(over, "; ") +
          "; they would keep it and only later allocations would be refused: give force "
          "(missilectl set --force) to apply it anyway");
    }
    if (!over.empty()) {
      Log()->warn("quota forced by uid {} pid {} below what tenants hold: {}", creds.uid,
                  creds.pid, absl::StrJoin(over, "; "));
    }
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

std::vector<std::string> DaemonCore::OverQuotaLocked(
    const PolicyTarget& target, const PolicyChange& change,
    const std::vector<std::shared_ptr<Session>>& matched) const {
  absl::flat_hash_map<uint64_t, const SessionInfo*> sessions;
  for (const auto& s : matched) sessions[s->info.id] = &s->info;
  std::vector<std::string> over;
  for (size_t g = 0; g < gpus_.size(); ++g) {
    const Gpu& gpu = gpus_[g];
    const PolicyChange on = OnGpu(change, gpu);
    QuotaPolicy next[2] = {gpu.quota[0], gpu.quota[1]};
    if (target.cls) {
      QuotaPolicy& q = next[ClassIndex(*target.cls)];
      if (on.quota_bytes) q.tenant_quota_bytes = *on.quota_bytes;
      if (on.class_quota_bytes) q.class_quota_bytes = *on.class_quota_bytes;
    }
    const PoolSnapshot pool = gpu.pool->Snapshot();
    for (const TenantStats& t : pool.tenants) {
      auto it = sessions.find(t.session);
      if (it == sessions.end()) continue;
      // As VramPool::QuotaOf will compute it: the tenant's own quota capped at its class's.
      const uint64_t asked = !target.cls && on.quota_bytes ? *on.quota_bytes : t.asked_quota_bytes;
      const uint64_t cap = next[ClassIndex(change.cls.value_or(t.cls))].tenant_quota_bytes;
      const uint64_t quota = asked == 0 ? cap : std::min(asked, cap);
      if (t.usage.used_bytes > quota) {
        over.push_back(absl::StrCat("pid ", it->second->creds.pid, " '", it->second->name,
                                    "' holds ", FormatSize(t.usage.used_bytes), " on GPU ", g,
                                    ", its quota would be ", FormatSize(quota)));
      }
    }
    if (target.cls && on.class_quota_bytes) {
      const int c = ClassIndex(*target.cls);
      if (pool.class_used_bytes[c] > next[c].class_quota_bytes) {
        over.push_back(absl::StrCat("class ", TenantClassName(*target.cls), " holds ",
                                    FormatSize(pool.class_used_bytes[c]), " on GPU ", g,
                                    ", its class quota would be ",
                                    FormatSize(next[c].class_quota_bytes)));
      }
    }
  }
  return over;
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
    PolicyChange change;
    change.priority = c.priority;
    change.quota_bytes = c.tenant_quota_bytes;
    change.class_quota_bytes = c.class_quota_bytes;
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
