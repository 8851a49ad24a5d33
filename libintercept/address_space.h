// AddressSpace: bookkeeping for one virtual address range [base, base + size) that the shim
// reserved (with cuMemAddressReserve). It hands out sub-ranges; it never touches the GPU.
//
// Everything is in units of the granule (2 MiB by default: the size of the daemon's chunks and
// the VMM mapping granularity): the base, the size, every allocation's size and address.
// Allocation is first fit by address, so long-lived allocations pack towards the base and the
// top of the range stays in large free runs. Free ranges live in an ordered map (a treap keyed
// by address, each node also holding the largest free size below it), so Allocate, Free and
// the coalescing of freed neighbours are O(log n) in the number of free ranges. An alignment
// above the granule may skip large-enough but misaligned candidates one O(log n) step each.
//
// Errors: INVALID_ARGUMENT for a malformed request, RESOURCE_EXHAUSTED when no free range fits,
// NOT_FOUND / INVALID_ARGUMENT for a Free of an address that is not an allocation's start.
// A failed call changes nothing.
//
// Thread safety: none. The owner serialises all calls (the shim holds its own lock).
#ifndef MISSILE_LIBINTERCEPT_ADDRESS_SPACE_H_
#define MISSILE_LIBINTERCEPT_ADDRESS_SPACE_H_

#include <cstdint>
#include <vector>

#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace missile::shim {

inline constexpr uint64_t kChunkGranule = uint64_t{2} << 20;  // 2 MiB

class AddressSpace {
 public:
  struct Range {
    uint64_t base;
    uint64_t size;
    friend bool operator==(const Range&, const Range&) = default;
  };

  // `granule` must be a power of two; `base` and `size` non-zero multiples of it with
  // base + size not wrapping around.
  static absl::StatusOr<AddressSpace> Create(uint64_t base, uint64_t size,
                                             uint64_t granule = kChunkGranule);

  // Returns the lowest address of a free run of `bytes` aligned to `alignment`.
  // `bytes`: a non-zero multiple of the granule (the caller rounds up: it maps whole chunks).
  // `alignment`: 0 (meaning the granule) or a power of two; below the granule it is the granule.
  absl::StatusOr<uint64_t> Allocate(uint64_t bytes, uint64_t alignment = 0);

  // `addr` must be the start of a live allocation; its range becomes free and merges with free
  // neighbours.
  absl::Status Free(uint64_t addr);

  uint64_t base() const { return base_; }
  uint64_t size() const { return size_; }
  uint64_t granule() const { return granule_; }
  uint64_t free_bytes() const { return free_bytes_; }
  // The largest free run (0 when full). An allocation of this size with granule alignment
  // succeeds.
  uint64_t largest_free() const;
  size_t num_allocations() const { return allocated_.size(); }
  size_t num_free_ranges() const { return nodes_.size() - free_slots_.size(); }

  // Snapshots in address order, for tests and debugging (O(n)).
  std::vector<Range> FreeRanges() const;
  std::vector<Range> Allocations() const;

 private:
  // The free list: a treap in a vector (indices instead of pointers, so the object copies and
  // moves as a value). Priorities are a hash of the address, which keeps the tree balanced in
  // expectation without random state.
  static constexpr uint32_t kNil = UINT32_MAX;
  struct Node {
    uint64_t start;
    uint64_t size;
    uint64_t max_size;  // the largest `size` in this subtree
    uint64_t priority;
    uint32_t left;
    uint32_t right;
  };

  AddressSpace(uint64_t base, uint64_t size, uint64_t granule);

  uint32_t NewNode(uint64_t start, uint64_t size);
  void Update(uint32_t t);
  // Splits `t` into the nodes with start < key and those with start >= key.
  void Split(uint32_t t, uint64_t key, uint32_t* lo, uint32_t* hi);
  uint32_t Merge(uint32_t lo, uint32_t hi);
  void InsertFree(uint64_t start, uint64_t size);
  void EraseFree(uint64_t start);  // `start` must be a free range's start
  // The first node in address order with start >= from and size >= need, or kNil.
  uint32_t FindFirstFit(uint32_t t, uint64_t from, uint64_t need) const;
  // The node with the largest start < addr, or kNil.
  uint32_t FindBefore(uint64_t addr) const;
  // The node whose start == addr, or kNil.
  uint32_t FindExact(uint64_t addr) const;
  void CollectFree(uint32_t t, std::vector<Range>* out) const;

  uint64_t base_;
  uint64_t size_;
  uint64_t granule_;
  uint64_t free_bytes_;
  std::vector<Node> nodes_;
  std::vector<uint32_t> free_slots_;  // reusable indices in nodes_
  uint32_t root_ = kNil;
  absl::btree_map<uint64_t, uint64_t> allocated_;  // start -> size
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_ADDRESS_SPACE_H_
