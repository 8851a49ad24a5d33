// VramPool: the daemon's VRAM for one GPU, as physical blocks leased to tenant sessions.
//
// Contract:
// - The pool owns every block it creates through its BlockSource (the real source wraps
//   cuMemCreate/cuMemRelease; tests use a fake). Created bytes never exceed capacity_bytes.
//   Each created block is either leased to exactly one session or cached (free, ready to lease);
//   leased + cached == created whenever no call is running.
// - Granule blocks are leased from the cache, lowest ColourPolicy::Rank for the tenant's class
//   first. With no eligible cached block the pool creates blocks; one whose colours (decided by
//   the hardware) do not suit the class stays in the cache for the other class, and the pool
//   tries again, at most max_colour_retries times.
// - Quotas: per tenant (capped at its class's tenant quota) and per class. A call that would
//   exceed a quota or the pool fails with RESOURCE_EXHAUSTED naming the limit, and leaves no
//   lease behind (blocks taken so far return to the cache; the cache itself may have changed).
// - Released blocks are scrubbed (when enabled) and cached; the cache is then trimmed to
//   cache_limit_bytes, oldest first. Blocks kept for the other class during a colour retry may
//   exceed the limit until the next release or Trim.
// - No physical memory is shared across tenants: a block whose descriptor was ever handed out
//   (DuplicateDescriptor) is never cached or leased again. Its holder may have kept a mapping or
//   a duplicate of the descriptor, which the daemon cannot revoke; when it comes back the pool
//   destroys it (the source releases its handle; the driver frees the memory once the last
//   mapping goes) and later leases create fresh memory.
// - A session removed while its process may still map its blocks (RemoveTenant with
//   `process_lives`) leaves them "released, may still be mapped": destroyed without a scrub
//   (the process's data stays intact) and counted against the capacity until ForgetReleased
//   (the process exited).
// - Thread safety: every method may be called from any thread. One mutex guards all state and the
//   BlockSource is called with it held, so a source must never call back into the pool.
// - Destroying the pool destroys every block it created, leased or not.
// No CUDA here: sizes are bytes, handles are opaque numbers.

#ifndef MISSILE_DAEMON_VRAM_POOL_H_
#define MISSILE_DAEMON_VRAM_POOL_H_

#include <cstdint>
#include <map>
#include <memory>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/colorer/channel_set.h"
#include "missile/colorer/colour_policy.h"

namespace missile::daemon {

using BlockId = uint64_t;    // unique within one pool, never reused; 0 is never an id
using SessionId = uint64_t;  // the daemon's tenant session

// One physical allocation as the source made it.
struct PhysicalBlock {
  uint64_t handle = 0;        // opaque to the pool (a CUmemGenericAllocationHandle)
  uint64_t bytes = 0;         // as asked for
  colorer::ColourSet colours;  // the colours its physical pages touch (non-empty)
};

// One GPU's physical memory. Called with the pool's lock held, one call at a time per pool.
class BlockSource {
 public:
  virtual ~BlockSource() = default;
  // bytes is a positive multiple of the pool's granularity. Errors pass through to the caller.
  virtual absl::StatusOr<PhysicalBlock> Create(uint64_t bytes) = 0;
  virtual void Destroy(const PhysicalBlock& block) = 0;
  // Zeroes the block's memory (on release, when the pool scrubs).
  virtual absl::Status Scrub(const PhysicalBlock& block) = 0;
  // A new descriptor for a live block, for a tenant to import (the caller closes it). A source
  // whose blocks cannot be shared refuses (the default: UNIMPLEMENTED).
  virtual absl::StatusOr<int> DuplicateDescriptor(const PhysicalBlock& block);
};

struct PoolOptions {
  uint64_t granularity = 0;        // bytes of one chunk (2 MiB on the H200): a power of two
  uint64_t capacity_bytes = 0;     // most bytes the pool may create: a multiple of granularity
  uint64_t cache_limit_bytes = 0;  // most free bytes kept after a release
  bool scrub_on_release = true;    // zero a block before another tenant can get it
  int max_colour_retries = 8;      // new blocks of the wrong colours tolerated per block asked
};

// Limits for one tenant class.
struct QuotaPolicy {
  uint64_t tenant_quota_bytes = 0;  // default and most any one tenant of the class may hold
  uint64_t class_quota_bytes = 0;   // most all tenants of the class together may hold
};

struct Lease {
  BlockId id = 0;
  uint64_t bytes = 0;
  colorer::ColourSet colours;
  uint64_t handle = 0;
};

struct Usage {
  uint64_t quota_bytes = 0;
  uint64_t used_bytes = 0;
  // min(quota - used, class room, pool room (cached + never created)); 0 rather than negative.
  uint64_t available_bytes = 0;
};

// Which class may be placed on a colour.
enum class ColourRole { kLatencySensitive, kBestEffort, kShared };

struct ColourStats {
  int colour = 0;
  ColourRole role = ColourRole::kShared;
  uint64_t created_bytes = 0;  // blocks touching only this colour
  uint64_t leased_bytes = 0;
};

struct TenantStats {
  SessionId session = 0;
  colorer::TenantClass cls = colorer::TenantClass::kBestEffort;
  Usage usage;
  uint64_t blocks = 0;
  uint64_t allocations = 0;        // allocation calls served since the tenant was added
  uint64_t refusals = 0;           // allocation calls refused (a quota, the pool or the source)
  uint64_t asked_quota_bytes = 0;  // as given to AddTenant or SetTenantQuota; 0: the class's
};

struct PoolSnapshot {
  uint64_t capacity_bytes = 0;
  uint64_t created_bytes = 0;
  uint64_t leased_bytes = 0;
  uint64_t cached_bytes = 0;
  // Destroyed blocks that a live process whose session ended may still map; counted against the
  // capacity (not part of created_bytes).
  uint64_t released_mapped_bytes = 0;
  bool isolating = false;
  std::vector<ColourStats> colours;    // one per colour of the policy's scheme
  uint64_t unclean_created_bytes = 0;  // blocks touching two or more colours
  uint64_t unclean_leased_bytes = 0;
  uint64_t class_used_bytes[2] = {0, 0};  // indexed by ClassIndex(): LS, BE
  std::vector<TenantStats> tenants;       // ascending session id
};

inline int ClassIndex(colorer::TenantClass cls) {
  return cls == colorer::TenantClass::kLatencySensitive ? 0 : 1;
}

class VramPool {
 public:
  // Rejects a null source, a granularity that is not a power of two, a capacity that is zero or
  // not a multiple of the granularity, and max_colour_retries < 1.
  static absl::StatusOr<std::unique_ptr<VramPool>> Create(PoolOptions options, BlockSource* source,
                                                          colorer::ColourPolicy policy,
                                                          QuotaPolicy ls, QuotaPolicy be);
  ~VramPool();
  VramPool(const VramPool&) = delete;
  VramPool& operator=(const VramPool&) = delete;

  // Creates bytes / granularity granule blocks into the cache (whatever cache_limit_bytes says).
  // bytes: a multiple of the granularity within the uncreated capacity. All or nothing.
  absl::Status Prealloc(uint64_t bytes);

  // quota_bytes 0 means the class's tenant quota; larger values are capped at it (now and after
  // later class changes). ALREADY_EXISTS for a known session.
  absl::Status AddTenant(SessionId session, colorer::TenantClass cls, uint64_t quota_bytes);
  // The tenant keeps what it holds (charged to the new class from now on, even above its quota);
  // later allocations use the new class's colours and limits.
  absl::Status SetTenantClass(SessionId session, colorer::TenantClass cls);
  // Same meaning as AddTenant's quota_bytes. Lowering below what the tenant holds takes nothing
  // back; it only refuses further allocations.
  absl::Status SetTenantQuota(SessionId session, uint64_t quota_bytes);
  absl::Status SetClassQuota(colorer::TenantClass cls, QuotaPolicy quota);

  // count granule blocks, all or none.
  absl::StatusOr<std::vector<Lease>> AllocateChunks(SessionId session, uint64_t count);
  // One block of bytes (a multiple of the granularity). A multi-granule block is reused from the
  // cache when one of that size suits the class, otherwise created.
  absl::StatusOr<Lease> AllocateBlock(SessionId session, uint64_t bytes);
  // All or nothing: NOT_FOUND for an id the session does not hold, INVALID_ARGUMENT for a
  // repeated id; nothing is freed then.
  absl::Status Free(SessionId session, const std::vector<BlockId>& ids);
  // Only the holder may look a block up; NOT_FOUND otherwise (unknown and foreign ids alike).
  absl::StatusOr<PhysicalBlock> Lookup(SessionId session, BlockId id) const;
  // A descriptor of a block the session holds (BlockSource::DuplicateDescriptor); NOT_FOUND as
  // Lookup. The caller closes it. From then on the block is the session's only: it is destroyed,
  // never cached, when it comes back.
  absl::StatusOr<int> DuplicateDescriptor(SessionId session, BlockId id);
  // Releases everything the session held and forgets it; returns the released ids (ascending),
  // empty for an unknown session. With `process_lives` (the session ended while its process
  // runs) the blocks it was handed are destroyed without a scrub and stay counted against the
  // capacity, as released_mapped_bytes, until ForgetReleased(session).
  std::vector<BlockId> RemoveTenant(SessionId session, bool process_lives = false);
  // The process of a session removed with `process_lives` exited: its memory is gone. Returns
  // the bytes no longer counted.
  uint64_t ForgetReleased(SessionId session);

  absl::StatusOr<Usage> GetUsage(SessionId session) const;
  PoolSnapshot Snapshot() const;
  uint64_t capacity_bytes() const { return options_.capacity_bytes; }
  // Destroys cached blocks, oldest first, until at most keep_cached_bytes remain.
  absl::Status Trim(uint64_t keep_cached_bytes);

 private:
  enum class Where { kCached, kTaken, kLeased };  // kTaken: inside a running call only
  struct BlockState {
    PhysicalBlock phys;
    Where where = Where::kTaken;
    SessionId holder = 0;    // when kLeased
    uint64_t cache_seq = 0;  // when kCached: age order
    bool exposed = false;    // its descriptor was handed out: never cached or leased again
  };
  struct Tenant {
    colorer::TenantClass cls;
    uint64_t asked_quota = 0;  // 0: the class default
    uint64_t used_bytes = 0;
    uint64_t allocations = 0;
    uint64_t refusals = 0;
    absl::flat_hash_set<BlockId> blocks;
  };
  // Cached blocks by (bytes, colour bits), each bucket by age.
  using CacheKey = std::pair<uint64_t, uint64_t>;

  VramPool(PoolOptions options, BlockSource* source, colorer::ColourPolicy policy, QuotaPolicy ls,
           QuotaPolicy be);

  absl::StatusOr<Tenant*> FindTenant(SessionId session) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<const Tenant*> FindTenant(SessionId session) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  uint64_t QuotaOf(const Tenant& tenant) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Usage UsageOf(const Tenant& tenant) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckSize(uint64_t bytes, const char* what) const;
  // Tenant quota, class quota, pool room for `bytes` more, in that order.
  absl::Status CheckLimits(SessionId session, const Tenant& tenant, uint64_t bytes) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Leases `count` blocks of `bytes` each to the session, or none.
  absl::StatusOr<std::vector<Lease>> AllocateLocked(SessionId session, uint64_t bytes,
                                                    uint64_t count)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One block of `bytes` suiting `cls`, from the cache or the source, marked kTaken.
  absl::StatusOr<BlockId> TakeBlock(uint64_t bytes, colorer::TenantClass cls)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts cached blocks, oldest first, until `bytes` more can be created.
  absl::Status MakeRoom(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::StatusOr<BlockId> CreateBlock(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DestroyBlock(BlockId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertCache(BlockId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseCache(BlockId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A leased block goes back: scrubbed, cached or destroyed (an exposed one always destroyed).
  // `scrub` false: a live process may still use its contents (RemoveTenant with process_lives).
  void Release(BlockId id, bool scrub = true) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Bytes the pool may not create: created, plus released but possibly still mapped.
  uint64_t OccupiedBytes() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return created_bytes_ + released_mapped_total_;
  }
  void TrimLocked(uint64_t keep_cached_bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PoolOptions options_;
  BlockSource* const source_;
  const colorer::ColourPolicy policy_;

  mutable absl::Mutex mu_;
  QuotaPolicy class_quota_[2] ABSL_GUARDED_BY(mu_);
  uint64_t class_used_[2] ABSL_GUARDED_BY(mu_) = {0, 0};
  absl::flat_hash_map<SessionId, Tenant> tenants_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<BlockId, BlockState> blocks_ ABSL_GUARDED_BY(mu_);
  std::map<uint64_t, BlockId> cache_by_age_ ABSL_GUARDED_BY(mu_);
  std::map<CacheKey, std::map<uint64_t, BlockId>> cache_by_kind_ ABSL_GUARDED_BY(mu_);
  BlockId next_id_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_cache_seq_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t created_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t leased_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  uint64_t cached_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  // Per removed session whose process lives: bytes released that it may still map.
  absl::flat_hash_map<SessionId, uint64_t> released_mapped_ ABSL_GUARDED_BY(mu_);
  uint64_t released_mapped_total_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_VRAM_POOL_H_
