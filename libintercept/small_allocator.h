// SmallAllocator: carves allocations of up to `max_small_bytes` (1 MiB by default) out of the
// 2 MiB chunks the shim holds, so a small cuMemAlloc costs no round trip to the daemon.
//
// Getting a chunk is the caller's job and happens without this allocator's lock held:
//
//   ASSIGN_OR_RETURN(std::optional<SmallAllocation> a, small.TryAllocate(bytes));
//   if (!a) {                                       // no held chunk has room
//     Chunk c = daemon.GetChunk();                  // RPC + map, no lock held
//     ASSIGN_OR_RETURN(a, small.AddChunkAndAllocate(c.base, c.size, bytes));
//   }
//
// AddChunkAndAllocate adds the chunk and allocates in one critical section, so a concurrent
// Free/TakeReleasableChunks cannot hand the fresh chunk back before the caller uses it.
//
// Placement: best fit (smallest free run that fits, lowest address among equals) over the free
// runs of all held chunks, so half-used chunks fill up before an empty one is touched and empty
// chunks can go back. Sizes round up to 256 bytes, the alignment cudaMalloc guarantees; larger
// power-of-two alignments up to the chunk size are honoured. Freed runs merge with free
// neighbours in the same chunk (never across chunks: adjacent chunks in the address space are
// separate physical handles). A chunk whose last allocation is freed becomes empty; at most
// `spare_chunks` empty chunks are kept, TakeReleasableChunks removes and returns the others for
// the caller to unmap and give back.
//
// Costs: O(log n) in the number of free runs and live allocations; an alignment above 256 may
// look at a few more candidates (bounded) before taking a run that surely fits.
//
// Thread safety: every method may be called from any thread (driver hooks run on the
// application's threads); one internal mutex, never held across calls out of this class.
#ifndef MISSILE_LIBINTERCEPT_SMALL_ALLOCATOR_H_
#define MISSILE_LIBINTERCEPT_SMALL_ALLOCATOR_H_

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace missile::shim {

inline constexpr uint64_t kSmallAlignment = 256;  // cudaMalloc's documented alignment

struct SmallAllocatorOptions {
  uint64_t chunk_size = uint64_t{2} << 20;       // power of two, >= kSmallAlignment
  uint64_t max_small_bytes = uint64_t{1} << 20;  // in [kSmallAlignment, chunk_size]
  size_t spare_chunks = 1;                       // empty chunks kept for the next allocation
};

struct SmallAllocation {
  uint64_t address;
  uint64_t chunk_base;
  uint64_t size;  // the bytes reserved: the request rounded up to 256
};

struct SmallFreeResult {
  uint64_t chunk_base;
  uint64_t size;     // the bytes released (as in SmallAllocation::size)
  bool chunk_empty;  // the chunk holds no allocation any more
};

struct SmallAllocatorStats {
  uint64_t bytes_in_use = 0;  // sum of SmallAllocation::size over live allocations
  size_t live_allocations = 0;
  size_t chunks_held = 0;
  size_t empty_chunks = 0;
  size_t free_runs = 0;
};

class SmallAllocator {
 public:
  // INVALID_ARGUMENT when the options break the ranges documented above.
  static absl::StatusOr<std::unique_ptr<SmallAllocator>> Create(
      const SmallAllocatorOptions& options = {});

  SmallAllocator(const SmallAllocator&) = delete;
  SmallAllocator& operator=(const SmallAllocator&) = delete;

  // `bytes` in [1, max_small_bytes]; `alignment` 0 (= 256) or a power of two <= chunk_size.
  // Returns std::nullopt when no held chunk has room: the caller gets a chunk and calls
  // AddChunkAndAllocate. INVALID_ARGUMENT for a request this allocator never serves.
  absl::StatusOr<std::optional<SmallAllocation>> TryAllocate(uint64_t bytes, uint64_t alignment = 0)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Takes ownership of the chunk [base, base + size): size == chunk_size, base aligned to it.
  // INVALID_ARGUMENT for a malformed chunk, ALREADY_EXISTS for one already held.
  absl::Status AddChunk(uint64_t base, uint64_t size) ABSL_LOCKS_EXCLUDED(mu_);

  // AddChunk, then allocates (the new chunk guarantees room). On any error nothing changes and
  // the chunk remains the caller's.
  absl::StatusOr<SmallAllocation> AddChunkAndAllocate(uint64_t base, uint64_t size, uint64_t bytes,
                                                      uint64_t alignment = 0)
      ABSL_LOCKS_EXCLUDED(mu_);

  // `addr` must be a live allocation's address. NOT_FOUND otherwise (double free, unknown or
  // interior address); nothing changes then.
  absl::StatusOr<SmallFreeResult> Free(uint64_t addr) ABSL_LOCKS_EXCLUDED(mu_);

  // Removes the empty chunks beyond `spare_chunks` (the highest addresses go first) and returns
  // their bases; each is the caller's again, of size chunk_size.
  std::vector<uint64_t> TakeReleasableChunks() ABSL_LOCKS_EXCLUDED(mu_);

  // Whether `addr` lies in a chunk held here (allocated or not).
  bool Owns(uint64_t addr) const ABSL_LOCKS_EXCLUDED(mu_);

  SmallAllocatorStats stats() const ABSL_LOCKS_EXCLUDED(mu_);
  const SmallAllocatorOptions& options() const { return options_; }

  // Checks the internal bookkeeping (free runs coalesced and inside their chunk, per-chunk
  // accounting, the two free-run indexes agree). O(n log n); for tests.
  absl::Status CheckInvariants() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  struct FreeRun {
    uint64_t size;
    uint64_t chunk;
  };
  struct Block {
    uint64_t size;
    uint64_t chunk;
  };
  struct Chunk {
    uint64_t used = 0;  // bytes in live allocations
  };

  explicit SmallAllocator(const SmallAllocatorOptions& options) : options_(options) {}

  // Validates a request; returns the rounded size and effective alignment.
  absl::StatusOr<std::pair<uint64_t, uint64_t>> CheckRequest(uint64_t bytes,
                                                             uint64_t alignment) const;
  absl::Status CheckChunk(uint64_t base, uint64_t size) const ABSL_SHARED_LOCKS_REQUIRED(mu_);
  void AddChunkLocked(uint64_t base) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  std::optional<SmallAllocation> AllocateLocked(uint64_t size, uint64_t alignment)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void InsertRun(uint64_t addr, uint64_t size, uint64_t chunk) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void EraseRun(uint64_t addr) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const SmallAllocatorOptions options_;

  mutable absl::Mutex mu_;
  absl::btree_map<uint64_t, FreeRun> runs_by_addr_ ABSL_GUARDED_BY(mu_);
  absl::btree_set<std::pair<uint64_t, uint64_t>> runs_by_size_ ABSL_GUARDED_BY(mu_);  // size, addr
  absl::btree_map<uint64_t, Chunk> chunks_ ABSL_GUARDED_BY(mu_);
  absl::btree_set<uint64_t> empty_chunks_ ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, Block> live_ ABSL_GUARDED_BY(mu_);
  uint64_t bytes_in_use_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_SMALL_ALLOCATOR_H_
