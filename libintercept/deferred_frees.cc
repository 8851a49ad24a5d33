#include "deferred_frees.h"

#include <utility>

namespace missile::shim {

DeferredFrees::DeferredFrees(const DriverApi& api, Release release)
    : api_(api), release_(std::move(release)) {}

CUresult DeferredFrees::RecordEvent(CUstream stream, bool ptsz, CUevent* event) {
  *event = nullptr;
  CUresult r = api_.EventCreate(event, CU_EVENT_DISABLE_TIMING);
  if (r == CUDA_SUCCESS) r = (ptsz ? api_.EventRecordPtsz : api_.EventRecord)(*event, stream);
  if (r != CUDA_SUCCESS && *event != nullptr) {
    api_.EventDestroy(*event);
    *event = nullptr;
  }
  return r;
}

void DeferredFrees::Add(CUevent event, CUdeviceptr ptr, const AllocationTable::Entry& entry) {
  CUcontext ctx = nullptr;
  api_.CtxGetCurrent(&ctx);
  absl::MutexLock lock(&mu_);
  pending_.push_back({event, ptr, ctx});
  entries_[ptr] = entry;
}

void DeferredFrees::Reap(bool wait) {
  std::vector<std::pair<CUdeviceptr, AllocationTable::Entry>> ready;
  {
    absl::MutexLock lock(&mu_);
    if (pending_.empty()) return;
    auto keep = pending_.begin();
    for (auto it = pending_.begin(); it != pending_.end(); ++it) {
      CUresult r = wait ? api_.EventSynchronize(it->event) : api_.EventQuery(it->event);
      if (r == CUDA_ERROR_NOT_READY) {
        *keep++ = *it;
        continue;
      }
      api_.EventDestroy(it->event);
      auto e = entries_.find(it->ptr);
      if (e != entries_.end()) {
        ready.emplace_back(it->ptr, e->second);
        entries_.erase(e);
      }
    }
    pending_.erase(keep, pending_.end());
  }
  for (const auto& [ptr, entry] : ready) release_(ptr, entry);
}

size_t DeferredFrees::pending() const {
  absl::MutexLock lock(&mu_);
  return pending_.size();
}

}  // namespace missile::shim
