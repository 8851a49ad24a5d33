// A tenant's Kubernetes identity: the pod, namespace and container it runs in, as an
// admission webhook hands them to the shim through the downward API (MISSILE_K8S_POD,
// MISSILE_K8S_NAMESPACE, MISSILE_K8S_CONTAINER). The shim sends them at registration; the daemon
// keeps them per session and shows them (missilectl tenants, the labels of
// missile_tenant_info). They are the tenant's own claim, not checked against the API server:
// labels for people, never a basis for policy.
// Pure functions: thread-safe.
#ifndef MISSILE_COMMON_K8S_IDENTITY_H_
#define MISSILE_COMMON_K8S_IDENTITY_H_

#include <cstddef>
#include <string>
#include <string_view>

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

}  // namespace missile

#endif  // MISSILE_COMMON_K8S_IDENTITY_H_
