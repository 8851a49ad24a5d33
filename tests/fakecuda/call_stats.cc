#include "call_stats.h"

namespace fakecuda {

CUresult CallStats::OnCall(EntryId id) {
  const int i = static_cast<int>(id);
  const uint64_t n = counts_[i].fetch_add(1, std::memory_order_relaxed) + 1;
  if (armed_[i].load(std::memory_order_acquire) == 0) return CUDA_SUCCESS;
  MutexLock lock(&mu_);
  for (auto it = rules_.begin(); it != rules_.end(); ++it) {
    if (it->id == id && it->nth == n) {
      const CUresult code = it->code;
      rules_.erase(it);
      armed_[i].fetch_sub(1, std::memory_order_release);
      return code;
    }
  }
  return CUDA_SUCCESS;
}

uint64_t CallStats::Count(EntryId id) const {
  return counts_[static_cast<int>(id)].load(std::memory_order_relaxed);
}

void CallStats::ArmAbsolute(EntryId id, uint64_t nth, CUresult code) {
  MutexLock lock(&mu_);
  rules_.push_back({id, nth, code});
  armed_[static_cast<int>(id)].fetch_add(1, std::memory_order_release);
}

void CallStats::ArmRelative(EntryId id, uint64_t nth, CUresult code) {
  // Read the count under the lock so two concurrent arms agree on "now"; a call racing with the
  // arm may or may not be counted before it, which is inherent to "from now on".
  MutexLock lock(&mu_);
  rules_.push_back({id, Count(id) + nth, code});
  armed_[static_cast<int>(id)].fetch_add(1, std::memory_order_release);
}

}  // namespace fakecuda
