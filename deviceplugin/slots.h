// The slot inventory of one resource: each GPU that missiled reports is cut into a fixed number
// of slots, each a device of the kubelet API. A slot's ID is "<GPU uuid>-<class>-<n>" (at most
// 63 characters, the API's limit), so IDs stay the same across restarts of the plugin, of
// missiled and of the node as long as the GPU does.
// Thread safety: plain values and pure functions.
#ifndef MISSILE_DEVICEPLUGIN_SLOTS_H_
#define MISSILE_DEVICEPLUGIN_SLOTS_H_

#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/common/tenant_class.h"

namespace missile::deviceplugin {

// A GPU as missiled reports it (missile.v1.GpuInfo): its index in the daemon's device list,
// taken to be the minor number of its /dev/nvidiaN node, its UUID, and the most its pool may
// hold (PoolStatus.capacity_bytes), which percentage quotas per slot are taken of.
struct GpuRef {
  uint32_t index = 0;
  std::string uuid;
  uint64_t pool_bytes = 0;  // 0: missiled reported no pool size
  bool operator==(const GpuRef&) const = default;
};

struct Slot {
  std::string id;
  GpuRef gpu;
  uint32_t number = 0;  // 0 .. slots_per_gpu-1 on its GPU
};

// The slots of `gpus`, `slots_per_gpu` each, in GPU then slot order. INVALID_ARGUMENT for a GPU
// without a UUID, a UUID that makes an ID over 63 characters or with characters other than
// letters, digits, '-', '_' and '.', or two GPUs with the same UUID.
absl::StatusOr<std::vector<Slot>> BuildSlots(const std::vector<GpuRef>& gpus, TenantClass cls,
                                             uint32_t slots_per_gpu);

// The slot with this ID, or nullptr.
const Slot* FindSlot(const std::vector<Slot>& slots, const std::string& id);

// GetPreferredAllocation for one container: `size` IDs from `available`, including every ID of
// `must_include`. Prefers to keep a container on as few GPUs as possible (its quota is per GPU):
// first the GPUs of `must_include`, then the GPUs with the most available slots, lowest index
// first on a tie, slots in ascending order. INVALID_ARGUMENT when `size` is not positive, is
// smaller than `must_include`, exceeds the available slots, or an ID is unknown, repeated or
// required without being available.
absl::StatusOr<std::vector<std::string>> PreferSlots(const std::vector<Slot>& slots,
                                                     const std::vector<std::string>& available,
                                                     const std::vector<std::string>& must_include,
                                                     int size);

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_SLOTS_H_
