#include "address_space.h"

#include <algorithm>

#include "absl/strings/str_format.h"

namespace missile::shim {
namespace {

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// splitmix64: a well-mixed priority from the address, so the treap stays balanced even though
// the keys arrive sorted (granule multiples, often increasing).
uint64_t Mix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

}  // namespace

absl::StatusOr<AddressSpace> AddressSpace::Create(uint64_t base, uint64_t size, uint64_t granule) {
  if (!IsPowerOfTwo(granule)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("granule %#x is not a power of two", granule));
  }
  if (size == 0 || base % granule != 0 || size % granule != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "range [%#x, +%#x) is empty or not aligned to the granule %#x", base, size, granule));
  }
  if (base + size < base) {
    return absl::InvalidArgumentError(
        absl::StrFormat("range [%#x, +%#x) wraps around the address space", base, size));
  }
  return AddressSpace(base, size, granule);
}

AddressSpace::AddressSpace(uint64_t base, uint64_t size, uint64_t granule)
    : base_(base), size_(size), granule_(granule), free_bytes_(size) {
  InsertFree(base, size);
}

uint64_t AddressSpace::largest_free() const { return root_ == kNil ? 0 : nodes_[root_].max_size; }

absl::StatusOr<uint64_t> AddressSpace::Allocate(uint64_t bytes, uint64_t alignment) {
  if (bytes == 0 || bytes % granule_ != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "allocation size %#x is not a non-zero multiple of the granule %#x", bytes, granule_));
  }
  if (alignment != 0 && !IsPowerOfTwo(alignment)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("alignment %#x is not a power of two", alignment));
  }
  alignment = std::max(alignment, granule_);
  // Walk the large-enough free ranges in address order until one also fits once aligned.
  // With granule alignment the first candidate always fits.
  uint64_t from = base_;
  for (;;) {
    uint32_t t = FindFirstFit(root_, from, bytes);
    if (t == kNil) {
      return absl::ResourceExhaustedError(
          absl::StrFormat("no free run of %#x bytes aligned to %#x (free %#x, largest run %#x)",
                          bytes, alignment, free_bytes_, largest_free()));
    }
    const uint64_t start = nodes_[t].start;
    const uint64_t size = nodes_[t].size;
    const uint64_t pad = (alignment - (start & (alignment - 1))) & (alignment - 1);
    if (pad <= size && size - pad >= bytes) {
      const uint64_t addr = start + pad;
      const uint64_t tail = size - pad - bytes;
      EraseFree(start);
      if (pad != 0) InsertFree(start, pad);
      if (tail != 0) InsertFree(addr + bytes, tail);
      allocated_.emplace(addr, bytes);
      free_bytes_ -= bytes;
      return addr;
    }
    from = start + 1;
  }
}

absl::Status AddressSpace::Free(uint64_t addr) {
  auto it = allocated_.find(addr);
  if (it == allocated_.end()) {
    it = allocated_.upper_bound(addr);
    if (it != allocated_.begin()) {
      --it;
      if (addr - it->first < it->second) {
        return absl::InvalidArgumentError(
            absl::StrFormat("%#x is inside the allocation [%#x, +%#x), not its start", addr,
                            it->first, it->second));
      }
    }
    return absl::NotFoundError(absl::StrFormat("%#x is not an allocated address", addr));
  }
  uint64_t start = addr;
  uint64_t size = it->second;
  allocated_.erase(it);
  free_bytes_ += size;

  // Merge with the free neighbours on both sides, so free runs are always maximal.
  if (uint32_t next = FindExact(start + size); next != kNil) {
    const uint64_t next_size = nodes_[next].size;
    EraseFree(start + size);
    size += next_size;
  }
  if (uint32_t prev = FindBefore(start);
      prev != kNil && nodes_[prev].start + nodes_[prev].size == start) {
    start = nodes_[prev].start;
    size += nodes_[prev].size;
    EraseFree(start);
  }
  InsertFree(start, size);
  return absl::OkStatus();
}

std::vector<AddressSpace::Range> AddressSpace::FreeRanges() const {
  std::vector<Range> out;
  out.reserve(num_free_ranges());
  CollectFree(root_, &out);
  return out;
}

std::vector<AddressSpace::Range> AddressSpace::Allocations() const {
  std::vector<Range> out;
  out.reserve(allocated_.size());
  for (const auto& [start, size] : allocated_) out.push_back({start, size});
  return out;
}

// --- The treap --------------------------------------------------------------------------------

uint32_t AddressSpace::NewNode(uint64_t start, uint64_t size) {
  const Node node{start, size, size, Mix(start), kNil, kNil};
  if (!free_slots_.empty()) {
    const uint32_t t = free_slots_.back();
    free_slots_.pop_back();
    nodes_[t] = node;
    return t;
  }
  nodes_.push_back(node);
  return static_cast<uint32_t>(nodes_.size() - 1);
}

void AddressSpace::Update(uint32_t t) {
  Node& n = nodes_[t];
  n.max_size = n.size;
  if (n.left != kNil) n.max_size = std::max(n.max_size, nodes_[n.left].max_size);
  if (n.right != kNil) n.max_size = std::max(n.max_size, nodes_[n.right].max_size);
}

void AddressSpace::Split(uint32_t t, uint64_t key, uint32_t* lo, uint32_t* hi) {
  if (t == kNil) {
    *lo = *hi = kNil;
    return;
  }
  if (nodes_[t].start < key) {
    uint32_t right_lo;
    Split(nodes_[t].right, key, &right_lo, hi);
    nodes_[t].right = right_lo;
    *lo = t;
  } else {
    uint32_t left_hi;
    Split(nodes_[t].left, key, lo, &left_hi);
    nodes_[t].left = left_hi;
    *hi = t;
  }
  Update(t);
}

uint32_t AddressSpace::Merge(uint32_t lo, uint32_t hi) {
  if (lo == kNil) return hi;
  if (hi == kNil) return lo;
  if (nodes_[lo].priority > nodes_[hi].priority) {
    nodes_[lo].right = Merge(nodes_[lo].right, hi);
    Update(lo);
    return lo;
  }
  nodes_[hi].left = Merge(lo, nodes_[hi].left);
  Update(hi);
  return hi;
}

void AddressSpace::InsertFree(uint64_t start, uint64_t size) {
  uint32_t lo, hi;
  Split(root_, start, &lo, &hi);
  root_ = Merge(Merge(lo, NewNode(start, size)), hi);
}

void AddressSpace::EraseFree(uint64_t start) {
  uint32_t lo, mid, hi;
  Split(root_, start, &lo, &hi);
  Split(hi, start + 1, &mid, &hi);
  // `mid` is the single node at `start`.
  if (mid != kNil) free_slots_.push_back(mid);
  root_ = Merge(lo, hi);
}

uint32_t AddressSpace::FindFirstFit(uint32_t t, uint64_t from, uint64_t need) const {
  // Subtrees wholly at or above `from` are entered only when their max_size promises a hit, so
  // the walk is O(depth).
  while (t != kNil) {
    const Node& n = nodes_[t];
    if (n.max_size < need) return kNil;
    if (n.start < from) {
      t = n.right;
      continue;
    }
    if (uint32_t hit = FindFirstFit(n.left, from, need); hit != kNil) return hit;
    if (n.size >= need) return t;
    t = n.right;
  }
  return kNil;
}

uint32_t AddressSpace::FindBefore(uint64_t addr) const {
  uint32_t best = kNil;
  for (uint32_t t = root_; t != kNil;) {
    if (nodes_[t].start < addr) {
      best = t;
      t = nodes_[t].right;
    } else {
      t = nodes_[t].left;
    }
  }
  return best;
}

uint32_t AddressSpace::FindExact(uint64_t addr) const {
  for (uint32_t t = root_; t != kNil;) {
    if (nodes_[t].start == addr) return t;
    t = addr < nodes_[t].start ? nodes_[t].left : nodes_[t].right;
  }
  return kNil;
}

void AddressSpace::CollectFree(uint32_t t, std::vector<Range>* out) const {
  if (t == kNil) return;
  CollectFree(nodes_[t].left, out);
  out->push_back({nodes_[t].start, nodes_[t].size});
  CollectFree(nodes_[t].right, out);
}

}  // namespace missile::shim
