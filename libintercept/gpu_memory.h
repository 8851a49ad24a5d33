// One GPU's memory in one daemon session: the address range the shim reserved on it, the
// mappings of the daemon blocks behind live allocations, the small-allocation chunks, the reuse
// cache of freed ranges and the blocks waiting to go back to the daemon.
//
// A large allocation maps whole blocks at addresses of the reserved range; a small one is
// carved from a granule block this GPU already holds. A freed range stays mapped for the next
// allocation of the same rounded size (at most kReuseMaxRanges ranges and reuse_max_bytes());
// past those bounds the oldest range is unmapped and its blocks are queued, and queued blocks go
// back in one Free call once kFreeBatchBlocks are pending. The daemon counts cached and queued
// blocks against the tenant until they are returned, so capacity queries and allocations that
// meet the quota call ReturnFreed first.
//
// The SessionGpu of its (session, GPU) owns it (session_gpu.h), made by the memory manager.
// The state belongs to `session()` for good: its RPCs go to that session only, so its block ids
// never reach another daemon session; once the session ended, frees unmap locally and the
// blocks stay queued, sent only if a client of the same daemon session adopts the state.
// Thread-safety: every public method may be called from any thread. mu_ guards the address
// space, the mappings, the cache and the queue; driver calls that map new blocks and every RPC
// run outside it (the small allocator has its own lock). Lock order: the memory manager's
// locks, then mu_.
#ifndef MISSILE_LIBINTERCEPT_GPU_MEMORY_H_
#define MISSILE_LIBINTERCEPT_GPU_MEMORY_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "address_space.h"
#include "allocation_table.h"
#include "config.h"
#include "driver_api.h"
#include "session_client.h"
#include "small_allocator.h"
#include "spdlog/logger.h"

namespace missile::shim {

class GpuMemory {
 public:
  // Frees go back to the daemon once this many blocks are pending.
  static constexpr size_t kFreeBatchBlocks = 32;
  // The reuse cache holds at most this many ranges (see gpu_memory.cc for the byte bound).
  static constexpr size_t kReuseMaxRanges = kFreeBatchBlocks;

  // Reserves twice the device's memory in addresses and sets up the allocators for `dev`, the
  // daemon's GPU `link` of `session`. `serial` tags its allocations in the allocation table.
  static absl::StatusOr<std::unique_ptr<GpuMemory>> Create(SessionClient* session,
                                                           const GpuLink& link, CUdevice dev,
                                                           uint64_t serial, const Config& config,
                                                           const DriverApi& api,
                                                           spdlog::logger* log);
  // Gives the reserved address range back (its mappings must be gone).
  ~GpuMemory();
  GpuMemory(const GpuMemory&) = delete;
  GpuMemory& operator=(const GpuMemory&) = delete;

  SessionClient* session() const { return session_; }
  uint64_t serial() const { return serial_; }
  uint32_t gpu() const { return gpu_; }
  CUdevice dev() const { return dev_; }
  uint64_t granularity() const { return granularity_; }
  // Allocations up to this size are carved from held blocks.
  uint64_t small_max() const { return small_max_; }
  uint64_t device_total() const { return device_total_; }
  uint64_t reuse_max_bytes() const { return reuse_max_bytes_; }
  // Bytes of daemon blocks behind live allocations (not the cache, not the queue).
  uint64_t leased_bytes() const { return leased_bytes_.load(std::memory_order_relaxed); }

  // `relieve` runs when the daemon refuses for quota, before this GPU returns what it cached
  // and queued and the lease is retried once (the memory manager finishes deferred frees).
  using Relief = absl::FunctionRef<void()>;

  // A large allocation: `bytes` rounded up to the granularity, from the cache or new blocks.
  absl::StatusOr<CUdeviceptr> AllocLarge(uint64_t bytes, Relief relieve) ABSL_LOCKS_EXCLUDED(mu_);
  // A small allocation (bytes <= small_max()), leasing one more granule block if none has room.
  absl::StatusOr<CUdeviceptr> AllocSmall(uint64_t bytes, Relief relieve) ABSL_LOCKS_EXCLUDED(mu_);
  // Leases blocks (one of `bytes` if `single`, else one per granule) without mapping them.
  absl::StatusOr<std::vector<BlockLease>> Lease(bool single, uint64_t bytes, Relief relieve)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Takes the allocation at `ptr` out of use (the caller synchronised the context): a small one
  // goes back to its chunk, a range into the reuse cache. Then flushes a full batch, or, once
  // the session ended, unmaps everything cached.
  absl::Status Free(CUdeviceptr ptr, AllocationKind kind) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues one leased block for return (a VMM handle's, or one that failed to import).
  void QueueReturn(uint64_t block, uint64_t bytes) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends the daemon the queued blocks: once a batch is full, or now if `force`. Once the
  // session ended they stay queued, unless a successor took them (AdoptedBy).
  void FlushFrees(bool force) ABSL_LOCKS_EXCLUDED(mu_);
  // The daemon kept this state's session through a stall and the shim registered into it again
  // as `successor` (same session id and daemon instance): its blocks are still leased to that
  // session, so their returns go through `successor` from now on, the queued ones at once.
  void AdoptedBy(SessionClient* successor) ABSL_LOCKS_EXCLUDED(mu_);
  // The successor that took this state's returns (AdoptedBy), if one did.
  SessionClient* adopted_by() const { return adopted_by_.load(std::memory_order_acquire); }
  // Returns everything freed that the daemon still counts: the reuse cache and the queue.
  void ReturnFreed() ABSL_LOCKS_EXCLUDED(mu_);

  // For tests: ranges in the reuse cache, and blocks queued for return.
  size_t cached_ranges() const ABSL_LOCKS_EXCLUDED(mu_);
  size_t queued_blocks() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // Daemon blocks mapped, in order, at an address of the reserved range.
  struct Mapping {
    uint64_t bytes;
    std::vector<uint64_t> blocks;
  };
  struct Cached {
    CUdeviceptr va;
    Mapping mapping;
  };

  GpuMemory(const DriverApi& api, spdlog::logger* log) : api_(api), log_(log) {}

  // A cached range of exactly `bytes` or new addresses, leased blocks mapped there.
  absl::StatusOr<CUdeviceptr> MapNew(uint64_t bytes, bool single, Relief relieve)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Imports and maps `leases` in order at `va` and grants access; on failure unmaps what it
  // mapped. Closes every descriptor either way. Driver calls only: no lock needed.
  absl::Status MapBlocks(CUdeviceptr va, std::vector<BlockLease>& leases);
  // Takes the mapping at `va` out of use: keeps it in the reuse cache, evicting the oldest
  // ranges past the cache's bounds.
  void ReleaseRange(CUdeviceptr va) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The newest cached range of exactly `bytes`, moved back to the mappings.
  std::optional<CUdeviceptr> TakeCached(uint64_t bytes) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Evicts every cached range.
  void DrainCache() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Unmaps a range, frees its addresses and queues its blocks for return.
  void UnmapRange(CUdeviceptr va, const Mapping& m) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const DriverApi& api_;
  spdlog::logger* log_;
  // Fixed by Create.
  SessionClient* session_ = nullptr;
  std::atomic<SessionClient*> adopted_by_{nullptr};  // see AdoptedBy
  uint64_t serial_ = 0;
  uint32_t gpu_ = 0;  // the daemon's index
  CUdevice dev_ = 0;
  uint64_t granularity_ = 0;
  uint64_t small_max_ = 0;
  bool single_blocks_ = true;  // back a large allocation with one block, not one per granule
  uint64_t device_total_ = 0;
  CUdeviceptr va_base_ = 0;
  uint64_t va_size_ = 0;
  uint64_t reuse_max_bytes_ = 0;
  std::unique_ptr<SmallAllocator> small_;
  std::atomic<uint64_t> leased_bytes_{0};

  mutable absl::Mutex mu_;
  std::optional<AddressSpace> space_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<CUdeviceptr, Mapping> mappings_ ABSL_GUARDED_BY(mu_);
  // Freed ranges, still mapped, oldest first. At most kReuseMaxRanges: a scan is cheaper than
  // an index by size.
  std::vector<Cached> reuse_ ABSL_GUARDED_BY(mu_);
  uint64_t reuse_bytes_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<uint64_t> pending_free_ ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_GPU_MEMORY_H_
