#include "tenant_spec.h"

#include <algorithm>
#include <utility>

#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "missile/common/size.h"
#include "missile/common/status_macros.h"
#include "run_args.h"

namespace missile::webhook {
namespace {

absl::Status Invalid(std::string_view annotation, absl::string_view what) {
  return absl::InvalidArgumentError(std::string(annotation) + ": " + std::string(what));
}

// The annotation's value, or nullopt when absent; a value that is not a string (never from the
// API server, which keeps annotations as strings) reads as absent too.
std::optional<std::string> Annotation(const Json& pod, std::string_view key) {
  const Json* metadata = ObjectMember(pod, "metadata");
  const Json* annotations = metadata ? ObjectMember(*metadata, "annotations") : nullptr;
  const Json* value = annotations ? Member(*annotations, key) : nullptr;
  if (value == nullptr || !value->is_string()) return std::nullopt;
  return value->get<std::string>();
}

std::vector<std::string> ContainerNames(const Json& pod, std::string_view list) {
  std::vector<std::string> names;
  const Json* spec = ObjectMember(pod, "spec");
  const Json* containers = spec ? ArrayMember(*spec, list) : nullptr;
  if (containers == nullptr) return names;
  for (const Json& c : *containers) names.push_back(StringMember(c, "name"));
  return names;
}

bool Contains(const std::vector<std::string>& v, std::string_view s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

// The annotation's names, checked against spec.containers, in spec.containers order.
absl::StatusOr<std::vector<std::string>> ChosenContainers(const Json& pod,
                                                          const std::optional<std::string>& list) {
  std::vector<std::string> all = ContainerNames(pod, "containers");
  if (all.empty()) return absl::InvalidArgumentError("the pod has no spec.containers");
  if (!list) return all;
  std::vector<std::string> wanted;
  for (absl::string_view part : absl::StrSplit(*list, ',')) {
    std::string name(absl::StripAsciiWhitespace(part));
    if (name.empty()) {
      return Invalid(kContainersAnnotation,
                     "empty container name in '" + *list + "' (a comma list of names)");
    }
    if (!Contains(all, name)) {
      std::string why = Contains(ContainerNames(pod, "initContainers"), name)
                            ? "' is an init container, which never becomes a tenant"
                            : "' is not in spec.containers";
      return Invalid(kContainersAnnotation,
                     "'" + name + why + " (containers: " + absl::StrJoin(all, ", ") + ")");
    }
    wanted.push_back(name);
  }
  std::vector<std::string> chosen;
  for (const std::string& name : all) {
    if (Contains(wanted, name)) chosen.push_back(name);
  }
  return chosen;
}

absl::StatusOr<std::string> TenantName(const Json& pod, std::string_view namespace_name,
                                       const std::optional<std::string>& annotated) {
  if (annotated) {
    if (absl::Status s = cli::ValidateTenantName(*annotated); !s.ok()) {
      return Invalid(kTenantAnnotation, s.message());
    }
    return *annotated;
  }
  absl::StatusOr<std::string> name = DefaultTenantName(pod, namespace_name);
  if (!name.ok()) return name.status();
  if (absl::Status s = cli::ValidateTenantName(*name); !s.ok()) {
    return absl::InvalidArgumentError("the default tenant name '" + *name +
                                      "' (namespace.owner) is not one missiled takes: " +
                                      std::string(s.message()) + "; set " + kTenantAnnotation);
  }
  return name;
}

}  // namespace

bool WantsTenant(const Json& pod) { return Annotation(pod, kClassAnnotation).has_value(); }

absl::StatusOr<uint64_t> ParseQuota(std::string_view text) {
  if (IsBareNonZeroNumber(text)) {
    std::string n(absl::StripAsciiWhitespace(absl::string_view(text.data(), text.size())));
    return Invalid(kQuotaAnnotation, "'" + n + "' has no unit, which is ambiguous: write it with " +
                                         "one, such as '" + n + "GiB' or '" + n + "B'");
  }
  absl::StatusOr<uint64_t> bytes = ParseSize(text);
  if (!bytes.ok()) return Invalid(kQuotaAnnotation, bytes.status().message());
  if (*bytes == 0) return Invalid(kQuotaAnnotation, "must be more than 0 bytes");
  return *bytes;
}

absl::StatusOr<std::string> DefaultTenantName(const Json& pod, std::string_view namespace_name) {
  const Json* metadata = ObjectMember(pod, "metadata");
  if (metadata == nullptr) return absl::InvalidArgumentError("the pod has no metadata");
  std::string owner = StringMember(*metadata, "generateName");
  if (!owner.empty()) {
    if (owner.back() == '-') owner.pop_back();
    const Json* labels = ObjectMember(*metadata, "labels");
    std::string hash = labels ? StringMember(*labels, kPodTemplateHashLabel) : "";
    if (!hash.empty() && owner.size() > hash.size() + 1 && owner.ends_with("-" + hash)) {
      owner.resize(owner.size() - hash.size() - 1);
    }
  } else {
    owner = StringMember(*metadata, "name");
  }
  if (owner.empty()) {
    return absl::InvalidArgumentError(std::string("the pod has neither metadata.name nor ") +
                                      "metadata.generateName to name its tenant by: set " +
                                      kTenantAnnotation);
  }
  return std::string(namespace_name) + "." + owner;
}

absl::StatusOr<TenantSpec> ReadTenantSpec(const Json& pod, std::string_view namespace_name) {
  TenantSpec spec;
  std::optional<std::string> cls = Annotation(pod, kClassAnnotation);
  if (!cls) return absl::InvalidArgumentError(std::string("no ") + kClassAnnotation);
  absl::StatusOr<TenantClass> parsed = ParseTenantClass(*cls);
  if (!parsed.ok()) return Invalid(kClassAnnotation, parsed.status().message());
  spec.cls = *parsed;
  if (std::optional<std::string> quota = Annotation(pod, kQuotaAnnotation)) {
    MISSILE_ASSIGN_OR_RETURN(uint64_t bytes, ParseQuota(*quota));
    spec.quota_bytes = bytes;
  }
  MISSILE_ASSIGN_OR_RETURN(std::string name,
                           TenantName(pod, namespace_name, Annotation(pod, kTenantAnnotation)));
  spec.tenant_name = std::move(name);
  MISSILE_ASSIGN_OR_RETURN(std::vector<std::string> containers,
                           ChosenContainers(pod, Annotation(pod, kContainersAnnotation)));
  spec.containers = std::move(containers);
  return spec;
}

}  // namespace missile::webhook
