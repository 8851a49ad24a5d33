// The pod mutation: from a pod being created and its TenantSpec (tenant_spec.h) to the JSON
// Patch that makes the chosen containers Missile tenants, or the reason the pod is refused.
//
// Each chosen container gets MISSILE_TENANT_NAME and the Kubernetes identity of the tenant
// (MISSILE_K8S_POD and MISSILE_K8S_NAMESPACE through the downward API, MISSILE_K8S_CONTAINER
// as a plain value). A container that already asks for missile.io/ls or missile.io/be slots
// gets nothing more: missile-device-plugin adds the rest at Allocate. Any other chosen
// container gets what the plugin would have added, less the devices: LD_PRELOAD with the shim
// first, MISSILE_TENANT_CLASS, MISSILE_SOCKET, MISSILE_QUOTA when annotated, and hostPath
// mounts of the shim directory (read-only) and missiled's socket directory. The pod gets the
// socket's group in securityContext.supplementalGroups.
//
// Variables a container sets itself are left as they are (but LD_PRELOAD, where the shim is
// put first); what the pod already carries is not added again, so a pod mutated once gets an
// empty patch the second time.
// Thread safety: plain values and pure functions.
#ifndef MISSILE_WEBHOOK_POD_MUTATION_H_
#define MISSILE_WEBHOOK_POD_MUTATION_H_

#include <cstdint>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "deviceplugin/constants.h"
#include "json_patch.h"
#include "tenant_spec.h"

namespace missile::webhook {

// The pod volumes the webhook adds (names unlikely to clash with a pod's own).
inline constexpr char kShimVolume[] = "missile-shim";
inline constexpr char kSocketVolume[] = "missile-socket";

// Host paths, the same inside the containers. The defaults are the device plugin's, and the
// socket group is the one the shipped manifests give missiled's socket.
struct MutationConfig {
  std::string shim_dir = deviceplugin::kDefaultShimHostDir;
  std::string socket_dir = deviceplugin::kDefaultSocketDir;
  int64_t socket_gid = 2046;

  std::string ShimPath() const;    // shim_dir/libmissile.so
  std::string SocketPath() const;  // socket_dir/missiled.sock
};

// The patch (a JSON array, empty when the pod has everything already) for `pod` in namespace
// `namespace_name`. INVALID_ARGUMENT, with a message for the pod's author, when the pod is to
// be refused: a wrong annotation (tenant_spec.h), a container whose slots are of the other
// class, a quota annotated next to slots, LD_PRELOAD set with valueFrom, or a volume or mount
// of the webhook's names or paths that is something else.
absl::StatusOr<Json> MutatePod(const MutationConfig& config, const Json& pod,
                               std::string_view namespace_name);

}  // namespace missile::webhook

#endif  // MISSILE_WEBHOOK_POD_MUTATION_H_
