// What every DevicePlugin endpoint of the plugin shares: the GPUs last reported by missiled and
// whether missiled is answering. The poller (one thread) feeds it the outcome of each status
// call; the endpoints' ListAndWatch streams wait for a change and send the new device list.
//
// Health: the devices are Healthy while missiled answers. After `failures_before_unhealthy`
// failed calls in a row they turn Unhealthy (the last GPU list is kept, so the kubelet sees the
// same devices, unhealthy, rather than none); the first answer turns them Healthy again and
// replaces the GPU list with the one it carries.
// Thread safety: every method may be called from any thread.
#ifndef MISSILE_DEVICEPLUGIN_PLUGIN_STATE_H_
#define MISSILE_DEVICEPLUGIN_PLUGIN_STATE_H_

#include <chrono>
#include <cstdint>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "slots.h"

namespace missile::deviceplugin {

struct StateSnapshot {
  std::vector<GpuRef> gpus;
  bool known = false;     // missiled has answered at least once
  bool healthy = false;
  uint64_t generation = 0;  // rises with every change of gpus or healthy
};

class PluginState {
 public:
  explicit PluginState(uint32_t failures_before_unhealthy)
      : failures_before_unhealthy_(failures_before_unhealthy) {}

  // Records one status call's outcome. Returns true when it changed the snapshot.
  bool Observe(const absl::StatusOr<std::vector<GpuRef>>& answer);

  StateSnapshot Snapshot() const;

  // Blocks until the generation differs from `seen`, Stop() was called or `timeout` passed;
  // returns the snapshot then.
  StateSnapshot WaitForChange(uint64_t seen, std::chrono::milliseconds timeout) const;

  // Wakes every waiter; WaitForChange returns at once from now on.
  void Stop();
  bool stopped() const;

 private:
  const uint32_t failures_before_unhealthy_;
  mutable absl::Mutex mu_;
  StateSnapshot state_ ABSL_GUARDED_BY(mu_);
  uint32_t failures_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopped_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_PLUGIN_STATE_H_
