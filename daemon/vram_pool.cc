#include "daemon/vram_pool.h"

#include <algorithm>
#include <bit>
#include <iterator>
#include <string>
#include <utility>

#include "absl/strings/str_format.h"
#include "daemon/logger.h"
#include "missile/common/size.h"

namespace missile::daemon {
namespace {

using colorer::ColourSet;
using colorer::TenantClass;

uint64_t SubOrZero(uint64_t a, uint64_t b) { return a > b ? a - b : 0; }

// Keeps the code, adds what the pool was doing.
absl::Status WithContext(const absl::Status& status, const std::string& context) {
  return absl::Status(status.code(), context + ": " + std::string(status.message()));
}

}  // namespace

absl::StatusOr<int> BlockSource::DuplicateDescriptor(const PhysicalBlock&) {
  return absl::UnimplementedError("this block source cannot share its blocks");
}

absl::StatusOr<std::unique_ptr<VramPool>> VramPool::Create(PoolOptions options, BlockSource* source,
                                                           colorer::ColourPolicy policy,
                                                           QuotaPolicy ls, QuotaPolicy be) {
  if (source == nullptr) return absl::InvalidArgumentError("vram pool: no block source");
  if (!std::has_single_bit(options.granularity)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vram pool: granularity %d is not a power of two", options.granularity));
  }
  if (options.capacity_bytes == 0 || options.capacity_bytes % options.granularity != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("vram pool: capacity %d bytes is not a positive multiple of %s",
                        options.capacity_bytes, FormatSize(options.granularity)));
  }
  if (options.max_colour_retries < 1) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "vram pool: max_colour_retries %d must be at least 1", options.max_colour_retries));
  }
  return std::unique_ptr<VramPool>(new VramPool(options, source, std::move(policy), ls, be));
}

VramPool::VramPool(PoolOptions options, BlockSource* source, colorer::ColourPolicy policy,
                   QuotaPolicy ls, QuotaPolicy be)
    : options_(options), source_(source), policy_(std::move(policy)) {
  absl::MutexLock lock(&mu_);
  class_quota_[ClassIndex(TenantClass::kLatencySensitive)] = ls;
  class_quota_[ClassIndex(TenantClass::kBestEffort)] = be;
}

VramPool::~VramPool() {
  absl::MutexLock lock(&mu_);
  for (const auto& [id, state] : blocks_) source_->Destroy(state.phys);
}

absl::Status VramPool::Prealloc(uint64_t bytes) {
  if (bytes == 0) return absl::OkStatus();
  if (absl::Status s = CheckSize(bytes, "prealloc"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  if (bytes > options_.capacity_bytes - OccupiedBytes()) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "pool capacity %s: %s created, prealloc asked %s", FormatSize(options_.capacity_bytes),
        FormatSize(OccupiedBytes()), FormatSize(bytes)));
  }
  std::vector<BlockId> made;
  for (uint64_t i = 0; i < bytes / options_.granularity; ++i) {
    absl::StatusOr<BlockId> id = CreateBlock(options_.granularity);
    if (!id.ok()) {
      for (BlockId undo : made) DestroyBlock(undo);
      return WithContext(id.status(), absl::StrFormat("prealloc block %d", i + 1));
    }
    made.push_back(*id);
  }
  for (BlockId id : made) InsertCache(id);
  return absl::OkStatus();
}

absl::Status VramPool::AddTenant(SessionId session, TenantClass cls, uint64_t quota_bytes) {
  absl::MutexLock lock(&mu_);
  auto [it, inserted] = tenants_.try_emplace(session, Tenant{cls, quota_bytes, 0, 0, 0, {}});
  if (!inserted) {
    return absl::AlreadyExistsError(absl::StrFormat("tenant %d is already registered", session));
  }
  return absl::OkStatus();
}

absl::Status VramPool::SetTenantClass(SessionId session, TenantClass cls) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Tenant*> tenant = FindTenant(session);
  if (!tenant.ok()) return tenant.status();
  Tenant& t = **tenant;
  class_used_[ClassIndex(t.cls)] -= t.used_bytes;
  class_used_[ClassIndex(cls)] += t.used_bytes;
  t.cls = cls;
  return absl::OkStatus();
}

absl::Status VramPool::SetTenantQuota(SessionId session, uint64_t quota_bytes) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Tenant*> tenant = FindTenant(session);
  if (!tenant.ok()) return tenant.status();
  (*tenant)->asked_quota = quota_bytes;
  return absl::OkStatus();
}

absl::Status VramPool::SetClassQuota(TenantClass cls, QuotaPolicy quota) {
  absl::MutexLock lock(&mu_);
  class_quota_[ClassIndex(cls)] = quota;
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Lease>> VramPool::AllocateChunks(SessionId session, uint64_t count) {
  if (count == 0) return absl::InvalidArgumentError("allocate: count 0");
  if (count > options_.capacity_bytes / options_.granularity) {
    return absl::InvalidArgumentError(
        absl::StrFormat("allocate: %d chunks of %s exceed the pool capacity %s", count,
                        FormatSize(options_.granularity), FormatSize(options_.capacity_bytes)));
  }
  absl::MutexLock lock(&mu_);
  return AllocateLocked(session, options_.granularity, count);
}

absl::StatusOr<Lease> VramPool::AllocateBlock(SessionId session, uint64_t bytes) {
  if (absl::Status s = CheckSize(bytes, "allocate"); !s.ok()) return s;
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::vector<Lease>> leases = AllocateLocked(session, bytes, 1);
  if (!leases.ok()) return leases.status();
  return leases->front();
}

absl::Status VramPool::Free(SessionId session, const std::vector<BlockId>& ids) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Tenant*> tenant = FindTenant(session);
  if (!tenant.ok()) return tenant.status();
  Tenant& t = **tenant;
  absl::flat_hash_set<BlockId> seen;
  for (BlockId id : ids) {
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(
          absl::StrFormat("free: block %d appears twice; nothing freed", id));
    }
    if (!t.blocks.contains(id)) {
      return absl::NotFoundError(
          absl::StrFormat("free: tenant %d holds no block %d; nothing freed", session, id));
    }
  }
  for (BlockId id : ids) {
    const uint64_t bytes = blocks_.at(id).phys.bytes;
    t.blocks.erase(id);
    t.used_bytes -= bytes;
    class_used_[ClassIndex(t.cls)] -= bytes;
    leased_bytes_ -= bytes;
    Release(id);
  }
  return absl::OkStatus();
}

absl::StatusOr<PhysicalBlock> VramPool::Lookup(SessionId session, BlockId id) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<const Tenant*> tenant = FindTenant(session);
  if (!tenant.ok()) return tenant.status();
  if (!(*tenant)->blocks.contains(id)) {
    return absl::NotFoundError(absl::StrFormat("tenant %d holds no block %d", session, id));
  }
  return blocks_.at(id).phys;
}

absl::StatusOr<int> VramPool::DuplicateDescriptor(SessionId session, BlockId id) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<Tenant*> tenant = FindTenant(session);
  if (!tenant.ok()) return tenant.status();
  if (!(*tenant)->blocks.contains(id)) {
    return absl::NotFoundError(absl::StrFormat("tenant %d holds no block %d", session, id));
  }
  BlockState& state = blocks_.at(id);
  // Marked before the descriptor exists: whatever happens to it, the block is this tenant's.
  state.exposed = true;
  return source_->DuplicateDescriptor(state.phys);
}

std::vector<BlockId> VramPool::RemoveTenant(SessionId session, bool process_lives) {
  absl::MutexLock lock(&mu_);
  auto it = tenants_.find(session);
  if (it == tenants_.end()) return {};
  Tenant& t = it->second;
  std::vector<BlockId> ids(t.blocks.begin(), t.blocks.end());
  std::sort(ids.begin(), ids.end());
  for (BlockId id : ids) {
    const uint64_t bytes = blocks_.at(id).phys.bytes;
    class_used_[ClassIndex(t.cls)] -= bytes;
    leased_bytes_ -= bytes;
    if (process_lives && blocks_.at(id).exposed) {
      // Still the process's memory as far as the driver knows: counted until it exits.
      released_mapped_[session] += bytes;
      released_mapped_total_ += bytes;
      Release(id, /*scrub=*/false);
    } else {
      Release(id);
    }
  }
  tenants_.erase(it);
  return ids;
}

uint64_t VramPool::ForgetReleased(SessionId session) {
  absl::MutexLock lock(&mu_);
  auto it = released_mapped_.find(session);
  if (it == released_mapped_.end()) return 0;
  const uint64_t bytes = it->second;
  released_mapped_total_ -= bytes;
  released_mapped_.erase(it);
  return bytes;
}

absl::StatusOr<Usage> VramPool::GetUsage(SessionId session) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<const Tenant*> tenant = FindTenant(session);
  if (!tenant.ok()) return tenant.status();
  return UsageOf(**tenant);
}

PoolSnapshot VramPool::Snapshot() const {
  absl::MutexLock lock(&mu_);
  PoolSnapshot snap;
  snap.capacity_bytes = options_.capacity_bytes;
  snap.created_bytes = created_bytes_;
  snap.leased_bytes = leased_bytes_;
  snap.cached_bytes = cached_bytes_;
  snap.released_mapped_bytes = released_mapped_total_;
  snap.isolating = policy_.isolating();
  const int colour_count = policy_.scheme().colour_count();
  const ColourSet ls = policy_.ColoursFor(TenantClass::kLatencySensitive);
  const ColourSet be = policy_.ColoursFor(TenantClass::kBestEffort);
  for (int c = 0; c < colour_count; ++c) {
    ColourStats stats;
    stats.colour = c;
    if (!policy_.isolating()) {
      stats.role = ColourRole::kShared;
    } else if (ls.Contains(c)) {
      stats.role = be.Contains(c) ? ColourRole::kShared : ColourRole::kLatencySensitive;
    } else {
      stats.role = ColourRole::kBestEffort;
    }
    snap.colours.push_back(stats);
  }
  for (const auto& [id, state] : blocks_) {
    const ColourSet colours = state.phys.colours;
    const bool leased = state.where == Where::kLeased;
    if (colours.Count() == 1 && colours.Lowest() < colour_count) {
      ColourStats& stats = snap.colours[colours.Lowest()];
      stats.created_bytes += state.phys.bytes;
      if (leased) stats.leased_bytes += state.phys.bytes;
    } else {
      snap.unclean_created_bytes += state.phys.bytes;
      if (leased) snap.unclean_leased_bytes += state.phys.bytes;
    }
  }
  snap.class_used_bytes[0] = class_used_[0];
  snap.class_used_bytes[1] = class_used_[1];
  for (const auto& [session, tenant] : tenants_) {
    snap.tenants.push_back(TenantStats{session, tenant.cls, UsageOf(tenant), tenant.blocks.size(),
                                       tenant.allocations, tenant.refusals, tenant.asked_quota});
  }
  std::sort(snap.tenants.begin(), snap.tenants.end(),
            [](const TenantStats& a, const TenantStats& b) { return a.session < b.session; });
  return snap;
}

absl::Status VramPool::Trim(uint64_t keep_cached_bytes) {
  absl::MutexLock lock(&mu_);
  TrimLocked(keep_cached_bytes);
  return absl::OkStatus();
}

// ---- private ----

absl::StatusOr<VramPool::Tenant*> VramPool::FindTenant(SessionId session) {
  auto it = tenants_.find(session);
  if (it == tenants_.end()) {
    return absl::NotFoundError(absl::StrFormat("no tenant %d", session));
  }
  return &it->second;
}

absl::StatusOr<const VramPool::Tenant*> VramPool::FindTenant(SessionId session) const {
  auto it = tenants_.find(session);
  if (it == tenants_.end()) {
    return absl::NotFoundError(absl::StrFormat("no tenant %d", session));
  }
  return &it->second;
}

uint64_t VramPool::QuotaOf(const Tenant& tenant) const {
  const uint64_t cap = class_quota_[ClassIndex(tenant.cls)].tenant_quota_bytes;
  return tenant.asked_quota == 0 ? cap : std::min(tenant.asked_quota, cap);
}

Usage VramPool::UsageOf(const Tenant& tenant) const {
  Usage usage;
  usage.quota_bytes = QuotaOf(tenant);
  usage.used_bytes = tenant.used_bytes;
  const int cls = ClassIndex(tenant.cls);
  usage.available_bytes =
      std::min({SubOrZero(usage.quota_bytes, tenant.used_bytes),
                SubOrZero(class_quota_[cls].class_quota_bytes, class_used_[cls]),
                SubOrZero(options_.capacity_bytes, leased_bytes_ + released_mapped_total_)});
  return usage;
}

absl::Status VramPool::CheckSize(uint64_t bytes, const char* what) const {
  if (bytes == 0 || bytes % options_.granularity != 0) {
    return absl::InvalidArgumentError(
        absl::StrFormat("%s: %d bytes is not a positive multiple of the granularity %s", what,
                        bytes, FormatSize(options_.granularity)));
  }
  if (bytes > options_.capacity_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat("%s: %s exceeds the pool capacity %s", what,
                                                      FormatSize(bytes),
                                                      FormatSize(options_.capacity_bytes)));
  }
  return absl::OkStatus();
}

absl::Status VramPool::CheckLimits(SessionId session, const Tenant& tenant, uint64_t bytes) const {
  const uint64_t quota = QuotaOf(tenant);
  if (tenant.used_bytes > quota || bytes > quota - tenant.used_bytes) {
    return absl::ResourceExhaustedError(
        absl::StrFormat("tenant %d quota %s: holds %s, asked %s", session, FormatSize(quota),
                        FormatSize(tenant.used_bytes), FormatSize(bytes)));
  }
  const int cls = ClassIndex(tenant.cls);
  const uint64_t class_quota = class_quota_[cls].class_quota_bytes;
  if (class_used_[cls] > class_quota || bytes > class_quota - class_used_[cls]) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "class %s quota %s: holds %s, tenant %d asked %s", TenantClassName(tenant.cls),
        FormatSize(class_quota), FormatSize(class_used_[cls]), session, FormatSize(bytes)));
  }
  if (bytes > options_.capacity_bytes - leased_bytes_ - released_mapped_total_) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "pool capacity %s: %s leased, %s released but possibly still mapped, tenant %d asked %s",
        FormatSize(options_.capacity_bytes), FormatSize(leased_bytes_),
        FormatSize(released_mapped_total_), session, FormatSize(bytes)));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::vector<Lease>> VramPool::AllocateLocked(SessionId session, uint64_t bytes,
                                                            uint64_t count) {
  absl::StatusOr<Tenant*> tenant = FindTenant(session);
  if (!tenant.ok()) return tenant.status();
  Tenant& t = **tenant;
  // count * bytes <= capacity: the callers checked count and bytes against it.
  if (absl::Status s = CheckLimits(session, t, count * bytes); !s.ok()) {
    ++t.refusals;
    return s;
  }

  std::vector<BlockId> taken;
  taken.reserve(count);
  for (uint64_t i = 0; i < count; ++i) {
    absl::StatusOr<BlockId> id = TakeBlock(bytes, t.cls);
    if (!id.ok()) {
      for (BlockId undo : taken) InsertCache(undo);  // never handed out: no scrub needed
      ++t.refusals;
      return WithContext(id.status(), absl::StrFormat("tenant %d, block %d of %d (%s)", session,
                                                      i + 1, count, FormatSize(bytes)));
    }
    taken.push_back(*id);
  }

  std::vector<Lease> leases;
  leases.reserve(count);
  for (BlockId id : taken) {
    BlockState& state = blocks_.at(id);
    state.where = Where::kLeased;
    state.holder = session;
    t.blocks.insert(id);
    leases.push_back(Lease{id, state.phys.bytes, state.phys.colours, state.phys.handle});
  }
  t.used_bytes += count * bytes;
  ++t.allocations;
  class_used_[ClassIndex(t.cls)] += count * bytes;
  leased_bytes_ += count * bytes;
  return leases;
}

absl::StatusOr<BlockId> VramPool::TakeBlock(uint64_t bytes, TenantClass cls) {
  // The cached bucket of this size whose colours rank best for the class; its newest block.
  auto best = cache_by_kind_.end();
  int best_rank = 0;
  for (auto it = cache_by_kind_.lower_bound({bytes, 0});
       it != cache_by_kind_.end() && it->first.first == bytes; ++it) {
    const std::optional<int> rank = policy_.Rank(ColourSet::FromBits(it->first.second), cls);
    if (rank.has_value() && (best == cache_by_kind_.end() || *rank < best_rank)) {
      best = it;
      best_rank = *rank;
    }
  }
  if (best != cache_by_kind_.end()) {
    const BlockId id = std::prev(best->second.end())->second;
    EraseCache(id);
    return id;
  }

  // New blocks: the hardware decides their colours.
  for (int attempt = 0; attempt < options_.max_colour_retries; ++attempt) {
    if (absl::Status s = MakeRoom(bytes); !s.ok()) return s;
    absl::StatusOr<BlockId> id = CreateBlock(bytes);
    if (!id.ok()) return id.status();
    if (policy_.Eligible(blocks_.at(*id).phys.colours, cls)) return *id;
    // Wrong colours for this class: keep it for the other one (multi-granule blocks only within
    // the cache limit, since they rarely fit another request).
    if (bytes == options_.granularity || cached_bytes_ + bytes <= options_.cache_limit_bytes) {
      InsertCache(*id);
    } else {
      DestroyBlock(*id);
    }
  }
  return absl::ResourceExhaustedError(absl::StrFormat(
      "no block of %s colour after %d tries",
      cls == TenantClass::kLatencySensitive ? "an LS" : "a BE", options_.max_colour_retries));
}

absl::Status VramPool::MakeRoom(uint64_t bytes) {
  const uint64_t uncached = OccupiedBytes() - cached_bytes_;
  if (bytes > options_.capacity_bytes - uncached) {
    return absl::ResourceExhaustedError(absl::StrFormat(
        "pool capacity %s: %s in use, no room to create %s", FormatSize(options_.capacity_bytes),
        FormatSize(uncached), FormatSize(bytes)));
  }
  while (bytes > options_.capacity_bytes - OccupiedBytes()) {
    DestroyBlock(cache_by_age_.begin()->second);
  }
  return absl::OkStatus();
}

absl::StatusOr<BlockId> VramPool::CreateBlock(uint64_t bytes) {
  absl::StatusOr<PhysicalBlock> block = source_->Create(bytes);
  if (!block.ok()) {
    return WithContext(block.status(), absl::StrFormat("creating a %s block", FormatSize(bytes)));
  }
  const ColourSet all = policy_.scheme().AllColours();
  if (block->bytes != bytes || block->colours.Empty() || !block->colours.IsSubsetOf(all)) {
    const std::string bad = absl::StrFormat("block source gave %d bytes of colours %s for %d",
                                            block->bytes, block->colours.ToString(), bytes);
    source_->Destroy(*block);
    return absl::InternalError(bad);
  }
  const BlockId id = next_id_++;
  blocks_.emplace(id, BlockState{*block, Where::kTaken, 0, 0});
  created_bytes_ += bytes;
  return id;
}

void VramPool::DestroyBlock(BlockId id) {
  auto it = blocks_.find(id);
  if (it->second.where == Where::kCached) EraseCache(id);
  source_->Destroy(it->second.phys);
  created_bytes_ -= it->second.phys.bytes;
  blocks_.erase(it);
}

void VramPool::InsertCache(BlockId id) {
  BlockState& state = blocks_.at(id);
  state.where = Where::kCached;
  state.holder = 0;
  state.cache_seq = next_cache_seq_++;
  cache_by_age_.emplace(state.cache_seq, id);
  cache_by_kind_[{state.phys.bytes, state.phys.colours.bits()}].emplace(state.cache_seq, id);
  cached_bytes_ += state.phys.bytes;
}

void VramPool::EraseCache(BlockId id) {
  BlockState& state = blocks_.at(id);
  cache_by_age_.erase(state.cache_seq);
  auto bucket = cache_by_kind_.find({state.phys.bytes, state.phys.colours.bits()});
  bucket->second.erase(state.cache_seq);
  if (bucket->second.empty()) cache_by_kind_.erase(bucket);
  cached_bytes_ -= state.phys.bytes;
  state.where = Where::kTaken;
}

void VramPool::Release(BlockId id, bool scrub) {
  BlockState& state = blocks_.at(id);
  state.where = Where::kTaken;
  state.holder = 0;
  if (state.exposed) {
    // Its holder may keep a mapping or a descriptor: the memory must reach nobody else. The
    // scrub still clears it in case the driver hands the same pages out again once the last
    // mapping is gone.
    if (scrub && options_.scrub_on_release) {
      if (absl::Status s = source_->Scrub(state.phys); !s.ok()) {
        GetLogger(kPoolLog)->warn("scrubbing block {} ({} bytes) failed: {}", id,
                                  state.phys.bytes, std::string(s.message()));
      }
    }
    DestroyBlock(id);
    return;
  }
  if (scrub && options_.scrub_on_release) {
    if (absl::Status s = source_->Scrub(state.phys); !s.ok()) {
      GetLogger(kPoolLog)->warn("scrubbing block {} ({} bytes) failed, destroying it: {}", id, state.phys.bytes,
                 std::string(s.message()));
      DestroyBlock(id);
      return;
    }
  }
  if (state.phys.bytes == options_.granularity) {
    InsertCache(id);
    TrimLocked(options_.cache_limit_bytes);
  } else if (cached_bytes_ + state.phys.bytes <= options_.cache_limit_bytes) {
    InsertCache(id);
  } else {
    DestroyBlock(id);
  }
}

void VramPool::TrimLocked(uint64_t keep_cached_bytes) {
  while (cached_bytes_ > keep_cached_bytes) DestroyBlock(cache_by_age_.begin()->second);
}

}  // namespace missile::daemon
