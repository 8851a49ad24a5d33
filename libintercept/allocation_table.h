// AllocationTable: every device range the shim has handed out, for frees and pointer queries
// (cuMemGetAddressRange, cuPointerGetAttribute, and later each hooked copy to find the
// allocation behind a pointer).
//
// Entries are half-open ranges [base, base + size) that never overlap. Find(addr) returns the
// entry containing addr (any byte of it, not only the base) in O(log n); Erase takes the exact
// base. A failed call changes nothing.
//
// Thread safety: every method may be called from any thread. Lookups take a shared (reader)
// lock, so concurrent Finds do not serialise; Insert/Erase take it exclusively.
#ifndef MISSILE_LIBINTERCEPT_ALLOCATION_TABLE_H_
#define MISSILE_LIBINTERCEPT_ALLOCATION_TABLE_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"

namespace missile::shim {

enum class AllocationKind {
  kLarge,    // whole chunks mapped into the shim's address space
  kSmall,    // carved from a chunk by the SmallAllocator
  kVmmUser,  // the application's own cuMemMap of a handle the shim created
};

class AllocationTable {
 public:
  struct Entry {
    uint64_t base;
    uint64_t size;
    AllocationKind kind;
    uint64_t cookie;  // the owner's tag (e.g. the chunk base of a small allocation)

    bool Contains(uint64_t addr) const { return addr >= base && addr - base < size; }
    friend bool operator==(const Entry&, const Entry&) = default;
  };

  AllocationTable() = default;
  AllocationTable(const AllocationTable&) = delete;
  AllocationTable& operator=(const AllocationTable&) = delete;

  // INVALID_ARGUMENT for an empty range or one whose end (base + size) passes 2^64 - 1;
  // ALREADY_EXISTS when it overlaps an entry.
  absl::Status Insert(uint64_t base, uint64_t size, AllocationKind kind, uint64_t cookie)
      ABSL_LOCKS_EXCLUDED(mu_);

  // Removes and returns the entry starting at `base`. NOT_FOUND when no entry starts there
  // (the message says if `base` is inside one).
  absl::StatusOr<Entry> Erase(uint64_t base) ABSL_LOCKS_EXCLUDED(mu_);

  // The entry containing `addr`, if any.
  std::optional<Entry> Find(uint64_t addr) const ABSL_LOCKS_EXCLUDED(mu_);

  size_t size() const ABSL_LOCKS_EXCLUDED(mu_);

  // A copy of all entries in address order (O(n); for tests, reports and teardown).
  std::vector<Entry> Snapshot() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The entry containing `addr`, or entries_.end().
  absl::btree_map<uint64_t, Entry>::const_iterator FindLocked(uint64_t addr) const
      ABSL_SHARED_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  absl::btree_map<uint64_t, Entry> entries_ ABSL_GUARDED_BY(mu_);  // keyed by base
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_ALLOCATION_TABLE_H_
