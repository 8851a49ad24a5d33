#include "pod_identity_resolver.h"

#include "absl/strings/str_cat.h"

namespace missile::daemon {
namespace {

std::string Describe(const K8sIdentity& id) {
  auto known = [](const std::string& s) { return s.empty() ? std::string("-") : s; };
  return absl::StrCat(known(id.k8s_namespace), "/", known(id.pod), " container ",
                      known(id.container));
}

}  // namespace

TenantIdentityOutcome ResolveTenantIdentity(PodIdentityResolver* resolver,
                                            const K8sIdentity& claimed,
                                            const std::vector<std::string>& devices) {
  TenantIdentityOutcome out{claimed, "", false};
  if (resolver == nullptr || devices.empty()) return out;
  absl::Status valid = ValidateK8sDeviceIds(devices);
  absl::StatusOr<K8sIdentity> found =
      valid.ok() ? resolver->Resolve(devices) : absl::StatusOr<K8sIdentity>(valid);
  if (!found.ok()) {
    out.failed = true;
    out.note = absl::StrCat("Kubernetes identity not from the kubelet (",
                            found.status().message(), "); keeping the tenant's own claim");
    return out;
  }
  if (!claimed.empty() && *found != claimed) {
    out.note = absl::StrCat("the tenant claimed pod ", Describe(claimed), ", the kubelet says ",
                            Describe(*found), ": taking the kubelet's");
  }
  out.identity = *found;
  return out;
}

}  // namespace missile::daemon
