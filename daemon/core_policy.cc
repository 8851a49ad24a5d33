// DaemonCore's admin policy (SetPolicy): what a change does to the sessions, the GPUs and the
// policy store (policy_store.h keeps it across restarts). The sessions themselves are in core.cc.
#include <unistd.h>

#include <charconv>
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

// A latency budget's range, as [compute] ls_budget_pct's (0 clears one).
constexpr uint32_t kMinBudgetPct = 100;
constexpr uint32_t kMaxBudgetPct = 1000;

// A budget as the log shows it: "150%", or "none" for 0.
std::string BudgetText(uint32_t pct) {
  return pct == 0 ? std::string("none") : absl::StrCat(pct, "%");
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
  if (change.budget_pct && *change.budget_pct != 0 &&
      (*change.budget_pct < kMinBudgetPct || *change.budget_pct > kMaxBudgetPct)) {
    return absl::InvalidArgumentError(absl::StrCat("budget_pct must be in [", kMinBudgetPct, ", ",
                                                   kMaxBudgetPct, "] (or 0 to clear it), got ",
                                                   *change.budget_pct));
  }
  if (change.budget_pct && target.cls == TenantClass::kBestEffort) {
    return absl::InvalidArgumentError(
        "budget_pct: class be has no latency budget; only LS tenants have one");
  }
  if ((change.class_quota_bytes || change.class_quota_percent) && !target.cls) {
    return absl::InvalidArgumentError("a class quota needs a class target");
  }
  if (target.cls && change.cls) {
    return absl::InvalidArgumentError("a class target cannot change class");
  }
  if (!change.cls && !change.priority && !change.weight && !ChangesAQuota(change) &&
      !change.budget_pct) {
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

absl::Status DaemonCore::SetClassPolicy(const PeerCredentials& creds, TenantClass cls,
                                        const PolicyChange& change) {
  const ClassDefaults defaults_before = policy_.class_defaults(cls);
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
    BeforeGpuCalls("policy");
    for (size_t g = 0; g < gpus_.size(); ++g) {
      if (absl::Status s = gpus_[g].pool->SetClassQuota(cls, next[g]); !s.ok()) return s;
      gpus_[g].quota[ClassIndex(cls)] = next[g];
    }
  }
  // The state file keeps bytes: a percentage is kept as what it came to on the first GPU.
  const PolicyChange first = gpus_.empty() ? change : OnGpu(change, gpus_[0]);
  policy_.ChangeClass(cls, change.priority, first.quota_bytes, first.class_quota_bytes,
                      change.budget_pct);
  const ClassDefaults defaults_after = policy_.class_defaults(cls);
  const QuotaPolicy quota_after =
      gpus_.empty() ? QuotaPolicy{} : gpus_[0].quota[ClassIndex(cls)];
  Log()->info("class {} defaults changed by uid {} pid {}: {}", TenantClassName(cls), creds.uid,
              creds.pid,
              Joined({Change("priority", defaults_before.priority, defaults_after.priority),
                      Change("budget", BudgetText(defaults_before.budget_pct),
                             BudgetText(defaults_after.budget_pct)),
                      Change("tenant quota", Bytes(quota_before.tenant_quota_bytes),
                             Bytes(quota_after.tenant_quota_bytes)),
                      Change("class quota", Bytes(quota_before.class_quota_bytes),
                             Bytes(quota_after.class_quota_bytes))}));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> DaemonCore::SetPolicy(const PeerCredentials& creds,
                                               const PolicyTarget& target,
                                               const PolicyChange& change) {
  // Before policy_mu_: it may read the group database.
  if (absl::Status s = authorizer_.Check(creds, "change policy"); !s.ok()) return s;
  if (absl::Status s = CheckPolicyRequest(target, change); !s.ok()) return s;
  std::vector<uint64_t> changed;
  absl::StatusOr<uint32_t> n;
  {
    // One change and its save at a time, so the file ends with the last change.
    absl::MutexLock lock(&policy_mu_);
    n = ApplyPolicy(creds, target, change, &changed);
    if (n.ok()) policy_.Save();
  }
  for (uint64_t id : changed) registry_.NotifyWatchers(id, /*ended=*/false);
  return n;
}

absl::Status DaemonCore::ApplyToSession(const PeerCredentials& creds, const SessionInfo& session,
                                        const PolicyTarget& target, const PolicyChange& change) {
  const uint64_t id = session.id;
  const std::optional<TenantPolicyState> kept =
      policy_.FindTenant(session.name, session.creds.uid);
  std::optional<uint64_t> quota = kept ? kept->quota_bytes : std::nullopt;
  BeforeGpuCalls("policy");
  std::optional<uint64_t> quota_before;
  if (!gpus_.empty()) {
    if (absl::StatusOr<Usage> u = gpus_[0].pool->GetUsage(id); u.ok()) {
      quota_before = u->quota_bytes;
    }
  }
  std::optional<uint64_t> quota_after;  // on the first GPU, for the log and the state file
  for (Gpu& gpu : gpus_) {
    absl::Status st;
    if (change.cls) st = gpu.pool->SetTenantClass(id, *change.cls);
    const PolicyChange on = OnGpu(change, gpu);
    if (st.ok() && on.quota_bytes && !target.cls) {
      st = gpu.pool->SetTenantQuota(id, *on.quota_bytes);
      if (st.ok() && !quota_after) quota_after = on.quota_bytes;
    }
    if (!st.ok()) {
      // A session that ended since it was matched has left the pools: nothing to change.
      if (!registry_.Find(session.creds, id).ok()) return absl::OkStatus();
      return st;
    }
  }
  if (quota_after) quota = quota_after;
  // A tenant moved to another class takes that class's priority (and so its weight), as if
  // it had registered there, unless the same change names a priority or weight of its own.
  const std::optional<int> class_priority =
      change.cls ? std::optional<int>(policy_.class_defaults(*change.cls).priority) : std::nullopt;
  SessionInfo before;
  absl::StatusOr<SessionInfo> info = registry_.Update(id, [&](SessionInfo& info) {
    before = info;
    if (change.cls) info.cls = *change.cls;
    if (change.cls && !change.priority) info.priority = *class_priority;
    if (change.priority) info.priority = *change.priority;
    if (change.priority || change.cls) info.weight = WeightOf(info.priority);
    if (change.weight) info.weight = *change.weight;
    // A class target's budget is the class's, which tenants without their own follow.
    if (change.budget_pct && !target.cls) info.budget_pct = *change.budget_pct;
  });
  if (!info.ok()) return absl::OkStatus();  // it ended meanwhile
  BeforeGpuCalls("policy");
  for (Gpu& gpu : gpus_) {
    if (gpu.arbiter) gpu.arbiter->SetPolicy(id, info->cls, info->weight);
    if (gpu.pacing) gpu.pacing->SetPolicy(id, info->cls, info->weight);
  }
  PushBudget(*info);
  policy_.PutTenant({info->name, info->creds.uid, info->cls, info->priority, info->weight, quota,
                     info->budget_pct == 0 ? std::nullopt
                                           : std::optional<uint32_t>(info->budget_pct)});
  std::string quota_change;
  if (quota_before && quota_after) {
    quota_change = Change("quota", Bytes(*quota_before), Bytes(*quota_after));
  }
  Log()->info("session {} ('{}', pid {}, uid {}): policy changed by uid {} pid {}: {}", id,
              info->name, info->creds.pid, info->creds.uid, creds.uid, creds.pid,
              Joined({Change("class", std::string(TenantClassName(before.cls)),
                             std::string(TenantClassName(info->cls))),
                      Change("priority", before.priority, info->priority),
                      Change("weight", before.weight, info->weight),
                      Change("budget", BudgetText(before.budget_pct), BudgetText(info->budget_pct)),
                      quota_change}));
  return absl::OkStatus();
}

absl::StatusOr<uint32_t> DaemonCore::ApplyPolicy(const PeerCredentials& creds,
                                                 const PolicyTarget& target,
                                                 const PolicyChange& change,
                                                 std::vector<uint64_t>* changed) {
  // Registrations hold policy_mu_ shared until they are published: every session this change
  // could apply to is listed here.
  std::vector<SessionInfo> matched;
  for (SessionInfo& s : registry_.List()) {
    if ((target.pid && s.creds.pid == *target.pid) || (target.name && s.name == *target.name) ||
        (target.cls && s.cls == *target.cls)) {
      matched.push_back(std::move(s));
    }
  }
  // A name is whatever a tenant chose to register with, so another user can take a name in
  // use: changing every tenant of that name would let them ride along with (or hijack) an
  // administrator's change meant for someone else. Within one uid the name is the owner's own.
  if (target.name) {
    std::set<uint32_t> uids;
    for (const SessionInfo& s : matched) uids.insert(s.creds.uid);
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
  // A budget is for LS tenants: one that is (or stays) BE after this change is refused, and
  // nothing changes. Clearing one (0) is not.
  if (change.budget_pct && *change.budget_pct != 0 && !target.cls) {
    for (const SessionInfo& s : matched) {
      if (change.cls.value_or(s.cls) != TenantClass::kLatencySensitive) {
        return absl::FailedPreconditionError(
            absl::StrCat("budget_pct: pid ", s.creds.pid, " '", s.name,
                         "' is a BE tenant, and only LS tenants have a latency budget (move it "
                         "to class ls first, or with the same change)"));
      }
    }
  }
  if (ChangesAQuota(change)) {
    // Lowering a quota takes nothing back, so a tenant above its new quota keeps what it holds
    // and cannot allocate again until it frees enough: likely a mistake (`--quota 95` was once
    // 95 bytes), so it must be asked for.
    const std::vector<std::string> over = OverQuota(target, change, matched);
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
    if (absl::Status s = SetClassPolicy(creds, *target.cls, change); !s.ok()) return s;
    if (change.budget_pct && !change.cls && !change.priority && !change.weight &&
        !ChangesAQuota(change)) {
      // Only the class's budget: its tenants without their own follow it; nothing else of
      // theirs changes (nor what the state file keeps for them).
      uint32_t following = 0;
      BeforeGpuCalls("policy");
      for (const SessionInfo& s : matched) {
        if (s.budget_pct != 0) continue;
        PushBudget(s);
        ++following;
      }
      return following;
    }
  }
  for (const SessionInfo& s : matched) {
    changed->push_back(s.id);
    if (absl::Status st = ApplyToSession(creds, s, target, change); !st.ok()) return st;
  }
  return static_cast<uint32_t>(matched.size());
}

std::vector<std::string> DaemonCore::OverQuota(const PolicyTarget& target,
                                               const PolicyChange& change,
                                               const std::vector<SessionInfo>& matched) const {
  absl::flat_hash_map<uint64_t, const SessionInfo*> sessions;
  for (const SessionInfo& s : matched) sessions[s.id] = &s;
  std::vector<std::string> over;
  BeforeGpuCalls("policy");
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

void DaemonCore::RestorePolicy() {
  std::optional<PolicyState> loaded = policy_.Load();
  if (!loaded) return;
  absl::MutexLock lock(&policy_mu_);
  const PeerCredentials self{.pid = getpid(), .uid = getuid(), .gid = getgid()};
  for (TenantClass cls : {TenantClass::kLatencySensitive, TenantClass::kBestEffort}) {
    const ClassPolicyState& c = loaded->of(cls);
    if (c == ClassPolicyState{}) continue;
    PolicyChange change;
    change.priority = c.priority;
    change.quota_bytes = c.tenant_quota_bytes;
    change.class_quota_bytes = c.class_quota_bytes;
    change.budget_pct = c.budget_pct;
    if (absl::Status s = SetClassPolicy(self, cls, change); !s.ok()) {
      Log()->warn("policy state file {}: class {} defaults not restored: {}", policy_.state_file(),
                  TenantClassName(cls), std::string(s.message()));
    }
  }
  policy_.Restore(*std::move(loaded));
}

}  // namespace missile::daemon
