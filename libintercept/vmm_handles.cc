#include "vmm_handles.h"

namespace missile::shim {

void VmmHandles::Add(CUmemGenericAllocationHandle handle, GpuMemory* owner, uint64_t block,
                     uint64_t bytes) {
  absl::MutexLock lock(&mu_);
  handles_[handle] = Handle{owner, block, bytes};
}

bool VmmHandles::Contains(CUmemGenericAllocationHandle handle) const {
  absl::MutexLock lock(&mu_);
  return handles_.contains(handle);
}

void VmmHandles::Retained(CUmemGenericAllocationHandle handle) {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(handle);
  if (it != handles_.end()) ++it->second.refs;
}

std::optional<VmmHandles::Unused> VmmHandles::Released(CUmemGenericAllocationHandle handle) {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return std::nullopt;
  --it->second.refs;
  return TakeIfUnused(handle);
}

void VmmHandles::Mapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle) {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return;
  ++it->second.mappings;
  maps_[ptr] = {handle, size};
}

std::vector<VmmHandles::Unused> VmmHandles::Unmapped(CUdeviceptr ptr, size_t size) {
  std::vector<Unused> unused;
  absl::MutexLock lock(&mu_);
  std::vector<CUmemGenericAllocationHandle> touched;
  for (auto it = maps_.lower_bound(ptr); it != maps_.end() && it->first < ptr + size;) {
    auto h = handles_.find(it->second.first);
    if (h != handles_.end()) {
      --h->second.mappings;
      touched.push_back(it->second.first);
    }
    it = maps_.erase(it);
  }
  for (CUmemGenericAllocationHandle h : touched) {
    if (std::optional<Unused> u = TakeIfUnused(h)) unused.push_back(*u);
  }
  return unused;
}

std::optional<std::pair<int, int>> VmmHandles::CountsOf(
    CUmemGenericAllocationHandle handle) const {
  absl::MutexLock lock(&mu_);
  auto it = handles_.find(handle);
  if (it == handles_.end()) return std::nullopt;
  return std::make_pair(it->second.refs, it->second.mappings);
}

std::optional<VmmHandles::Unused> VmmHandles::TakeIfUnused(CUmemGenericAllocationHandle handle) {
  auto it = handles_.find(handle);
  if (it == handles_.end() || it->second.refs > 0 || it->second.mappings > 0) return std::nullopt;
  Unused u{it->second.owner, it->second.block, it->second.bytes};
  handles_.erase(it);
  return u;
}

}  // namespace missile::shim
