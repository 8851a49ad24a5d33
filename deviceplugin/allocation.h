// What Allocate tells the kubelet to add to a container that asked for slots of one resource:
//   env      LD_PRELOAD            the shim inside the container (shim_container_dir/libmissile.so)
//            MISSILE_TENANT_CLASS  "ls" or "be"
//            MISSILE_QUOTA         per-slot quota x the container's slots on one GPU (the most
//                                  on any of its GPUs when the kubelet spread them); a
//                                  percentage per slot is taken of that GPU's pool
//            MISSILE_SOCKET        missiled's socket inside the container
//            MISSILE_K8S_DEVICES   the allocated device IDs, comma-separated, in the kubelet's
//                                  order: missiled asks the kubelet's pod-resources API which
//                                  container holds them (the tenant's pod identity)
//   mounts   the shim bundle, read-only; missiled's socket directory (read-write: connecting
//            to a Unix socket needs write access)
//   devices  /dev/nvidiaN of each GPU holding one of the slots, /dev/nvidiactl,
//            /dev/nvidia-uvm, /dev/nvidia-uvm-tools (host paths under the device root)
// Thread safety: pure functions.
#ifndef MISSILE_DEVICEPLUGIN_ALLOCATION_H_
#define MISSILE_DEVICEPLUGIN_ALLOCATION_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "deviceplugin/v1beta1/api.pb.h"
#include "plugin_config.h"
#include "slots.h"

namespace missile::deviceplugin {

// The response for one container. INVALID_ARGUMENT when `ids` is empty, repeats an ID or names
// a device that is not among `slots` (the message names it); FAILED_PRECONDITION when the quota
// is a percentage and missiled reported no pool size for one of the slots' GPUs (the container
// is not started rather than started with a quota nobody chose).
absl::StatusOr<v1beta1::ContainerAllocateResponse> BuildAllocation(
    const PluginConfig& config, const ClassResource& resource, const std::vector<Slot>& slots,
    const std::vector<std::string>& ids);

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_ALLOCATION_H_
