// missile-device-plugin's configuration and its command line.
//
// The plugin advertises two extended resources (constants.h), each a number of slots per GPU;
// a container asking for N slots of a class gets a VRAM quota of N times the class's per-slot
// quota (MISSILE_QUOTA). A per-slot quota is a size, or a percentage of each GPU's pool as
// missiled reports it, so that it scales with the GPU. Paths come in host/container pairs where the plugin tells the kubelet
// what to mount: the host side is where the files are on the node, the container side where a
// tenant sees them.
// Thread safety: plain values and pure functions.
#ifndef MISSILE_DEVICEPLUGIN_PLUGIN_CONFIG_H_
#define MISSILE_DEVICEPLUGIN_PLUGIN_CONFIG_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "constants.h"
#include "missile/common/size.h"
#include "missile/common/tenant_class.h"

namespace missile::deviceplugin {

// One advertised resource: which class it stands for and how it is sliced.
struct ClassResource {
  TenantClass cls = TenantClass::kBestEffort;
  std::string resource;          // kLsResource or kBeResource
  std::string endpoint;          // socket name in the kubelet's plugin directory
  uint32_t slots_per_gpu = 0;    // 0: the resource is not advertised
  SizeOrFraction quota_per_slot;  // VRAM per slot, per GPU: bytes or a fraction of its pool

  // The quota of one slot on a GPU whose pool holds `pool_bytes` (0: unknown).
  // FAILED_PRECONDITION for a percentage when the pool's size is unknown.
  absl::StatusOr<uint64_t> SlotQuota(uint64_t pool_bytes) const;
};

struct PluginConfig {
  std::string kubelet_dir = kDefaultKubeletDir;  // where plugin sockets go
  std::string kubelet_socket;                    // empty: kubelet_dir/kubelet.sock
  // missiled's socket as the plugin reaches it, for GPU discovery and health.
  std::string missiled_socket = std::string(kDefaultSocketDir) + "/" + kSocketName;
  ClassResource ls{TenantClass::kLatencySensitive, kLsResource, kLsEndpoint, 4,
                   SizeOrFraction::Bytes(16 * kGiB)};
  ClassResource be{TenantClass::kBestEffort, kBeResource, kBeEndpoint, 8,
                   SizeOrFraction::Bytes(8 * kGiB)};
  std::string shim_host_dir = kDefaultShimHostDir;
  std::string shim_container_dir = kDefaultShimContainerDir;
  std::string socket_host_dir = kDefaultSocketDir;
  std::string socket_container_dir = kDefaultSocketDir;
  std::string device_root = kDefaultDeviceRoot;  // host directory holding the nvidia* nodes
  // How often missiled is asked for its GPUs and the kubelet's socket is looked at.
  std::chrono::milliseconds poll_interval{1000};
  // Failed status calls in a row before the devices are reported Unhealthy.
  uint32_t failures_before_unhealthy = 2;

  std::string KubeletSocket() const {
    return kubelet_socket.empty() ? kubelet_dir + "/" + kKubeletSocketName : kubelet_socket;
  }
  // The advertised resources (those with slots), LS first.
  std::vector<ClassResource> Resources() const;
};

struct PluginArgs {
  bool help = false;
  bool version = false;
  PluginConfig config;
};

inline constexpr char kPluginUsage[] = R"(usage: missile-device-plugin [options]

Advertises missile.io/ls and missile.io/be to the kubelet (device plugin API v1beta1), one slot
per share of a GPU that missiled manages, and tells the kubelet how to make a container a
Missile tenant (LD_PRELOAD of the shim, its class and quota, missiled's socket, the GPU nodes).

options:
  --kubelet-dir DIR           kubelet device plugin directory (/var/lib/kubelet/device-plugins)
  --kubelet-socket PATH       the kubelet's registration socket (DIR/kubelet.sock)
  --missiled-socket PATH      missiled's socket, for GPU discovery and health
                              (/run/missile/missiled.sock)
  --ls-slots N                missile.io/ls slots per GPU, 0 to not advertise it (4)
  --be-slots N                missile.io/be slots per GPU, 0 to not advertise it (8)
  --ls-quota-per-slot Q       VRAM quota per LS slot, per GPU: a size, or N% of the GPU's
                              pool as missiled reports it (16GiB); slots x N% <= 100%
  --be-quota-per-slot Q       VRAM quota per BE slot, per GPU, as for LS (8GiB)
  --shim-host-dir DIR         the shim bundle (holding libmissile.so) on the node
                              (/opt/missile/shim)
  --shim-container-dir DIR    where tenants see the shim bundle (/opt/missile/shim)
  --socket-host-dir DIR       missiled's socket directory on the node (/run/missile)
  --socket-container-dir DIR  where tenants see it (/run/missile)
  --device-root DIR           where the nvidia device nodes are on the node (/dev)
  --poll-ms N                 how often to check missiled and the kubelet, 10..60000 (1000)
  --unhealthy-after N         failed checks of missiled in a row before devices turn
                              Unhealthy, 1..100 (2)
  --help                      this text
  --version                   the version
)";

// Parses the arguments (without argv[0]). INVALID_ARGUMENT names the flag and what was wrong.
absl::StatusOr<PluginArgs> ParsePluginArgs(const std::vector<std::string>& args);

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_PLUGIN_CONFIG_H_
