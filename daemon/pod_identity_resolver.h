// Where missiled learns a tenant's Kubernetes identity from an authority other than the tenant:
// given the device IDs the kubelet allocated to the tenant's container (MISSILE_K8S_DEVICES),
// the pod, namespace and container that hold them. DaemonCore depends only on this interface;
// pod_resources.h implements it over the kubelet's pod-resources API, tests with a fake.
// Thread-safety: Resolve may be called from any thread, concurrently; it may block (it is
// called with no DaemonCore lock held).
#ifndef MISSILE_DAEMON_POD_IDENTITY_RESOLVER_H_
#define MISSILE_DAEMON_POD_IDENTITY_RESOLVER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/common/k8s_identity.h"

namespace missile::daemon {

class PodIdentityResolver {
 public:
  virtual ~PodIdentityResolver() = default;
  // The container holding every one of `device_ids` (not empty). NOT_FOUND when no container
  // holds them all; another code when the authority could not be asked (the message says why).
  virtual absl::StatusOr<K8sIdentity> Resolve(const std::vector<std::string>& device_ids) = 0;
};

// What a registration's identity becomes: the resolver's answer for `devices` replaces the
// `claimed` one; with no resolver, no devices, device IDs out of bounds
// (ValidateK8sDeviceIds) or a resolver error, the claimed identity stays. `note` says what
// happened when there is something to log ("" otherwise): a disagreement with the claim, or
// why the claim was kept; `failed` is true for the latter.
struct TenantIdentityOutcome {
  K8sIdentity identity;
  std::string note;
  bool failed = false;
};
TenantIdentityOutcome ResolveTenantIdentity(PodIdentityResolver* resolver,
                                            const K8sIdentity& claimed,
                                            const std::vector<std::string>& devices);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_POD_IDENTITY_RESOLVER_H_
