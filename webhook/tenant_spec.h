// What a pod's annotations ask of the webhook (the contract is in docs/kubernetes.md, "The
// admission webhook"):
//   missile.io/class       "ls" or "be"; a pod without it is left alone
//   missile.io/quota       optional VRAM quota, a size with a unit ("8GiB"), as in missiled.toml
//   missile.io/tenant      optional tenant name (default: DefaultTenantName)
//   missile.io/containers  optional comma list of the containers to make tenants (default: all
//                          of spec.containers, never init containers)
// Thread safety: plain values and pure functions.
#ifndef MISSILE_WEBHOOK_TENANT_SPEC_H_
#define MISSILE_WEBHOOK_TENANT_SPEC_H_

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "json_patch.h"
#include "missile/common/tenant_class.h"

namespace missile::webhook {

inline constexpr char kClassAnnotation[] = "missile.io/class";
inline constexpr char kQuotaAnnotation[] = "missile.io/quota";
inline constexpr char kTenantAnnotation[] = "missile.io/tenant";
inline constexpr char kContainersAnnotation[] = "missile.io/containers";

// The label a Deployment's ReplicaSet puts on its pods; its value ends their generateName.
inline constexpr char kPodTemplateHashLabel[] = "pod-template-hash";

struct TenantSpec {
  TenantClass cls = TenantClass::kBestEffort;
  std::optional<uint64_t> quota_bytes;  // set only when annotated
  std::string tenant_name;
  std::vector<std::string> containers;  // in spec.containers order, each once
};

// True when the pod carries kClassAnnotation (whatever its value): the pod is the webhook's.
bool WantsTenant(const Json& pod);

// The spec the pod's annotations ask for, checked against the pod (its namespace is
// `namespace_name`: the review's, as a pod being created may not carry one yet).
// INVALID_ARGUMENT, naming the annotation and what it accepts, when one is wrong.
absl::StatusOr<TenantSpec> ReadTenantSpec(const Json& pod, std::string_view namespace_name);

// "<namespace>.<owner>": the owner is generateName without its trailing '-' and, when the pod
// has kPodTemplateHashLabel, without the "-<hash>" that ends it (every replica of a Deployment
// is one tenant), else metadata.name. '.' and not '/' joins them, as missiled takes only
// letters, digits, '-', '_' and '.' in a tenant name (and a namespace holds no '.').
// INVALID_ARGUMENT when the pod has neither name.
absl::StatusOr<std::string> DefaultTenantName(const Json& pod, std::string_view namespace_name);

// VRAM quota text as missiled.toml reads a size: a unit is required ("8GiB", "512MiB"; a bare
// number is refused as ambiguous), and the size must be more than 0.
absl::StatusOr<uint64_t> ParseQuota(std::string_view text);

}  // namespace missile::webhook

#endif  // MISSILE_WEBHOOK_TENANT_SPEC_H_
