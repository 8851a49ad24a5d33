// A tenant's Kubernetes identity: the pod, namespace and container it runs in, as an
// admission webhook hands them to the shim through the downward API (MISSILE_K8S_POD,
// MISSILE_K8S_NAMESPACE, MISSILE_K8S_CONTAINER). The shim sends them at registration; the daemon
// keeps them per session and shows them (missilectl tenants, the labels of
// missile_tenant_info). They are the tenant's own claim unless missiled asks the kubelet
// (daemon/pod_resources.h, from the device IDs below): labels for people, never a basis for
// policy.
// Pure functions: thread-safe.
#ifndef MISSILE_COMMON_K8S_IDENTITY_H_
#define MISSILE_COMMON_K8S_IDENTITY_H_

#include <cstddef>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"

namespace missile {

struct K8sIdentity {
  std::string pod;        // empty: not known
  std::string k8s_namespace;
  std::string container;
  bool empty() const { return pod.empty() && k8s_namespace.empty() && container.empty(); }
  bool operator==(const K8sIdentity&) const = default;
};

// Kubernetes' own bounds: a pod name is a DNS subdomain (at most 253 characters), a namespace
// and a container name DNS labels (at most 63).
inline constexpr size_t kMaxPodName = 253;
inline constexpr size_t kMaxNamespace = 63;
inline constexpr size_t kMaxContainerName = 63;

// OK for an empty value (not known) or one of 1 to `max_len` letters, digits, '-', '_', '.'
// (the characters of a tenant name, which cover Kubernetes' names); else InvalidArgument
// naming `what` and the reason (the value C-escaped, and only when within the bound).
absl::Status ValidateK8sField(std::string_view what, std::string_view value, size_t max_len);

// Every field of `id` (what: "pod", "namespace", "container"); the first bad one's error.
absl::Status ValidateK8sIdentity(const K8sIdentity& id);

// The device IDs the kubelet allocated to a tenant's container (MISSILE_K8S_DEVICES, set by
// missile-device-plugin's Allocate: "<GPU UUID>-ls-<n>" or "-be-<n>"). missiled asks the
// kubelet which container holds them. Bounds: at most 64 IDs of 1 to 128 letters, digits, '-'.
inline constexpr size_t kMaxK8sDeviceIds = 64;
inline constexpr size_t kMaxK8sDeviceIdLength = 128;

// OK when `ids` is within the bounds above (the empty list too); else InvalidArgument naming
// the first bad ID (C-escaped, when within the length bound) or the count.
absl::Status ValidateK8sDeviceIds(const std::vector<std::string>& ids);

}  // namespace missile

#endif  // MISSILE_COMMON_K8S_IDENTITY_H_
