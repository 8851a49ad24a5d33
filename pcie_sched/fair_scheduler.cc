#include "missile/pcie_sched/fair_scheduler.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"

namespace missile::pcie {
namespace {

// Linux kernel/sched/core.c, sched_prio_to_weight[], index = nice + 20.
constexpr std::array<uint32_t, 40> kPrioToWeight = {
    /* -20 */ 88761, 71755, 56483, 46273, 36291,
    /* -15 */ 29154, 23254, 18705, 14949, 11916,
    /* -10 */ 9548,  7620,  6100,  4904,  3906,
    /*  -5 */ 3121,  2501,  1991,  1586,  1277,
    /*   0 */ 1024,  820,   655,   526,   423,
    /*   5 */ 335,   272,   215,   172,   137,
    /*  10 */ 110,   87,    70,    56,    45,
    /*  15 */ 36,    29,    23,    18,    15,
};

constexpr uint64_t kPageBytes = 4 * kKiB;
constexpr uint64_t kMaxChunkBytes = kGiB;

bool IsChunkSize(uint64_t bytes) {
  return bytes >= kPageBytes && bytes <= kMaxChunkBytes && bytes % kPageBytes == 0;
}

constexpr uint32_t kMaxInflightLimit = 1024;
constexpr uint64_t kMinShareWindowNs = 1'000'000;
constexpr uint64_t kMaxRequestBytes = kTiB;
constexpr uint64_t kMaxIdleGraceNs = 1'000'000'000;
// Above one half the BE class would be owed more than the LS class: no longer "LS first".
constexpr double kMaxBeMinShare = 0.5;
// The BE credit is a sum of fractions of chunks: 19 x (2 MiB x 0.05 / 0.95) falls short of
// 2 MiB by a rounding error, which would cost the BE class a whole chunk of waiting.
constexpr double kCreditSlackBytes = 1.0;

absl::Status CheckWeight(uint32_t weight) {
  if (weight < kMinWeight || weight > kMaxWeight) {
    return absl::InvalidArgumentError(
        absl::StrCat("weight ", weight, " is outside [", kMinWeight, ", ", kMaxWeight, "]"));
  }
  return absl::OkStatus();
}

absl::Status TenantNotFound(TenantId id) {
  return absl::NotFoundError(absl::StrCat("unknown tenant ", id));
}

uint64_t CeilNs(double ns) {
  if (!(ns < 1.8e19)) return std::numeric_limits<uint64_t>::max();
  return static_cast<uint64_t>(std::ceil(ns));
}

}  // namespace

absl::StatusOr<uint32_t> WeightFromPriority(int priority) {
  if (priority < kMinPriority || priority > kMaxPriority) {
    return absl::InvalidArgumentError(absl::StrCat("priority ", priority, " is outside [",
                                                   kMinPriority, ", ", kMaxPriority, "]"));
  }
  return kPrioToWeight[priority - kMinPriority];
}

absl::Status FairScheduler::Config::Validate() const {
  if (!IsChunkSize(chunk_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk_bytes ", chunk_bytes, " must be a multiple of 4 KiB in [4 KiB, 1 GiB]"));
  }
  if (be_chunk_bytes != 0 && !IsChunkSize(be_chunk_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "be_chunk_bytes ", be_chunk_bytes, " must be 0 or a multiple of 4 KiB in [4 KiB, 1 GiB]"));
  }
  if (be_rest_chunk_bytes != 0 && !IsChunkSize(be_rest_chunk_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat("be_rest_chunk_bytes ", be_rest_chunk_bytes,
                                                   " must be 0 or a multiple of 4 KiB in [4 KiB, 1 GiB]"));
  }
  if (max_inflight_chunks_total < 1 || max_inflight_chunks_total > kMaxInflightLimit) {
    return absl::InvalidArgumentError(absl::StrCat("max_inflight_chunks_total ",
                                                   max_inflight_chunks_total, " is outside [1, ",
                                                   kMaxInflightLimit, "]"));
  }
  if (max_inflight_chunks_per_tenant < 1 ||
      max_inflight_chunks_per_tenant > max_inflight_chunks_total) {
    return absl::InvalidArgumentError(absl::StrCat(
        "max_inflight_chunks_per_tenant ", max_inflight_chunks_per_tenant,
        " is outside [1, max_inflight_chunks_total = ", max_inflight_chunks_total, "]"));
  }
  if (min_bypass_bytes > chunk_bytes || (be_chunk_bytes != 0 && min_bypass_bytes > be_chunk_bytes) ||
      (be_rest_chunk_bytes != 0 && min_bypass_bytes > be_rest_chunk_bytes)) {
    return absl::InvalidArgumentError(
        absl::StrCat("min_bypass_bytes ", min_bypass_bytes, " exceeds chunk_bytes ", chunk_bytes));
  }
  if (share_window_ns < kMinShareWindowNs) {
    return absl::InvalidArgumentError(
        absl::StrCat("share_window_ns ", share_window_ns, " is below 1 ms"));
  }
  if (idle_grace_ns > kMaxIdleGraceNs) {
    return absl::InvalidArgumentError(
        absl::StrCat("idle_grace_ns ", idle_grace_ns, " is above 1 s"));
  }
  if (!(be_min_share >= 0 && be_min_share <= kMaxBeMinShare)) {
    return absl::InvalidArgumentError(
        absl::StrCat("be_min_share ", be_min_share, " is outside [0, ", kMaxBeMinShare, "]"));
  }
  return absl::OkStatus();
}

FairScheduler::FairScheduler(const Config& config)
    : config_(config),
      be_credit_max_(static_cast<double>(config.chunk_bytes)),
      be_debt_max_(static_cast<double>(config.LargestChunk())),
      be_earn_(config.be_min_share / (1 - config.be_min_share)) {}

absl::StatusOr<FairScheduler> FairScheduler::Create(const Config& config) {
  if (absl::Status s = config.Validate(); !s.ok()) return s;
  return FairScheduler(config);
}

int FairScheduler::DomainOf(TenantClass cls) const {
  if (!config_.ls_first) return 0;
  return cls == TenantClass::kLatencySensitive ? 0 : 1;
}

uint64_t FairScheduler::Now(uint64_t now_ns) {
  last_now_ns_ = std::max(last_now_ns_, now_ns);
  return last_now_ns_;
}

FairScheduler::Tenant* FairScheduler::FindTenant(TenantId id) {
  auto it = tenants_.find(id);
  return it == tenants_.end() ? nullptr : &it->second;
}

absl::Status FairScheduler::AddTenant(TenantId id, TenantClass cls, uint32_t weight) {
  if (absl::Status s = CheckWeight(weight); !s.ok()) return s;
  if (tenants_.contains(id)) {
    return absl::AlreadyExistsError(absl::StrCat("tenant ", id, " already exists"));
  }
  Tenant& t = tenants_[id];
  t.id = id;
  t.cls = cls;
  t.weight = weight;
  // Placed at min_vruntime by Activate on its first submit.
  return absl::OkStatus();
}

absl::StatusOr<RemovedTenant> FairScheduler::RemoveTenant(TenantId id) {
  Tenant* t = FindTenant(id);
  if (t == nullptr) return TenantNotFound(id);
  RemovedTenant removed;
  removed.requests.assign(t->queue.begin(), t->queue.end());
  // At most max_inflight_chunks_total grants exist, so this scan is short.
  for (auto it = grants_.begin(); it != grants_.end();) {
    if (it->second.tenant == id) {
      removed.inflight_grants.push_back(it->first);
      removed.requests.push_back(it->second.request);
      grants_.erase(it++);
    } else {
      ++it;
    }
  }
  inflight_total_ -= static_cast<uint32_t>(removed.inflight_grants.size());
  std::sort(removed.inflight_grants.begin(), removed.inflight_grants.end());
  std::sort(removed.requests.begin(), removed.requests.end());
  removed.requests.erase(std::unique(removed.requests.begin(), removed.requests.end()),
                         removed.requests.end());
  for (RequestId r : removed.requests) requests_.erase(r);
  pending_bytes_[DomainOf(t->cls)] -= t->pending_bytes;
  if (t->active) {
    const int d = DomainOf(t->cls);
    run_queues_[d].erase(RunKey{t->vruntime, t->id, t});
    UpdateMinVruntime(d);
  }
  tenants_.erase(id);
  return removed;
}

absl::Status FairScheduler::SetWeight(TenantId id, uint32_t weight) {
  if (absl::Status s = CheckWeight(weight); !s.ok()) return s;
  Tenant* t = FindTenant(id);
  if (t == nullptr) return TenantNotFound(id);
  t->weight = weight;  // Used by the next charge; the run-queue key does not depend on it.
  return absl::OkStatus();
}

absl::Status FairScheduler::SetClass(TenantId id, TenantClass cls) {
  Tenant* t = FindTenant(id);
  if (t == nullptr) return TenantNotFound(id);
  const int from = DomainOf(t->cls);
  const int to = DomainOf(cls);
  if (from == to) {
    t->cls = cls;
    return absl::OkStatus();
  }
  // Different vruntime domains: carry over the lag behind the old domain's min_vruntime (as CFS
  // does when a task moves between run queues), never a credit.
  const uint64_t lag = t->vruntime > min_vruntime_[from] ? t->vruntime - min_vruntime_[from] : 0;
  if (t->active) run_queues_[from].erase(RunKey{t->vruntime, t->id, t});
  pending_bytes_[from] -= t->pending_bytes;
  pending_bytes_[to] += t->pending_bytes;
  t->cls = cls;
  t->vruntime = min_vruntime_[to] + lag;
  if (t->active) run_queues_[to].insert(RunKey{t->vruntime, t->id, t});
  UpdateMinVruntime(from);
  UpdateMinVruntime(to);
  return absl::OkStatus();
}

void FairScheduler::Activate(Tenant& t) {
  if (t.active) return;
  const int d = DomainOf(t.cls);
  // CFS's placement rule: an idle tenant keeps no credit beyond the current minimum. A quick
  // return (within the grace) continues where it left off, as if it had stayed.
  const bool quick_return = t.ever_active && last_now_ns_ - t.idle_since_ns < config_.idle_grace_ns;
  if (!quick_return) t.vruntime = std::max(t.vruntime, min_vruntime_[d]);
  run_queues_[d].insert(RunKey{t.vruntime, t.id, &t});
  t.active = true;
  t.ever_active = true;
  UpdateMinVruntime(d);
}

void FairScheduler::DeactivateIfIdle(Tenant& t) {
  if (!t.active || t.pending_bytes != 0 || t.inflight != 0) return;
  const int d = DomainOf(t.cls);
  run_queues_[d].erase(RunKey{t.vruntime, t.id, &t});
  t.active = false;
  t.idle_since_ns = last_now_ns_;
  if (config_.ls_first && d == kBeDomain && run_queues_[d].empty()) {
    be_idle_since_ns_ = last_now_ns_;
  }
  UpdateMinVruntime(d);
}

void FairScheduler::UpdateMinVruntime(int domain) {
  const RunQueue& rq = run_queues_[domain];
  if (!rq.empty()) {
    min_vruntime_[domain] = std::max(min_vruntime_[domain], rq.begin()->vruntime);
  }
  if (min_vruntime_[domain] >= rebase_threshold_) Rebase(domain);
}

// Keeps vruntimes far from overflow: a weight-1 tenant alone on a 64 GB/s link would otherwise
// wrap 2^64 in about three days. Subtracting the same base from every tenant of the domain keeps
// the order of the active ones (all >= min_vruntime) and every lag.
void FairScheduler::Rebase(int domain) {
  const uint64_t base = min_vruntime_[domain];
  for (auto& [id, t] : tenants_) {
    if (DomainOf(t.cls) != domain) continue;
    t.vruntime = t.vruntime >= base ? t.vruntime - base : 0;
  }
  RunQueue& rq = run_queues_[domain];
  RunQueue rebased;
  while (!rq.empty()) {
    auto node = rq.extract(rq.begin());
    node.value().vruntime = node.value().tenant->vruntime;
    rebased.insert(rebased.end(), std::move(node));
  }
  rq = std::move(rebased);
  min_vruntime_[domain] = 0;
}

absl::StatusOr<RequestId> FairScheduler::Submit(TenantId tenant, uint64_t bytes, uint64_t now_ns,
                                                uint64_t chunk_bytes) {
  if (bytes == 0 || bytes > kMaxRequestBytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("request of ", bytes, " bytes is outside [1, 1 TiB]"));
  }
  if (chunk_bytes != 0 && !IsChunkSize(chunk_bytes)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "chunk size ", chunk_bytes, " is not a multiple of 4 KiB in [4 KiB, 1 GiB]"));
  }
  Tenant* t = FindTenant(tenant);
  if (t == nullptr) return TenantNotFound(tenant);
  const uint64_t now = Now(now_ns);
  const RequestId id = next_request_id_++;
  Request& r = requests_[id];
  r.id = id;
  r.tenant = tenant;
  r.bytes = bytes;
  r.chunk_bytes = chunk_bytes != 0 ? chunk_bytes : config_.ChunkFor(t->cls);
  r.submit_ns = now;
  t->queue.push_back(id);
  t->pending_bytes += bytes;
  pending_bytes_[DomainOf(t->cls)] += bytes;
  Activate(*t);
  return id;
}

absl::StatusOr<Grant> FairScheduler::SubmitStarted(TenantId tenant, uint64_t bytes,
                                                   uint64_t now_ns, uint64_t chunk_bytes) {
  absl::StatusOr<RequestId> id = Submit(tenant, bytes, now_ns, chunk_bytes);
  if (!id.ok()) return id.status();
  Tenant& t = *FindTenant(tenant);
  return GrantNext(t, requests_.find(*id)->second, DomainOf(t.cls), last_now_ns_);
}

std::optional<Grant> FairScheduler::NextGrant(uint64_t now_ns) {
  if (inflight_total_ >= config_.max_inflight_chunks_total) return std::nullopt;
  const uint64_t now = Now(now_ns);
  bool held_back = false;
  // The BE class's minimum share: a BE chunk that has earned its turn goes ahead of the LS.
  if (BeDue()) {
    if (std::optional<Grant> g = PickFrom(kBeDomain, now, &held_back)) return g;
  }
  for (int d = 0; d < kNumDomains; ++d) {
    held_back = false;
    if (std::optional<Grant> g = PickFrom(d, now, &held_back)) return g;
    // LS-first is strict: a BE chunk granted now would sit ahead of that LS tenant's next
    // chunk on the FIFO link.
    if (config_.ls_first && d == kLsDomain && held_back) return std::nullopt;
  }
  return std::nullopt;
}

std::optional<Grant> FairScheduler::PickFrom(int d, uint64_t now, bool* held_back) {
  RunQueue& rq = run_queues_[d];
  // Passed over: tenants with only in-flight chunks or at their per-tenant limit. Each holds
  // an in-flight chunk, so at most max_inflight_chunks_total entries are skipped.
  auto it = rq.begin();
  for (; it != rq.end(); ++it) {
    const Tenant& c = *it->tenant;
    if (c.queue.empty()) continue;
    if (c.inflight < config_.max_inflight_chunks_per_tenant) break;
    *held_back = true;
  }
  if (it == rq.end()) return std::nullopt;

  Tenant& t = *it->tenant;
  return GrantNext(t, requests_.find(t.queue.front())->second, d, now);
}

Grant FairScheduler::GrantNext(Tenant& t, Request& r, int d, uint64_t now) {
  Grant g;
  g.id = next_grant_id_++;
  g.tenant = t.id;
  g.request = r.id;
  g.offset = r.next_offset;
  g.length = std::min(r.chunk_bytes, r.bytes - r.next_offset);
  r.next_offset += g.length;
  ++r.inflight;
  if (r.next_offset == r.bytes) t.queue.erase(std::find(t.queue.begin(), t.queue.end(), r.id));
  t.pending_bytes -= g.length;
  pending_bytes_[d] -= g.length;
  ++t.inflight;
  ++inflight_total_;
  t.bytes_granted += g.length;
  AddRecent(t, g.length, now);
  grants_.emplace(g.id, GrantRecord{t.id, r.id, g.length});
  ChargeShare(d, g.length, now);

  // Charge at grant. Re-key through the node handle: no allocation per chunk.
  const uint64_t charge = std::max<uint64_t>(1, g.length * kNiceZeroWeight / t.weight);
  auto node = run_queues_[d].extract(RunKey{t.vruntime, t.id, &t});
  t.vruntime += charge;
  node.value().vruntime = t.vruntime;
  run_queues_[d].insert(std::move(node));
  UpdateMinVruntime(d);
  return g;
}

bool FairScheduler::BeDue() const {
  return config_.ls_first && be_earn_ > 0 && pending_bytes_[kBeDomain] > 0 &&
         be_credit_ + kCreditSlackBytes >= be_credit_max_;
}

void FairScheduler::ChargeShare(int domain, uint64_t length, uint64_t now) {
  if (!config_.ls_first || !(be_earn_ > 0)) return;
  const double bytes = static_cast<double>(length);
  if (domain == kLsDomain) {
    // Earned only while a BE tenant has work (pending or in flight), or had some less than
    // idle_grace_ns ago: an idle BE class banks nothing, and one that submits its next request
    // once the last one is done (a round trip with nothing of it queued) loses nothing.
    const bool be_returning = be_idle_since_ns_.has_value() &&
                              now - *be_idle_since_ns_ < config_.idle_grace_ns;
    if (!run_queues_[kBeDomain].empty() || be_returning) {
      be_credit_ = std::min(be_credit_ + bytes * be_earn_, be_credit_max_);
    }
  } else {
    be_credit_ = std::max(be_credit_ - bytes, -be_debt_max_);
  }
}

RequestDone FairScheduler::FinishRequest(Request& r, uint64_t now_ns) {
  RequestDone done;
  done.request = r.id;
  done.tenant = r.tenant;
  done.bytes = r.bytes;
  done.bytes_completed = r.bytes_completed;
  done.submit_ns = r.submit_ns;
  done.done_ns = now_ns;
  done.cancelled = r.cancelled;
  requests_.erase(r.id);
  return done;
}

absl::StatusOr<std::optional<RequestDone>> FairScheduler::Complete(GrantId grant, uint64_t now_ns) {
  auto git = grants_.find(grant);
  if (git == grants_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown grant ", grant));
  }
  const GrantRecord g = git->second;
  grants_.erase(git);
  const uint64_t now = Now(now_ns);
  --inflight_total_;
  Tenant& t = tenants_.find(g.tenant)->second;  // RemoveTenant drops its grants.
  --t.inflight;
  t.bytes_completed += g.length;
  Request& r = requests_.find(g.request)->second;
  --r.inflight;
  r.bytes_completed += g.length;
  std::optional<RequestDone> done;
  if (r.inflight == 0 && (r.cancelled || r.next_offset == r.bytes)) done = FinishRequest(r, now);
  DeactivateIfIdle(t);
  return done;
}

absl::StatusOr<std::optional<RequestDone>> FairScheduler::Cancel(RequestId request,
                                                                 uint64_t now_ns) {
  auto rit = requests_.find(request);
  if (rit == requests_.end()) {
    return absl::NotFoundError(absl::StrCat("unknown or finished request ", request));
  }
  Request& r = rit->second;
  if (r.cancelled) {
    return absl::FailedPreconditionError(
        absl::StrCat("request ", request, " is already cancelled"));
  }
  const uint64_t now = Now(now_ns);
  Tenant& t = tenants_.find(r.tenant)->second;
  if (r.next_offset < r.bytes) {
    t.queue.erase(std::find(t.queue.begin(), t.queue.end(), r.id));
    t.pending_bytes -= r.bytes - r.next_offset;
    pending_bytes_[DomainOf(t.cls)] -= r.bytes - r.next_offset;
  }
  r.cancelled = true;
  std::optional<RequestDone> done;
  if (r.inflight == 0) done = FinishRequest(r, now);
  DeactivateIfIdle(t);
  return done;
}

uint64_t FairScheduler::LsWaitBoundNs(double bytes_per_ns) const {
  if (!(bytes_per_ns > 0)) return std::numeric_limits<uint64_t>::max();
  const double largest = static_cast<double>(config_.LargestChunk());
  const double ahead =
      static_cast<double>(config_.max_inflight_chunks_total) + BeChunksAhead(config_.chunk_bytes);
  const double bytes = ahead * largest + static_cast<double>(config_.chunk_bytes);
  return CeilNs(bytes / bytes_per_ns);
}

uint64_t FairScheduler::LsLatencyBoundNs(uint64_t request_bytes, double bytes_per_ns) const {
  if (!(bytes_per_ns > 0)) return std::numeric_limits<uint64_t>::max();
  const double largest = static_cast<double>(config_.LargestChunk());
  const double ahead =
      static_cast<double>(config_.max_inflight_chunks_total) + BeChunksAhead(request_bytes);
  const double bytes = ahead * largest + static_cast<double>(request_bytes);
  return CeilNs(bytes / bytes_per_ns);
}

double FairScheduler::BeChunksAhead(uint64_t ls_bytes) const {
  if (!config_.ls_first || !(be_earn_ > 0)) return 0;
  // A full credit lets one BE chunk go; each further one needs a chunk's worth earned by the LS
  // bytes granted meanwhile.
  return 1 + std::floor(static_cast<double>(ls_bytes) * be_earn_ / be_credit_max_);
}

uint64_t FairScheduler::BeWaitBoundNs(double bytes_per_ns) const {
  if (!(bytes_per_ns > 0) || !config_.ls_first || !(be_earn_ > 0)) {
    return std::numeric_limits<uint64_t>::max();
  }
  // From the deepest debt (-largest chunk) to the threshold (one chunk), earned at be_earn_ per
  // LS byte; the LS chunk that crosses the threshold may be a whole chunk; then the in-flight
  // chunks (of the largest size) drain ahead of the BE chunk's own slot.
  const double earn = (be_debt_max_ + be_credit_max_) / be_earn_;
  const double bytes = earn + be_credit_max_ +
                       static_cast<double>(config_.max_inflight_chunks_total) * be_debt_max_;
  return CeilNs(bytes / bytes_per_ns);
}

void FairScheduler::AddRecent(Tenant& t, uint64_t bytes, uint64_t now_ns) {
  t.recent_bytes = DecayedRecent(t, now_ns) + static_cast<double>(bytes);
  t.recent_at_ns = std::max(t.recent_at_ns, now_ns);
}

double FairScheduler::DecayedRecent(const Tenant& t, uint64_t now_ns) const {
  if (now_ns <= t.recent_at_ns) return t.recent_bytes;
  const double dt = static_cast<double>(now_ns - t.recent_at_ns);
  return t.recent_bytes * std::exp(-dt / static_cast<double>(config_.share_window_ns));
}

SchedulerSnapshot FairScheduler::Snapshot(uint64_t now_ns) const {
  SchedulerSnapshot snap;
  snap.now_ns = std::max(last_now_ns_, now_ns);
  snap.inflight_chunks = inflight_total_;
  snap.tenants.reserve(tenants_.size());
  double total_recent = 0;
  for (const auto& [id, t] : tenants_) {
    TenantStats s;
    s.id = id;
    s.cls = t.cls;
    s.weight = t.weight;
    s.vruntime = t.vruntime;
    s.bytes_granted = t.bytes_granted;
    s.bytes_completed = t.bytes_completed;
    s.pending_bytes = t.pending_bytes;
    s.queued_requests = static_cast<uint32_t>(t.queue.size());
    s.inflight_chunks = t.inflight;
    const double recent = DecayedRecent(t, snap.now_ns);
    s.recent_bytes_per_sec = recent * 1e9 / static_cast<double>(config_.share_window_ns);
    s.share = recent;  // Normalised below.
    total_recent += recent;
    snap.tenants.push_back(s);
  }
  for (TenantStats& s : snap.tenants) s.share = total_recent > 0 ? s.share / total_recent : 0;
  std::sort(snap.tenants.begin(), snap.tenants.end(),
            [](const TenantStats& a, const TenantStats& b) { return a.id < b.id; });
  return snap;
}

}  // namespace missile::pcie
