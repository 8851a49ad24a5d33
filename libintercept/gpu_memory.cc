#include "gpu_memory.h"

#include <unistd.h>

#include <algorithm>
#include <string>

namespace missile::shim {
namespace {

// A freed range stays mapped for the next allocation of its rounded size, which then costs no
// round trip and no driver call (p99 under 1 us on the H200). A new one costs a round trip, an
// import, a map and an access change in the shim and, when the daemon's cache has no block of
// that size, a create and an export in the daemon: p99 0.3-0.7 ms for 2-64 MiB
// (docs/results.md, 2026-11-29-alloc2-h200). The cache holds at most as many ranges as a free
// batch has blocks, and at most kReuseMaxBytes, or an eighth of the GPU (of the tenant's quota,
// if smaller): the daemon counts cached memory against the tenant, its class and the pool, and
// other tenants cannot have it until it is evicted. 1 GiB covers the sizes bench/alloc_latency
// loops over; an allocation that hits the quota returns the whole cache first, so the bound only
// limits what a tenant keeps from the others.
constexpr uint64_t kReuseMaxBytes = uint64_t{1} << 30;
constexpr uint64_t kSmallMax = uint64_t{1} << 20;
constexpr uint64_t kAlignment = 256;  // what cuMemAlloc guarantees

uint64_t RoundUp(uint64_t v, uint64_t to) { return (v + to - 1) / to * to; }

}  // namespace

absl::StatusOr<std::unique_ptr<GpuMemory>> GpuMemory::Create(SessionClient* session,
                                                             const GpuLink& link, CUdevice dev,
                                                             uint64_t serial,
                                                             const Config& config,
                                                             const DriverApi& api,
                                                             spdlog::logger* log) {
  std::unique_ptr<GpuMemory> d(new GpuMemory(api, log));
  d->session_ = session;
  d->serial_ = serial;
  d->gpu_ = link.index;
  d->dev_ = dev;
  d->granularity_ = link.granularity;
  d->single_blocks_ = config.blocks == Config::Blocks::kSingle ||
                      (config.blocks == Config::Blocks::kAuto && link.colours <= 1);
  d->device_total_ = link.total_bytes;
  uint64_t share = link.total_bytes;
  if (config.quota_bytes != 0) share = std::min(share, config.quota_bytes);
  // The quota the daemon holds this tenant to (its class's default, or what an admin set), as
  // it is now; a later change does not resize the cache.
  if (auto usage = session->Usage(link.index); usage.ok() && usage->quota_bytes != 0) {
    share = std::min(share, usage->quota_bytes);
  }
  d->reuse_max_bytes_ = std::min(kReuseMaxBytes, share / 8);
  // Twice the device's memory: room for fragmentation without ever running out of addresses.
  const uint64_t va_size = RoundUp(link.total_bytes * 2, link.granularity);
  CUdeviceptr va_base = 0;
  if (CUresult r = api.MemAddressReserve(&va_base, va_size, link.granularity, 0, 0);
      r != CUDA_SUCCESS) {
    std::string what = "reserving " + std::to_string(va_size) + " bytes of addresses on device " +
                       std::to_string(static_cast<int>(dev));
    return DriverStatus(api, what.c_str(), r);
  }
  d->va_base_ = va_base;
  d->va_size_ = va_size;
  auto space = AddressSpace::Create(va_base, va_size, link.granularity);
  if (!space.ok()) return space.status();
  SmallAllocatorOptions small;
  small.chunk_size = link.granularity;
  small.max_small_bytes = std::min(kSmallMax, link.granularity);
  d->small_max_ = small.max_small_bytes;
  auto allocator = SmallAllocator::Create(small);
  if (!allocator.ok()) return allocator.status();
  d->small_ = std::move(*allocator);
  absl::MutexLock lock(&d->mu_);
  d->space_.emplace(std::move(*space));
  return d;
}

GpuMemory::~GpuMemory() {
  if (va_size_ != 0) api_.MemAddressFree(va_base_, va_size_);
}

absl::StatusOr<std::vector<BlockLease>> GpuMemory::Lease(bool single, uint64_t bytes,
                                                         Relief relieve) {
  auto leases = session_->Allocate(gpu_, single, bytes);
  if (leases.status().code() == absl::StatusCode::kResourceExhausted) {
    // Blocks freed but not returned yet may be what stands between us and the quota.
    relieve();
    ReturnFreed();
    leases = session_->Allocate(gpu_, single, bytes);
  }
  if (leases.ok()) {
    for (const BlockLease& l : *leases) leased_bytes_ += l.bytes;
  }
  return leases;
}

absl::Status GpuMemory::MapBlocks(CUdeviceptr va, std::vector<BlockLease>& leases) {
  uint64_t offset = 0;
  absl::Status status;
  for (BlockLease& l : leases) {
    CUmemGenericAllocationHandle h = 0;
    CUresult r = api_.MemImportFromShareableHandle(
        &h, reinterpret_cast<void*>(static_cast<uintptr_t>(l.fd)),
        CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR);
    close(l.fd);
    l.fd = -1;
    if (r == CUDA_SUCCESS) {
      r = api_.MemMap(va + offset, l.bytes, 0, h, 0);
      api_.MemRelease(h);  // the mapping keeps the memory alive
    }
    if (r != CUDA_SUCCESS) {
      status = DriverStatus(api_, "importing and mapping a block", r);
      break;
    }
    offset += l.bytes;
  }
  for (BlockLease& l : leases) {
    if (l.fd >= 0) close(l.fd);
  }
  if (status.ok()) {
    CUmemAccessDesc access{};
    access.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
    access.location.id = static_cast<int>(dev_);
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    if (CUresult r = api_.MemSetAccess(va, offset, &access, 1); r != CUDA_SUCCESS) {
      status = DriverStatus(api_, "cuMemSetAccess", r);
    }
  }
  if (!status.ok()) {
    for (uint64_t done = 0; done < offset; done += granularity_) {
      api_.MemUnmap(va + done, granularity_);
    }
  }
  return status;
}

absl::StatusOr<CUdeviceptr> GpuMemory::MapNew(uint64_t bytes, bool single, Relief relieve) {
  absl::StatusOr<uint64_t> va;
  {
    absl::MutexLock lock(&mu_);
    if (std::optional<CUdeviceptr> cached = TakeCached(bytes)) return *cached;
    va = space_->Allocate(bytes, granularity_);
    if (!va.ok() && !reuse_.empty()) {
      // Cached ranges hold addresses too.
      DrainCache();
      va = space_->Allocate(bytes, granularity_);
    }
  }
  if (!va.ok()) return va.status();
  auto leases = Lease(single, bytes, relieve);
  absl::Status s = leases.status();
  if (s.ok()) s = MapBlocks(*va, *leases);
  absl::MutexLock lock(&mu_);
  if (!s.ok()) {
    space_->Free(*va).IgnoreError();
    if (leases.ok()) {
      for (const BlockLease& l : *leases) {
        pending_free_.push_back(l.id);
        leased_bytes_ -= l.bytes;
      }
    }
    return s;
  }
  Mapping m{bytes, {}};
  for (const BlockLease& l : *leases) m.blocks.push_back(l.id);
  mappings_[*va] = std::move(m);
  return *va;
}

absl::StatusOr<CUdeviceptr> GpuMemory::AllocLarge(uint64_t bytes, Relief relieve) {
  uint64_t rounded = RoundUp(bytes, granularity_);
  // One block per granule costs one import and one map per 2 MiB (bench/vmm_cost); one block
  // for the whole allocation costs one of each, but is placed by colour only as a whole. A
  // cached range of this size is reused whichever shape backs it.
  return MapNew(rounded, single_blocks_ && rounded > granularity_, relieve);
}

absl::StatusOr<CUdeviceptr> GpuMemory::AllocSmall(uint64_t bytes, Relief relieve) {
  auto fast = small_->TryAllocate(bytes, kAlignment);
  if (!fast.ok()) return fast.status();
  if (fast->has_value()) return (*fast)->address;
  // No room in the blocks held: lease one more, outside the allocator's lock.
  absl::StatusOr<CUdeviceptr> chunk = MapNew(granularity_, /*single=*/false, relieve);
  if (!chunk.ok()) return chunk.status();
  auto got = small_->AddChunkAndAllocate(*chunk, granularity_, bytes, kAlignment);
  if (!got.ok()) return got.status();
  return got->address;
}

void GpuMemory::ReleaseRange(CUdeviceptr va) {
  auto it = mappings_.find(va);
  if (it == mappings_.end()) return;
  Mapping m = std::move(it->second);
  mappings_.erase(it);
  leased_bytes_ -= m.bytes;
  if (m.bytes > reuse_max_bytes_) {
    UnmapRange(va, m);  // would evict everything else and then itself
    return;
  }
  reuse_bytes_ += m.bytes;
  reuse_.push_back({va, std::move(m)});
  size_t evict = 0;
  uint64_t kept_bytes = reuse_bytes_;
  while (reuse_.size() - evict > kReuseMaxRanges || kept_bytes > reuse_max_bytes_) {
    kept_bytes -= reuse_[evict].mapping.bytes;
    UnmapRange(reuse_[evict].va, reuse_[evict].mapping);
    ++evict;
  }
  reuse_.erase(reuse_.begin(), reuse_.begin() + evict);
  reuse_bytes_ = kept_bytes;
}

std::optional<CUdeviceptr> GpuMemory::TakeCached(uint64_t bytes) {
  // Newest first: its memory is the likeliest to be warm in the GPU's caches and TLBs.
  for (auto it = reuse_.rbegin(); it != reuse_.rend(); ++it) {
    if (it->mapping.bytes != bytes) continue;
    CUdeviceptr va = it->va;
    reuse_bytes_ -= bytes;
    leased_bytes_ += bytes;
    mappings_[va] = std::move(it->mapping);
    reuse_.erase(std::next(it).base());
    return va;
  }
  return std::nullopt;
}

void GpuMemory::DrainCache() {
  for (const Cached& c : reuse_) UnmapRange(c.va, c.mapping);
  reuse_.clear();
  reuse_bytes_ = 0;
}

void GpuMemory::UnmapRange(CUdeviceptr va, const Mapping& m) {
  if (CUresult r = api_.MemUnmap(va, m.bytes); r != CUDA_SUCCESS) {
    // Mapped block by block: unmap block by block.
    for (uint64_t off = 0; off < m.bytes; off += granularity_) {
      api_.MemUnmap(va + off, granularity_);
    }
  }
  space_->Free(va).IgnoreError();
  for (uint64_t id : m.blocks) pending_free_.push_back(id);
}

absl::Status GpuMemory::Free(CUdeviceptr ptr, AllocationKind kind) {
  if (kind == AllocationKind::kSmall) {
    auto freed = small_->Free(ptr);
    if (!freed.ok()) return freed.status();
    std::vector<uint64_t> chunks = small_->TakeReleasableChunks();
    absl::MutexLock lock(&mu_);
    for (uint64_t chunk : chunks) ReleaseRange(chunk);
  } else {
    absl::MutexLock lock(&mu_);
    ReleaseRange(ptr);
  }
  if (!session_->connected()) {
    // Nothing will reuse the cache now: unmap it, so the memory goes back to the GPU.
    ReturnFreed();
  } else {
    FlushFrees(/*force=*/false);
  }
  return absl::OkStatus();
}

void GpuMemory::QueueReturn(uint64_t block, uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  pending_free_.push_back(block);
  leased_bytes_ -= bytes;
}

void GpuMemory::ReturnFreed() {
  {
    absl::MutexLock lock(&mu_);
    DrainCache();
  }
  FlushFrees(/*force=*/true);
}

void GpuMemory::FlushFrees(bool force) {
  // After the session ended, only a successor in the same daemon session takes them (the daemon
  // kept the session through a stall, AdoptedBy). They never go to another session, whose
  // daemon never leased them; they stay queued meanwhile.
  SessionClient* to = session_;
  if (!to->connected()) to = adopted_by_.load(std::memory_order_acquire);
  if (to == nullptr || !to->connected()) return;
  std::vector<uint64_t> ids;
  {
    absl::MutexLock lock(&mu_);
    if (pending_free_.empty() || (!force && pending_free_.size() < kFreeBatchBlocks)) return;
    ids.swap(pending_free_);
  }
  if (absl::Status s = to->Free(gpu_, ids); !s.ok()) {
    log_->error("returning {} blocks to missiled: {}", ids.size(), std::string(s.message()));
  }
}

void GpuMemory::AdoptedBy(SessionClient* successor) {
  adopted_by_.store(successor, std::memory_order_release);
  FlushFrees(/*force=*/true);
}

size_t GpuMemory::cached_ranges() const {
  absl::MutexLock lock(&mu_);
  return reuse_.size();
}

size_t GpuMemory::queued_blocks() const {
  absl::MutexLock lock(&mu_);
  return pending_free_.size();
}

}  // namespace missile::shim
