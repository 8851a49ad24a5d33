#include "allocation.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/status/status.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "missile/common/size.h"

namespace missile::deviceplugin {

namespace {

void AddDevice(v1beta1::ContainerAllocateResponse& out, const PluginConfig& config,
               const std::string& name) {
  v1beta1::DeviceSpec* dev = out.add_devices();
  dev->set_container_path("/dev/" + name);
  dev->set_host_path(config.device_root + "/" + name);
  dev->set_permissions("rw");
}

void AddMount(v1beta1::ContainerAllocateResponse& out, const std::string& host,
              const std::string& container, bool read_only) {
  v1beta1::Mount* mount = out.add_mounts();
  mount->set_host_path(host);
  mount->set_container_path(container);
  mount->set_read_only(read_only);
}

}  // namespace

absl::StatusOr<v1beta1::ContainerAllocateResponse> BuildAllocation(
    const PluginConfig& config, const ClassResource& resource, const std::vector<Slot>& slots,
    const std::vector<std::string>& ids) {
  if (ids.empty()) return absl::InvalidArgumentError("no devices to allocate");
  std::set<std::string> seen;
  std::map<uint32_t, uint64_t> slots_per_gpu;  // GPU index -> this container's slots on it
  std::map<uint32_t, uint64_t> slot_quota;     // GPU index -> one slot's quota there
  for (const std::string& id : ids) {
    const Slot* slot = FindSlot(slots, id);
    if (slot == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("unknown ", resource.resource, " device '", id, "'"));
    }
    if (!seen.insert(id).second) {
      return absl::InvalidArgumentError(absl::StrCat("device '", id, "' repeated"));
    }
    ++slots_per_gpu[slot->gpu.index];
    absl::StatusOr<uint64_t> quota = resource.SlotQuota(slot->gpu.pool_bytes);
    if (!quota.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat("GPU ", slot->gpu.uuid, ": ", quota.status().message()));
    }
    slot_quota[slot->gpu.index] = *quota;
  }
  uint64_t most = 0;
  for (const auto& [index, count] : slots_per_gpu) {
    most = std::max(most, count * slot_quota[index]);
  }

  v1beta1::ContainerAllocateResponse out;
  auto& env = *out.mutable_envs();
  env["LD_PRELOAD"] = config.shim_container_dir + "/" + kShimLibrary;
  env["MISSILE_TENANT_CLASS"] = TenantClassName(resource.cls);
  env["MISSILE_QUOTA"] = FormatSizeExact(most);
  env["MISSILE_SOCKET"] = config.socket_container_dir + "/" + kSocketName;
  env["MISSILE_K8S_DEVICES"] = absl::StrJoin(ids, ",");

  AddMount(out, config.shim_host_dir, config.shim_container_dir, /*read_only=*/true);
  AddMount(out, config.socket_host_dir, config.socket_container_dir, /*read_only=*/false);

  for (const auto& [index, count] : slots_per_gpu) AddDevice(out, config, absl::StrCat("nvidia", index));
  for (const char* node : {"nvidiactl", "nvidia-uvm", "nvidia-uvm-tools"}) {
    AddDevice(out, config, node);
  }
  return out;
}

}  // namespace missile::deviceplugin
