#include "allocation_table.h"

#include <iterator>

#include "absl/strings/str_format.h"

namespace missile::shim {

absl::btree_map<uint64_t, AllocationTable::Entry>::const_iterator AllocationTable::FindLocked(
    uint64_t addr) const {
  auto it = entries_.upper_bound(addr);  // the first entry starting after addr
  if (it == entries_.begin()) return entries_.end();
  --it;
  return it->second.Contains(addr) ? it : entries_.end();
}

absl::Status AllocationTable::Insert(uint64_t base, uint64_t size, AllocationKind kind,
                                     uint64_t cookie) {
  if (size == 0 || base + size < base) {
    return absl::InvalidArgumentError(
        absl::StrFormat("range [%#x, +%#x) is empty or wraps around", base, size));
  }
  absl::MutexLock lock(&mu_);
  // Only two entries can overlap the new range first: the last one starting at or below base
  // and the first one starting above it.
  auto next = entries_.upper_bound(base);
  if (next != entries_.end() && next->first - base < size) {
    return absl::AlreadyExistsError(
        absl::StrFormat("[%#x, +%#x) overlaps the allocation [%#x, +%#x)", base, size, next->first,
                        next->second.size));
  }
  if (next != entries_.begin()) {
    const Entry& prev = std::prev(next)->second;
    if (prev.Contains(base)) {
      return absl::AlreadyExistsError(absl::StrFormat(
          "[%#x, +%#x) overlaps the allocation [%#x, +%#x)", base, size, prev.base, prev.size));
    }
  }
  entries_.emplace_hint(next, base, Entry{base, size, kind, cookie});
  return absl::OkStatus();
}

absl::StatusOr<AllocationTable::Entry> AllocationTable::Erase(uint64_t base) {
  absl::MutexLock lock(&mu_);
  auto it = entries_.find(base);
  if (it == entries_.end()) {
    if (auto inside = FindLocked(base); inside != entries_.end()) {
      return absl::NotFoundError(
          absl::StrFormat("%#x is inside the allocation [%#x, +%#x), not its base", base,
                          inside->second.base, inside->second.size));
    }
    return absl::NotFoundError(absl::StrFormat("no allocation starts at %#x", base));
  }
  Entry entry = it->second;
  entries_.erase(it);
  return entry;
}

std::optional<AllocationTable::Entry> AllocationTable::Find(uint64_t addr) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = FindLocked(addr);
  if (it == entries_.end()) return std::nullopt;
  return it->second;
}

size_t AllocationTable::size() const {
  absl::ReaderMutexLock lock(&mu_);
  return entries_.size();
}

std::vector<AllocationTable::Entry> AllocationTable::Snapshot() const {
  absl::ReaderMutexLock lock(&mu_);
  std::vector<Entry> out;
  out.reserve(entries_.size());
  for (const auto& [base, entry] : entries_) out.push_back(entry);
  return out;
}

}  // namespace missile::shim
