#include "phys_allocator.h"

#include <signal.h>
#include <unistd.h>

#include <atomic>
#include <cerrno>
#include <fstream>
#include <random>
#include <sstream>
#include <string>
#include <unordered_map>

namespace fakecuda {
namespace {

std::atomic_ref<uint64_t> Slot(ShmFrame* f, int i) {
  return std::atomic_ref<uint64_t>(f->holders[i]);
}
std::atomic_ref<uint64_t> Overflow(ShmFrame* f) { return std::atomic_ref<uint64_t>(f->overflow); }

bool FrameFree(ShmFrame* f) {
  for (int i = 0; i < kHolderSlots; ++i) {
    if (Slot(f, i).load() != 0) return false;
  }
  return Overflow(f).load() == 0;
}

// Field 22 of /proc/<pid>/stat (start time in clock ticks); 0 if unreadable.
uint64_t StartTime(int pid) {
  std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
  std::string line;
  if (!std::getline(in, line)) return 0;
  const size_t paren = line.rfind(')');
  if (paren == std::string::npos) return 0;
  std::istringstream fields(line.substr(paren + 1));
  std::string field;
  for (int i = 3; i <= 22 && fields >> field; ++i) {
    if (i == 22) return std::strtoull(field.c_str(), nullptr, 10);
  }
  return 0;
}

bool HolderAlive(uint64_t id) {
  const int pid = static_cast<int>(id >> 32);
  if (kill(pid, 0) != 0 && errno == ESRCH) return false;
  const uint64_t start = StartTime(pid);
  // Without /proc we cannot tell a recycled pid apart: assume alive.
  return start == 0 || (start & 0xffffffffull) == (id & 0xffffffffull);
}

}  // namespace

uint64_t HolderIdOf(int pid) {
  return (static_cast<uint64_t>(pid) << 32) | (StartTime(pid) & 0xffffffffull);
}

int ChannelOf(const std::vector<uint64_t>& masks, uint64_t phys) {
  int channel = 0;
  for (size_t i = 0; i < masks.size(); ++i) {
    channel |= (__builtin_popcountll(phys & masks[i]) & 1) << i;
  }
  return channel;
}

PhysAllocator::PhysAllocator(SharedState* shared, const Config& config)
    : shared_(shared),
      shuffle_(config.phys_shuffle),
      seed_(config.shuffle_seed),
      frames_(shared->frames_per_device()),
      self_id_(HolderIdOf(getpid())),
      permutations_(kMaxDevices) {}

uint64_t PhysAllocator::FrameAt(int device, uint64_t order_index) {
  if (!shuffle_) return order_index;
  MutexLock lock(&mu_);
  std::vector<uint32_t>& perm = permutations_[device];
  if (perm.empty()) {
    // Fisher-Yates with our own bounded draw: std::uniform_int_distribution is not specified
    // bit-for-bit, and every process must compute the same permutation.
    perm.resize(frames_);
    for (uint64_t i = 0; i < frames_; ++i) perm[i] = static_cast<uint32_t>(i);
    std::mt19937_64 rng(seed_ * 0x9e3779b97f4a7c15ull + static_cast<uint64_t>(device) + 1);
    for (uint64_t i = frames_ - 1; i > 0; --i) std::swap(perm[i], perm[rng() % (i + 1)]);
  }
  return perm[order_index];
}

bool PhysAllocator::TryClaimRun(int device, uint64_t first, uint64_t count) {
  if (first + count > frames_) return false;
  for (uint64_t i = 0; i < count; ++i) {
    ShmFrame* f = shared_->Frame(device, first + i);
    uint64_t expected = 0;
    if (!FrameFree(f) || !Slot(f, 0).compare_exchange_strong(expected, self_id_)) {
      for (uint64_t j = 0; j < i; ++j) ReleaseFrame(device, first + j);
      return false;
    }
  }
  return true;
}

void PhysAllocator::ReleaseFrame(int device, uint64_t frame) {
  ShmFrame* f = shared_->Frame(device, frame);
  for (int i = 0; i < kHolderSlots; ++i) {
    uint64_t expected = self_id_;
    if (Slot(f, i).compare_exchange_strong(expected, 0)) return;
  }
  uint64_t n = Overflow(f).load();
  while (n > 0 && !Overflow(f).compare_exchange_weak(n, n - 1)) {
  }
}

CUresult PhysAllocator::Allocate(int device, uint64_t bytes, uint64_t* phys) {
  const uint64_t count = bytes / kGranularity;
  if (count == 0 || count > frames_) return CUDA_ERROR_OUT_OF_MEMORY;
  for (int round = 0; round < 2; ++round) {
    for (uint64_t attempt = 0; attempt < frames_; ++attempt) {
      // In increasing order the cursor advances by the run length, so consecutive chunks get
      // consecutive addresses; shuffled, each attempt tries the next start in the permutation.
      const uint64_t step = shuffle_ ? 1 : count;
      const uint64_t index = shared_->Cursor(device).fetch_add(step) % frames_;
      const uint64_t first = FrameAt(device, index);
      if (TryClaimRun(device, first, count)) {
        *phys = first * kGranularity;
        return CUDA_SUCCESS;
      }
    }
    if (!ReclaimDead(device)) break;
  }
  return CUDA_ERROR_OUT_OF_MEMORY;
}

void PhysAllocator::AddHolder(int device, uint64_t phys, uint64_t bytes) {
  const uint64_t first = phys / kGranularity;
  for (uint64_t frame = first; frame < first + bytes / kGranularity && frame < frames_; ++frame) {
    ShmFrame* f = shared_->Frame(device, frame);
    bool placed = false;
    for (int i = 0; i < kHolderSlots && !placed; ++i) {
      uint64_t expected = 0;
      placed = Slot(f, i).compare_exchange_strong(expected, self_id_);
    }
    if (!placed) Overflow(f).fetch_add(1);
  }
}

void PhysAllocator::RemoveHolder(int device, uint64_t phys, uint64_t bytes) {
  const uint64_t first = phys / kGranularity;
  for (uint64_t frame = first; frame < first + bytes / kGranularity && frame < frames_; ++frame) {
    ReleaseFrame(device, frame);
  }
}

bool PhysAllocator::ReclaimDead(int device) {
  std::unordered_map<uint64_t, bool> alive;
  bool cleared = false;
  for (uint64_t frame = 0; frame < frames_; ++frame) {
    ShmFrame* f = shared_->Frame(device, frame);
    for (int i = 0; i < kHolderSlots; ++i) {
      uint64_t id = Slot(f, i).load();
      if (id == 0 || id == self_id_) continue;
      auto [it, inserted] = alive.try_emplace(id, true);
      if (inserted) it->second = HolderAlive(id);
      if (!it->second && Slot(f, i).compare_exchange_strong(id, 0)) cleared = true;
    }
  }
  return cleared;
}

}  // namespace fakecuda
