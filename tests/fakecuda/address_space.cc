#include "address_space.h"

namespace fakecuda {

void AddressSpace::Insert(const Region& region) {
  WriterLock lock(&mu_);
  regions_[region.base] = region;
}

bool AddressSpace::Remove(uintptr_t base, Region* removed) {
  WriterLock lock(&mu_);
  auto it = regions_.find(base);
  if (it == regions_.end()) return false;
  if (removed != nullptr) *removed = it->second;
  regions_.erase(it);
  return true;
}

std::vector<Region> AddressSpace::RemoveIf(const std::function<bool(const Region&)>& pred) {
  WriterLock lock(&mu_);
  std::vector<Region> removed;
  for (auto it = regions_.begin(); it != regions_.end();) {
    if (pred(it->second)) {
      removed.push_back(it->second);
      it = regions_.erase(it);
    } else {
      ++it;
    }
  }
  return removed;
}

bool AddressSpace::Update(uintptr_t base, const std::function<void(Region&)>& update) {
  WriterLock lock(&mu_);
  auto it = regions_.find(base);
  if (it == regions_.end()) return false;
  update(it->second);
  return true;
}

std::map<uintptr_t, Region>::const_iterator AddressSpace::FindLocked(uintptr_t addr) const {
  auto it = regions_.upper_bound(addr);
  if (it == regions_.begin()) return regions_.end();
  --it;
  return addr - it->second.base < it->second.size ? it : regions_.end();
}

std::optional<Region> AddressSpace::Find(uintptr_t addr) const {
  ReaderLock lock(&mu_);
  auto it = FindLocked(addr);
  if (it == regions_.end()) return std::nullopt;
  return it->second;
}

bool AddressSpace::Overlaps(uintptr_t addr, size_t len) const {
  ReaderLock lock(&mu_);
  if (FindLocked(addr) != regions_.end()) return true;
  auto next = regions_.upper_bound(addr);
  return next != regions_.end() && next->first < addr + len;
}

MemClass AddressSpace::Classify(uintptr_t addr, int* device) const {
  ReaderLock lock(&mu_);
  auto it = FindLocked(addr);
  if (it == regions_.end()) return MemClass::kPageable;
  if (device != nullptr) *device = it->second.device;
  return it->second.device_memory ? MemClass::kDevice : MemClass::kPinnedHost;
}

CUresult AddressSpace::CheckAccess(uintptr_t addr, size_t len, bool write) const {
  ReaderLock lock(&mu_);
  if (len == 0) len = 1;
  if (addr + len < addr) return CUDA_ERROR_INVALID_VALUE;
  uintptr_t cursor = addr;
  auto it = FindLocked(addr);
  while (true) {
    if (it == regions_.end() || it->second.base > cursor) return CUDA_ERROR_INVALID_VALUE;
    const Region& r = it->second;
    const int needed = write ? PROT_WRITE : PROT_READ;
    if (r.kind == RegionKind::kVmm && (r.prot & needed) == 0) return CUDA_ERROR_INVALID_VALUE;
    const uintptr_t end = r.base + r.size;
    if (end >= addr + len) return CUDA_SUCCESS;
    cursor = end;
    ++it;
  }
}

}  // namespace fakecuda
