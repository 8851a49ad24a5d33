// FairScheduler: the completely fair (CFS-style) scheduler for the PCIe copies of ONE GPU in ONE
// direction (host-to-device and device-to-host each get their own instance).
//
// What it decides: tenants submit copy requests (a byte count); the scheduler cuts each request
// into chunks of at most Config::chunk_bytes and decides which chunk may start next, so that the
// link is shared in proportion to the tenants' weights, latency-sensitive (LS) tenants go before
// best-effort (BE) ones, and no more than a few chunks are in flight at once (which bounds how
// long an LS chunk can wait). It never touches a GPU: it is a pure state machine over plain
// numbers, driven by the caller with an explicit clock.
//
// Units: bytes; time in nanoseconds on any monotonic clock the caller chooses (`now_ns`). A
// `now_ns` earlier than one seen before is treated as the latest one seen.
//
// Thread safety: none. The caller (the daemon) serialises every call, e.g. under one mutex per
// instance. Calls never block and never call back.
//
// Errors: absl::Status; a call that fails changes nothing.
#ifndef MISSILE_PCIE_SCHED_FAIR_SCHEDULER_H_
#define MISSILE_PCIE_SCHED_FAIR_SCHEDULER_H_

#include <algorithm>
#include <array>
#include <cstdint>
#include <deque>
#include <optional>
#include <set>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/container/node_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "missile/common/tenant_class.h"

namespace missile::pcie {

using TenantId = uint64_t;
using RequestId = uint64_t;  // Assigned by Submit, from 1, never reused by one instance.
using GrantId = uint64_t;    // Assigned by NextGrant, from 1, never reused by one instance.

// The one TenantClass (missile/common/tenant_class.h), named here for the scheduler's code.
using ::missile::TenantClass;
using ::missile::TenantClassName;

inline constexpr uint64_t kKiB = uint64_t{1} << 10;
inline constexpr uint64_t kMiB = uint64_t{1} << 20;
inline constexpr uint64_t kGiB = uint64_t{1} << 30;
inline constexpr uint64_t kTiB = uint64_t{1} << 40;

// Weights: a tenant's share of the link is weight / (sum of the weights of the tenants that want
// it). Priority 0 (like Linux nice 0) has weight 1024.
inline constexpr uint32_t kNiceZeroWeight = 1024;
inline constexpr uint32_t kMinWeight = 1;
inline constexpr uint32_t kMaxWeight = uint32_t{1} << 20;
inline constexpr int kMinPriority = -20;  // Highest priority (largest weight, 88761).
inline constexpr int kMaxPriority = 19;   // Lowest priority (smallest weight, 15).

// Linux CFS's nice-to-weight table (kernel/sched/core.c, sched_prio_to_weight): each step is about
// 1.25x, so one priority step moves about 10% of the link between two busy tenants.
// InvalidArgument outside [kMinPriority, kMaxPriority].
absl::StatusOr<uint32_t> WeightFromPriority(int priority);

// A chunk that may start now: copy bytes [offset, offset + length) of the request.
struct Grant {
  GrantId id = 0;
  TenantId tenant = 0;
  RequestId request = 0;
  uint64_t offset = 0;
  uint64_t length = 0;
  bool operator==(const Grant&) const = default;
};

// A request that has finished: every chunk completed, or it was cancelled and its last in-flight
// chunk completed (then `cancelled`; `bytes_completed` says how much was copied).
struct RequestDone {
  RequestId request = 0;
  TenantId tenant = 0;
  uint64_t bytes = 0;            // As submitted.
  uint64_t bytes_completed = 0;  // Equals `bytes` unless cancelled.
  uint64_t submit_ns = 0;
  uint64_t done_ns = 0;
  bool cancelled = false;
  bool operator==(const RequestDone&) const = default;
};

// What RemoveTenant dropped, so the caller can fail it: every unfinished request of the tenant
// (queued or with chunks in flight) and every grant still in flight. Both sorted ascending.
struct RemovedTenant {
  std::vector<RequestId> requests;
  std::vector<GrantId> inflight_grants;
};

struct TenantStats {
  TenantId id = 0;
  TenantClass cls = TenantClass::kBestEffort;
  uint32_t weight = 0;
  uint64_t vruntime = 0;
  uint64_t bytes_granted = 0;    // Lifetime.
  uint64_t bytes_completed = 0;  // Lifetime.
  uint64_t pending_bytes = 0;    // Submitted, not yet granted.
  uint32_t queued_requests = 0;  // Requests with bytes not yet granted.
  uint32_t inflight_chunks = 0;
  // Bytes granted, exponentially decayed with time constant Config::share_window_ns, as a
  // fraction of all tenants' (0 when nobody was granted anything), and as a rate.
  double share = 0;
  double recent_bytes_per_sec = 0;
  bool operator==(const TenantStats&) const = default;
};

struct SchedulerSnapshot {
  uint64_t now_ns = 0;
  uint32_t inflight_chunks = 0;
  std::vector<TenantStats> tenants;  // Sorted by id.
  bool operator==(const SchedulerSnapshot&) const = default;
};

class FairScheduler {
 public:
  struct Config {
    // Largest chunk granted at once. Smaller chunks shorten an LS chunk's wait (see
    // LsWaitBoundNs) but cost one grant round trip each. 2 MiB: on the H200, a 4 MiB copy behind a
    // bulk copy issued in 2 MiB pieces waited p99 171 us instead of 17.9 ms
    // (docs/hardware/h200.md, "PCIe").
    uint64_t chunk_bytes = 2 * kMiB;
    // Chunk size for best-effort tenants' requests; 0: chunk_bytes. Every chunk boundary costs
    // the GPU a few microseconds with the link idle (bench/chunk_cost), so bulk copies move
    // more in larger chunks, at the price of a longer wait for an LS chunk behind one.
    uint64_t be_chunk_bytes = 0;
    // A larger chunk size still that the caller may give best-effort requests (Submit's size)
    // while the GPU's LS tenants rest (their latency budgets released the BE with room, so the
    // budget's checks measure what it costs them); 0: none. Counted in the bounds below as
    // the largest chunk.
    uint64_t be_rest_chunk_bytes = 0;
    // Chunks granted and not completed, over all tenants. 2 keeps the DMA engine busy across a
    // grant round trip while keeping an LS chunk's wait to two chunks.
    uint32_t max_inflight_chunks_total = 2;
    uint32_t max_inflight_chunks_per_tenant = 2;
    // An LS tenant with pending chunks always goes before every BE tenant: while one has pending
    // chunks, no BE chunk is granted, even into a free slot that the LS tenant's own per-tenant
    // limit keeps it from using (a BE chunk there would queue ahead of the LS chunks on the FIFO
    // link). When false, LS and BE tenants share one vruntime order and the class only labels.
    bool ls_first = true;
    // With ls_first: the smallest fraction of the bytes granted that goes to BE tenants while
    // one of them has pending chunks, in [0, 0.5]. 0: LS strictly first (a BE tenant can wait
    // for as long as LS tenants keep the link busy). Kept as a credit in bytes: while a BE
    // tenant has work (pending or in-flight chunks, or had some less than idle_grace_ns ago),
    // each LS grant of L bytes earns the BE class
    // L * share / (1 - share), up to chunk_bytes; each BE grant spends its length, down to
    // minus the largest chunk size; a BE chunk goes ahead of the LS tenants when the credit is
    // a full chunk_bytes. So neither class banks more than about one chunk (this is the
    // sliding window), at most one BE chunk goes ahead of the LS at a time, and a BE tenant
    // first in line waits for at most (largest chunk + chunk_bytes) * (1 - share) / share bytes
    // of LS grants (see BeWaitBoundNs).
    // 5 %: a BE job beside 16 saturating LS copiers keeps moving (at >= 1/20 of its solo rate)
    // while an LS chunk waits for at most one extra BE chunk once per 20 chunks.
    double be_min_share = 0.05;
    // Copies smaller than this should bypass the scheduler (ShouldBypass): the grant round trip
    // would cost more than the copy, and such a copy holds the link for at most
    // min_bypass_bytes / link rate (64 KiB: about 1.2 us at the H200's 55.4 GB/s).
    uint64_t min_bypass_bytes = 64 * kKiB;
    // Time constant of the decayed share estimate in Snapshot.
    uint64_t share_window_ns = 1'000'000'000;
    // A tenant that runs out of work and submits again less than this later keeps its
    // vruntime, as if it had never left; after a longer idle it restarts at
    // max(vruntime, min_vruntime). A tenant issuing one request at a time is idle between two
    // requests (its last chunks draining, then a round trip) while the others take the link:
    // with the strict rule it loses that lead at every request (in simulation, 32 MiB requests
    // back to back at weights 1:3 got 30:70, with the grace 25:75). The credit a returning
    // tenant can hold is what the others were granted during its drain and this grace, so it
    // stays small. 0 gives the strict CFS rule.
    uint64_t idle_grace_ns = 1'000'000;

    // The chunk size for a tenant of this class.
    uint64_t ChunkFor(TenantClass cls) const {
      return cls == TenantClass::kBestEffort && be_chunk_bytes != 0 ? be_chunk_bytes : chunk_bytes;
    }
    // The largest chunk any request may be cut into.
    uint64_t LargestChunk() const {
      return std::max({chunk_bytes, be_chunk_bytes, be_rest_chunk_bytes});
    }

    // InvalidArgument unless: chunk_bytes (and be_chunk_bytes, be_rest_chunk_bytes unless 0) is
    // a multiple of 4 KiB
    // in [4 KiB, 1 GiB]; the in-flight
    // limits are in [1, 1024] and per tenant <= total; min_bypass_bytes <= chunk_bytes;
    // share_window_ns >= 1 ms; idle_grace_ns <= 1 s; be_min_share in [0, 0.5].
    absl::Status Validate() const;
  };

  // InvalidArgument when the config does not validate.
  static absl::StatusOr<FairScheduler> Create(const Config& config);

  FairScheduler(FairScheduler&&) = default;
  FairScheduler& operator=(FairScheduler&&) = default;

  const Config& config() const { return config_; }

  // Tenants. Weight in [kMinWeight, kMaxWeight] (else InvalidArgument); a duplicate id is
  // AlreadyExists; an unknown one NotFound. SetWeight and SetClass apply from the next decision;
  // SetClass keeps the tenant's lag behind the leaders of its old class in the new class.
  absl::Status AddTenant(TenantId id, TenantClass cls, uint32_t weight);
  // Drops the tenant, its queued requests and its in-flight grants at once: the in-flight slots
  // are free for other tenants immediately, and Complete on a dropped grant is NotFound.
  absl::StatusOr<RemovedTenant> RemoveTenant(TenantId id);
  absl::Status SetWeight(TenantId id, uint32_t weight);
  absl::Status SetClass(TenantId id, TenantClass cls);

  // Queues a copy of `bytes` (1 byte to 1 TiB, else InvalidArgument). Requests of one tenant are
  // granted first-in first-out, and the chunks of one request in offset order. The request is
  // cut into chunks of `chunk_bytes` when given (a multiple of 4 KiB in [4 KiB, 1 GiB], else
  // InvalidArgument; a caller whose tenants cut their copies themselves passes the size they
  // used), else of Config::ChunkFor(the tenant's class).
  absl::StatusOr<RequestId> Submit(TenantId tenant, uint64_t bytes, uint64_t now_ns,
                                   uint64_t chunk_bytes = 0);

  // Submit for a request whose first chunk has started already: the caller lent its tenant a
  // head start (a grant handed out ahead of the request, which the tenant took) and so kept an
  // in-flight slot free for it. The first chunk is granted at once, outside the order and the
  // in-flight limits, and charged as any grant (vruntime, BE share); the rest queue as Submit's
  // do. Same errors as Submit.
  absl::StatusOr<Grant> SubmitStarted(TenantId tenant, uint64_t bytes, uint64_t now_ns,
                                      uint64_t chunk_bytes = 0);

  // The next chunk to start, or nullopt when the in-flight limits are reached or nothing is
  // runnable. The caller loops until nullopt after every Submit and Complete.
  //
  // Policy: with ls_first, the LS tenants go first (no BE grant while an LS tenant has pending
  // chunks), except that a BE chunk goes ahead whenever the BE class's credit allows it
  // (Config::be_min_share); within a class (or among all tenants without ls_first) the runnable tenant with the
  // least vruntime wins, ties to the lower id. A tenant at its per-tenant in-flight limit is
  // passed over. The chosen tenant's vruntime grows by length * 1024 / weight AT GRANT, so
  // decisions never wait for completions. A tenant that becomes active (pending or in-flight
  // work) after an idle longer than idle_grace_ns restarts at max(its vruntime, min_vruntime of
  // its class): idling banks no credit.
  // Cost: O(log n) in the number of tenants, plus at most max_inflight_chunks_total passed over.
  std::optional<Grant> NextGrant(uint64_t now_ns);

  // A granted chunk finished (NotFound for an unknown or dropped grant). Returns the request
  // when this was its last outstanding chunk.
  absl::StatusOr<std::optional<RequestDone>> Complete(GrantId grant, uint64_t now_ns);

  // Drops the request's chunks not yet granted; chunks in flight still complete, and the
  // Complete of the last one reports the request (cancelled). With nothing in flight the
  // request is done at once and returned here. NotFound for an unknown or finished request;
  // FailedPrecondition when it is already cancelled.
  absl::StatusOr<std::optional<RequestDone>> Cancel(RequestId request, uint64_t now_ns);

  // True when a copy of `bytes` should not go through the scheduler at all.
  bool ShouldBypass(uint64_t bytes) const { return bytes < config_.min_bypass_bytes; }

  // How long an LS chunk that is first in line can take from then until it has completed, on a
  // link of `bytes_per_ns` that serves chunks in the order granted: the chunks in flight drain
  // (max_inflight_chunks_total of the largest chunk size), then the chunk itself. Needs ls_first;
  // assumes one
  // LS tenant with work, no bypassing copies, and instant grant round trips (each round trip
  // adds to it in practice). UINT64_MAX for a rate <= 0. With be_min_share > 0, one BE chunk
  // (of the largest size) may go ahead of it, and is counted; for a request, one more per
  // chunk_bytes the BE class earns from it.
  uint64_t LsWaitBoundNs(double bytes_per_ns) const;
  // The same bound for a whole LS request of `request_bytes` submitted with nothing else of its
  // tenant queued: (max_inflight_chunks_total * largest chunk + request_bytes) / rate.
  uint64_t LsLatencyBoundNs(uint64_t request_bytes, double bytes_per_ns) const;
  // How long the BE chunk that is next in the BE class's order can wait for its grant while LS
  // tenants keep the link busy, with ls_first and be_min_share > 0: the chunks in flight drain,
  // then the LS grants that refill the BE credit (one largest chunk's worth, plus the LS chunk
  // that crosses zero). Assumes the BE tenant is below its per-tenant in-flight limit and
  // instant grant round trips. UINT64_MAX for a rate <= 0, be_min_share == 0 or without
  // ls_first.
  uint64_t BeWaitBoundNs(double bytes_per_ns) const;

  uint32_t inflight_chunks() const { return inflight_total_; }
  // Whether any request has chunks not granted yet.
  bool has_pending() const { return pending_bytes_[0] != 0 || pending_bytes_[1] != 0; }
  SchedulerSnapshot Snapshot(uint64_t now_ns) const;

 private:
  friend class FairSchedulerTestPeer;

  struct Tenant;
  // Ordered-set entry: (vruntime, id) is the key; the pointer is stable (node_hash_map).
  struct RunKey {
    uint64_t vruntime;
    TenantId id;
    Tenant* tenant;
  };
  struct RunKeyLess {
    bool operator()(const RunKey& a, const RunKey& b) const {
      return a.vruntime != b.vruntime ? a.vruntime < b.vruntime : a.id < b.id;
    }
  };
  using RunQueue = std::set<RunKey, RunKeyLess>;

  struct Tenant {
    TenantId id = 0;
    TenantClass cls = TenantClass::kBestEffort;
    uint32_t weight = kNiceZeroWeight;
    uint64_t vruntime = 0;
    std::deque<RequestId> queue;  // Requests with bytes not yet granted, FIFO.
    uint64_t pending_bytes = 0;
    uint32_t inflight = 0;
    bool active = false;  // In its run queue: has pending or in-flight chunks.
    bool ever_active = false;
    uint64_t idle_since_ns = 0;
    uint64_t bytes_granted = 0;
    uint64_t bytes_completed = 0;
    double recent_bytes = 0;  // Decayed bytes granted, as of recent_at_ns.
    uint64_t recent_at_ns = 0;
  };
  struct Request {
    RequestId id = 0;
    TenantId tenant = 0;
    uint64_t bytes = 0;
    uint64_t chunk_bytes = 0;
    uint64_t next_offset = 0;  // Bytes granted so far.
    uint64_t bytes_completed = 0;
    uint32_t inflight = 0;
    bool cancelled = false;
    uint64_t submit_ns = 0;
  };
  struct GrantRecord {
    TenantId tenant = 0;
    RequestId request = 0;
    uint64_t length = 0;
  };

  // With ls_first, LS and BE tenants live in separate vruntime domains (run queues); otherwise
  // everyone is in domain 0.
  static constexpr int kNumDomains = 2;
  static constexpr int kLsDomain = 0;
  static constexpr int kBeDomain = 1;
  static constexpr uint64_t kVruntimeRebaseThreshold = uint64_t{1} << 62;

  explicit FairScheduler(const Config& config);

  int DomainOf(TenantClass cls) const;
  uint64_t Now(uint64_t now_ns);
  Tenant* FindTenant(TenantId id);
  // The grant from `domain`'s least-vruntime runnable tenant, or nullopt when none is below
  // its per-tenant limit (then `*held_back` says whether one with pending chunks is at it).
  std::optional<Grant> PickFrom(int domain, uint64_t now, bool* held_back);
  // Grants the next chunk of `r` (of tenant `t`, in run queue `domain`) and charges for it.
  Grant GrantNext(Tenant& t, Request& r, int domain, uint64_t now);
  // True when the BE class is owed a chunk now (ls_first, be_min_share > 0, credit >= 0).
  bool BeDue() const;
  // Keeps the BE credit (Config::be_min_share) after a grant from `domain` of `length` bytes.
  void ChargeShare(int domain, uint64_t length, uint64_t now);
  // How many BE chunks may go ahead of LS grants totalling `ls_bytes` (0 without a minimum
  // share).
  double BeChunksAhead(uint64_t ls_bytes) const;
  // Keeps `t` in its run queue iff it has pending or in-flight chunks; places it on entry.
  void Activate(Tenant& t);
  void DeactivateIfIdle(Tenant& t);
  void UpdateMinVruntime(int domain);
  void Rebase(int domain);
  void AddRecent(Tenant& t, uint64_t bytes, uint64_t now_ns);
  double DecayedRecent(const Tenant& t, uint64_t now_ns) const;
  RequestDone FinishRequest(Request& r, uint64_t now_ns);

  Config config_;
  absl::node_hash_map<TenantId, Tenant> tenants_;
  absl::flat_hash_map<RequestId, Request> requests_;
  absl::flat_hash_map<GrantId, GrantRecord> grants_;
  std::array<RunQueue, kNumDomains> run_queues_;
  std::array<uint64_t, kNumDomains> min_vruntime_{};
  std::array<uint64_t, kNumDomains> pending_bytes_{};  // Submitted, not granted, per domain.
  double be_credit_ = 0;      // Bytes the BE class may take ahead of the LS (be_min_share).
  double be_credit_max_ = 0;  // chunk_bytes: the BE class is due at this credit, its cap.
  double be_debt_max_ = 0;    // The largest chunk size of the config: the deepest debt.
  double be_earn_ = 0;        // be_min_share / (1 - be_min_share).
  std::optional<uint64_t> be_idle_since_ns_;  // When the BE class last ran out of work.
  uint64_t rebase_threshold_ = kVruntimeRebaseThreshold;  // Lowered by tests.
  uint32_t inflight_total_ = 0;
  RequestId next_request_id_ = 1;
  GrantId next_grant_id_ = 1;
  uint64_t last_now_ns_ = 0;
};

}  // namespace missile::pcie

#endif  // MISSILE_PCIE_SCHED_FAIR_SCHEDULER_H_
