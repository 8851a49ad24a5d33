#include "plugin_state.h"

#include "absl/time/time.h"

namespace missile::deviceplugin {

bool PluginState::Observe(const absl::StatusOr<std::vector<GpuRef>>& answer) {
  absl::MutexLock lock(&mu_);
  if (answer.ok()) {
    failures_ = 0;
    if (state_.known && state_.healthy && state_.gpus == *answer) return false;
    state_.gpus = *answer;
    state_.known = true;
    state_.healthy = true;
    ++state_.generation;
    return true;
  }
  if (failures_ < failures_before_unhealthy_) ++failures_;
  if (failures_ < failures_before_unhealthy_ || !state_.healthy) return false;
  state_.healthy = false;
  ++state_.generation;
  return true;
}

StateSnapshot PluginState::Snapshot() const {
  absl::MutexLock lock(&mu_);
  return state_;
}

StateSnapshot PluginState::WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const {
  absl::MutexLock lock(&mu_);
  auto changed = [this, seen]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return stopped_ || state_.generation != seen;
  };
  mu_.AwaitWithTimeout(absl::Condition(&changed), absl::FromChrono(timeout));
  return state_;
}

void PluginState::Stop() {
  absl::MutexLock lock(&mu_);
  stopped_ = true;
}

bool PluginState::stopped() const {
  absl::MutexLock lock(&mu_);
  return stopped_;
}

}  // namespace missile::deviceplugin
