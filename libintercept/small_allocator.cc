#include "small_allocator.h"

#include <algorithm>
#include <iterator>

#include "absl/strings/str_format.h"

namespace missile::shim {
namespace {

bool IsPowerOfTwo(uint64_t x) { return x != 0 && (x & (x - 1)) == 0; }

// With an alignment above 256 the best-fitting runs may be misaligned. After this many misses
// the search jumps to the smallest run that fits at any offset, keeping the cost O(log n).
constexpr int kMaxAlignedMisses = 8;

template <typename... Args>
absl::Status Broken(const absl::FormatSpec<Args...>& format, const Args&... args) {
  return absl::InternalError(absl::StrFormat(format, args...));
}

}  // namespace

absl::StatusOr<std::unique_ptr<SmallAllocator>> SmallAllocator::Create(
    const SmallAllocatorOptions& options) {
  if (!IsPowerOfTwo(options.chunk_size) || options.chunk_size < kSmallAlignment) {
    return absl::InvalidArgumentError(absl::StrFormat("chunk_size %#x is not a power of two >= %d",
                                                      options.chunk_size, kSmallAlignment));
  }
  if (options.max_small_bytes < kSmallAlignment || options.max_small_bytes > options.chunk_size) {
    return absl::InvalidArgumentError(
        absl::StrFormat("max_small_bytes %#x is outside [%d, chunk_size %#x]",
                        options.max_small_bytes, kSmallAlignment, options.chunk_size));
  }
  return std::unique_ptr<SmallAllocator>(new SmallAllocator(options));
}

absl::StatusOr<std::pair<uint64_t, uint64_t>> SmallAllocator::CheckRequest(
    uint64_t bytes, uint64_t alignment) const {
  if (bytes == 0 || bytes > options_.max_small_bytes) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "small allocation of %#x bytes is outside [1, %#x]", bytes, options_.max_small_bytes));
  }
  if (alignment != 0 && (!IsPowerOfTwo(alignment) || alignment > options_.chunk_size)) {
    return absl::InvalidArgumentError(
        absl::StrFormat("alignment %#x is not a power of two <= the chunk size %#x", alignment,
                        options_.chunk_size));
  }
  const uint64_t size = (bytes + kSmallAlignment - 1) & ~(kSmallAlignment - 1);
  return std::make_pair(size, std::max(alignment, kSmallAlignment));
}

absl::Status SmallAllocator::CheckChunk(uint64_t base, uint64_t size) const {
  if (size != options_.chunk_size || base % options_.chunk_size != 0 || base + size < base) {
    return absl::InvalidArgumentError(
        absl::StrFormat("chunk [%#x, +%#x) is not a %#x-byte chunk aligned to its size", base, size,
                        options_.chunk_size));
  }
  if (chunks_.contains(base)) {
    return absl::AlreadyExistsError(absl::StrFormat("chunk %#x is already held", base));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::optional<SmallAllocation>> SmallAllocator::TryAllocate(uint64_t bytes,
                                                                           uint64_t alignment) {
  absl::StatusOr<std::pair<uint64_t, uint64_t>> request = CheckRequest(bytes, alignment);
  if (!request.ok()) return request.status();
  absl::MutexLock lock(&mu_);
  return AllocateLocked(request->first, request->second);
}

absl::Status SmallAllocator::AddChunk(uint64_t base, uint64_t size) {
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckChunk(base, size); !s.ok()) return s;
  AddChunkLocked(base);
  return absl::OkStatus();
}

absl::StatusOr<SmallAllocation> SmallAllocator::AddChunkAndAllocate(uint64_t base, uint64_t size,
                                                                    uint64_t bytes,
                                                                    uint64_t alignment) {
  absl::StatusOr<std::pair<uint64_t, uint64_t>> request = CheckRequest(bytes, alignment);
  if (!request.ok()) return request.status();
  absl::MutexLock lock(&mu_);
  if (absl::Status s = CheckChunk(base, size); !s.ok()) return s;
  AddChunkLocked(base);
  // Cannot fail: the new chunk is one aligned free run of chunk_size >= max_small_bytes.
  std::optional<SmallAllocation> a = AllocateLocked(request->first, request->second);
  if (!a.has_value()) {
    return absl::InternalError("allocation failed right after adding an empty chunk");
  }
  return *a;
}

void SmallAllocator::AddChunkLocked(uint64_t base) {
  chunks_.emplace(base, Chunk{});
  empty_chunks_.insert(base);
  InsertRun(base, options_.chunk_size, base);
}

std::optional<SmallAllocation> SmallAllocator::AllocateLocked(uint64_t size, uint64_t alignment) {
  const uint64_t mask = alignment - 1;
  auto it = runs_by_size_.lower_bound({size, 0});
  for (int misses = 0; it != runs_by_size_.end();) {
    const auto [run_size, run_addr] = *it;
    const uint64_t pad = (alignment - (run_addr & mask)) & mask;
    if (pad <= run_size && run_size - pad >= size) {
      const uint64_t chunk = runs_by_addr_.at(run_addr).chunk;
      const uint64_t addr = run_addr + pad;
      const uint64_t tail = run_size - pad - size;
      EraseRun(run_addr);
      if (pad != 0) InsertRun(run_addr, pad, chunk);
      if (tail != 0) InsertRun(addr + size, tail, chunk);
      Chunk& c = chunks_.at(chunk);
      if (c.used == 0) empty_chunks_.erase(chunk);
      c.used += size;
      live_.emplace(addr, Block{size, chunk});
      bytes_in_use_ += size;
      return SmallAllocation{addr, chunk, size};
    }
    if (++misses == kMaxAlignedMisses) {
      // Any run of size + alignment - 256 holds an aligned block (runs start at multiples of
      // 256), and every candidate from there on fits.
      it = runs_by_size_.lower_bound({size + alignment - kSmallAlignment, 0});
    } else {
      ++it;
    }
  }
  return std::nullopt;
}

absl::StatusOr<SmallFreeResult> SmallAllocator::Free(uint64_t addr) {
  absl::MutexLock lock(&mu_);
  auto it = live_.find(addr);
  if (it == live_.end()) {
    return absl::NotFoundError(
        absl::StrFormat("%#x is not the address of a live small allocation", addr));
  }
  const Block block = it->second;
  live_.erase(it);
  bytes_in_use_ -= block.size;
  Chunk& c = chunks_.at(block.chunk);
  c.used -= block.size;
  if (c.used == 0) empty_chunks_.insert(block.chunk);

  // Merge with free neighbours of the same chunk.
  uint64_t start = addr;
  uint64_t size = block.size;
  if (auto next = runs_by_addr_.find(start + size);
      next != runs_by_addr_.end() && next->second.chunk == block.chunk) {
    size += next->second.size;
    EraseRun(start + block.size);
  }
  if (auto prev = runs_by_addr_.lower_bound(start); prev != runs_by_addr_.begin()) {
    --prev;
    if (prev->second.chunk == block.chunk && prev->first + prev->second.size == start) {
      start = prev->first;
      size += prev->second.size;
      EraseRun(start);
    }
  }
  InsertRun(start, size, block.chunk);
  return SmallFreeResult{block.chunk, block.size, c.used == 0};
}

std::vector<uint64_t> SmallAllocator::TakeReleasableChunks() {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> out;
  while (empty_chunks_.size() > options_.spare_chunks) {
    const uint64_t base = *empty_chunks_.rbegin();
    empty_chunks_.erase(base);
    EraseRun(base);  // an empty chunk is a single free run
    chunks_.erase(base);
    out.push_back(base);
  }
  return out;
}

bool SmallAllocator::Owns(uint64_t addr) const {
  absl::ReaderMutexLock lock(&mu_);
  auto it = chunks_.upper_bound(addr);
  if (it == chunks_.begin()) return false;
  --it;
  return addr - it->first < options_.chunk_size;
}

SmallAllocatorStats SmallAllocator::stats() const {
  absl::ReaderMutexLock lock(&mu_);
  SmallAllocatorStats s;
  s.bytes_in_use = bytes_in_use_;
  s.live_allocations = live_.size();
  s.chunks_held = chunks_.size();
  s.empty_chunks = empty_chunks_.size();
  s.free_runs = runs_by_addr_.size();
  return s;
}

void SmallAllocator::InsertRun(uint64_t addr, uint64_t size, uint64_t chunk) {
  runs_by_addr_.emplace(addr, FreeRun{size, chunk});
  runs_by_size_.emplace(size, addr);
}

void SmallAllocator::EraseRun(uint64_t addr) {
  auto it = runs_by_addr_.find(addr);
  runs_by_size_.erase({it->second.size, addr});
  runs_by_addr_.erase(it);
}

absl::Status SmallAllocator::CheckInvariants() const {
  absl::ReaderMutexLock lock(&mu_);
  const uint64_t cs = options_.chunk_size;
  if (runs_by_size_.size() != runs_by_addr_.size()) {
    return Broken("%d runs by size, %d by address", runs_by_size_.size(), runs_by_addr_.size());
  }
  absl::btree_map<uint64_t, uint64_t> free_per_chunk;
  uint64_t prev_end = 0;
  uint64_t prev_chunk = UINT64_MAX;
  for (const auto& [addr, run] : runs_by_addr_) {
    if (!runs_by_size_.contains({run.size, addr})) return Broken("run %#x missing by size", addr);
    if (!chunks_.contains(run.chunk))
      return Broken("run %#x in unknown chunk %#x", addr, run.chunk);
    if (run.size == 0 || addr < run.chunk || addr + run.size > run.chunk + cs ||
        addr % kSmallAlignment != 0 || run.size % kSmallAlignment != 0) {
      return Broken("run [%#x, +%#x) malformed for chunk %#x", addr, run.size, run.chunk);
    }
    if (prev_chunk == run.chunk && prev_end >= addr) {
      return Broken("run %#x overlaps or was not merged with its left neighbour", addr);
    }
    free_per_chunk[run.chunk] += run.size;
    prev_end = addr + run.size;
    prev_chunk = run.chunk;
  }
  absl::btree_map<uint64_t, uint64_t> used_per_chunk;
  uint64_t in_use = 0;
  for (const auto& [addr, block] : live_) {
    auto run = runs_by_addr_.upper_bound(addr);
    if (run != runs_by_addr_.begin() &&
        std::prev(run)->first + std::prev(run)->second.size > addr) {
      return Broken("live allocation %#x lies in a free run", addr);
    }
    if (run != runs_by_addr_.end() && run->first < addr + block.size) {
      return Broken("live allocation %#x overlaps the free run %#x", addr, run->first);
    }
    if (addr < block.chunk || addr + block.size > block.chunk + cs) {
      return Broken("live allocation %#x outside its chunk %#x", addr, block.chunk);
    }
    used_per_chunk[block.chunk] += block.size;
    in_use += block.size;
  }
  std::vector<std::pair<uint64_t, uint64_t>> blocks;
  blocks.reserve(live_.size());
  for (const auto& [addr, block] : live_) blocks.emplace_back(addr, block.size);
  std::sort(blocks.begin(), blocks.end());
  for (size_t i = 1; i < blocks.size(); ++i) {
    if (blocks[i - 1].first + blocks[i - 1].second > blocks[i].first) {
      return Broken("live allocations %#x and %#x overlap", blocks[i - 1].first, blocks[i].first);
    }
  }
  if (in_use != bytes_in_use_) return Broken("bytes_in_use %d, counted %d", bytes_in_use_, in_use);
  for (const auto& [base, chunk] : chunks_) {
    if (used_per_chunk[base] != chunk.used || chunk.used + free_per_chunk[base] != cs) {
      return Broken("chunk %#x: used %d, counted %d, free %d", base, chunk.used,
                    used_per_chunk[base], free_per_chunk[base]);
    }
    if ((chunk.used == 0) != empty_chunks_.contains(base)) {
      return Broken("chunk %#x: emptiness not tracked", base);
    }
  }
  if (empty_chunks_.size() > chunks_.size()) return Broken("stale empty chunks");
  return absl::OkStatus();
}

}  // namespace missile::shim
