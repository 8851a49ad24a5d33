#include "pod_mutation.h"

#include <algorithm>
#include <optional>
#include <set>
#include <utility>
#include <vector>

#include "absl/strings/str_split.h"
#include "missile/common/size.h"
#include "missile/common/status_macros.h"

namespace missile::webhook {
namespace {

using deviceplugin::kBeResource;
using deviceplugin::kLsResource;

// Appends to array members of one object of the pod (a container, the pod spec), creating an
// array the object does not have with the patch's first element for it.
class ArrayAppender {
 public:
  ArrayAppender(const Json& object, JsonPointer path, Json* ops)
      : object_(object), path_(std::move(path)), ops_(ops) {}

  void Append(const std::string& key, Json value) {
    if (ArrayMember(object_, key) != nullptr || created_.contains(key)) {
      ops_->push_back(AddOp(path_.Key(key).End(), std::move(value)));
    } else {
      ops_->push_back(AddOp(path_.Key(key), Json::array({std::move(value)})));
      created_.insert(key);
    }
  }
  const JsonPointer& path() const { return path_; }

 private:
  const Json& object_;
  JsonPointer path_;
  Json* ops_;
  std::set<std::string> created_;
};

// The index of the element of obj[key] whose `field` is `value`, if any.
std::optional<size_t> FindBy(const Json& obj, std::string_view key, std::string_view field,
                             std::string_view value) {
  const Json* array = ArrayMember(obj, key);
  if (array == nullptr) return std::nullopt;
  for (size_t i = 0; i < array->size(); ++i) {
    if (StringMember((*array)[i], field) == value) return i;
  }
  return std::nullopt;
}

Json PlainEnv(std::string_view name, std::string_view value) {
  return Json{{"name", name}, {"value", value}};
}

Json FieldEnv(std::string_view name, std::string_view field_path) {
  return Json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", field_path}}}}}};
}

// The class of the slots the container asks for in its limits, if any.
absl::StatusOr<std::optional<TenantClass>> SlotClass(const Json& container) {
  const Json* resources = ObjectMember(container, "resources");
  const Json* limits = resources ? ObjectMember(*resources, "limits") : nullptr;
  bool ls = limits != nullptr && limits->contains(kLsResource);
  bool be = limits != nullptr && limits->contains(kBeResource);
  if (ls && be) {
    return absl::InvalidArgumentError("container '" + StringMember(container, "name") +
                                      "' asks for both " + kLsResource + " and " + kBeResource);
  }
  if (ls) return TenantClass::kLatencySensitive;
  if (be) return TenantClass::kBestEffort;
  return std::nullopt;
}

// The patch of one chosen container.
class ContainerPatch {
 public:
  ContainerPatch(const Json& container, JsonPointer path, Json* ops)
      : container_(container),
        name_(StringMember(container, "name")),
        appender_(container, std::move(path), ops),
        ops_(ops) {}

  // Adds the variable unless the container sets it already.
  void AddEnv(Json entry) {
    if (FindBy(container_, "env", "name", entry["name"].get<std::string>())) return;
    appender_.Append("env", std::move(entry));
  }

  // Puts `shim` first in the container's LD_PRELOAD, unless it is in it already.
  absl::Status PrependPreload(const std::string& shim) {
    std::optional<size_t> at = FindBy(container_, "env", "name", "LD_PRELOAD");
    if (!at) {
      appender_.Append("env", PlainEnv("LD_PRELOAD", shim));
      return absl::OkStatus();
    }
    const Json& entry = container_["env"][*at];
    if (entry.contains("valueFrom")) {
      return Refuse("sets LD_PRELOAD with valueFrom, to which the shim " + shim +
                    " cannot be prepended: give LD_PRELOAD a plain value or leave it out");
    }
    std::string value = StringMember(entry, "value");
    for (absl::string_view part : absl::StrSplit(value, absl::ByAnyChar(": "))) {
      if (part == shim) return absl::OkStatus();
    }
    JsonPointer path = appender_.path().Key("env").Index(*at).Key("value");
    ops_->push_back(AddOp(path, value.empty() ? shim : shim + ":" + value));
    return absl::OkStatus();
  }

  // Mounts pod volume `volume` at `path`, unless it is mounted there already.
  absl::Status AddMount(const std::string& volume, const std::string& path, bool read_only) {
    if (std::optional<size_t> at = FindBy(container_, "volumeMounts", "name", volume)) {
      std::string where = StringMember(container_["volumeMounts"][*at], "mountPath");
      if (where == path) return absl::OkStatus();
      return Refuse("mounts volume '" + volume + "' at " + where + ", not at " + path);
    }
    if (std::optional<size_t> at = FindBy(container_, "volumeMounts", "mountPath", path)) {
      return Refuse("mounts volume '" + StringMember(container_["volumeMounts"][*at], "name") +
                    "' at " + path + ", where the webhook mounts volume '" + volume + "'");
    }
    Json mount{{"name", volume}, {"mountPath", path}};
    if (read_only) mount["readOnly"] = true;
    appender_.Append("volumeMounts", std::move(mount));
    return absl::OkStatus();
  }

  const std::string& name() const { return name_; }

 private:
  absl::Status Refuse(const std::string& why) const {
    return absl::InvalidArgumentError("container '" + name_ + "' " + why);
  }

  const Json& container_;
  std::string name_;
  ArrayAppender appender_;
  Json* ops_;
};

void AddIdentity(const TenantSpec& spec, ContainerPatch& patch) {
  patch.AddEnv(PlainEnv("MISSILE_TENANT_NAME", spec.tenant_name));
  patch.AddEnv(FieldEnv("MISSILE_K8S_POD", "metadata.name"));
  patch.AddEnv(FieldEnv("MISSILE_K8S_NAMESPACE", "metadata.namespace"));
  patch.AddEnv(PlainEnv("MISSILE_K8S_CONTAINER", patch.name()));
}

// What the device plugin would add at Allocate, less the devices.
absl::Status AddShim(const MutationConfig& config, const TenantSpec& spec, ContainerPatch& patch) {
  MISSILE_RETURN_IF_ERROR(patch.PrependPreload(config.ShimPath()));
  MISSILE_RETURN_IF_ERROR(patch.AddMount(kShimVolume, config.shim_dir, true));
  MISSILE_RETURN_IF_ERROR(patch.AddMount(kSocketVolume, config.socket_dir, false));
  patch.AddEnv(PlainEnv("MISSILE_TENANT_CLASS", TenantClassName(spec.cls)));
  patch.AddEnv(PlainEnv("MISSILE_SOCKET", config.SocketPath()));
  if (spec.quota_bytes) patch.AddEnv(PlainEnv("MISSILE_QUOTA", FormatSizeExact(*spec.quota_bytes)));
  return absl::OkStatus();
}

// Patches container `index` of the pod; true when it got the shim (and so needs the volumes).
absl::StatusOr<bool> PatchContainer(const MutationConfig& config, const TenantSpec& spec,
                                    const Json& container, size_t index, Json* ops) {
  ContainerPatch patch(container, JsonPointer().Key("spec").Key("containers").Index(index), ops);
  absl::StatusOr<std::optional<TenantClass>> slots = SlotClass(container);
  if (!slots.ok()) return slots.status();
  if (*slots) {
    std::string resource = **slots == TenantClass::kLatencySensitive ? kLsResource : kBeResource;
    if (**slots != spec.cls) {
      return absl::InvalidArgumentError("container '" + patch.name() + "' asks for " + resource +
                                        " slots but " + kClassAnnotation + " is " +
                                        TenantClassName(spec.cls));
    }
    if (spec.quota_bytes) {
      return absl::InvalidArgumentError(std::string(kQuotaAnnotation) + " is not for container '" +
                                        patch.name() + "', which asks for " + resource +
                                        " slots: its quota comes from the slots");
    }
    AddIdentity(spec, patch);
    return false;
  }
  MISSILE_RETURN_IF_ERROR(AddShim(config, spec, patch));
  AddIdentity(spec, patch);
  return true;
}

absl::Status AddVolume(const Json& pod_spec, const std::string& name, const std::string& path,
                       ArrayAppender& volumes) {
  if (std::optional<size_t> at = FindBy(pod_spec, "volumes", "name", name)) {
    const Json& volume = pod_spec["volumes"][*at];
    const Json* host_path = ObjectMember(volume, "hostPath");
    if (host_path != nullptr && StringMember(*host_path, "path") == path) return absl::OkStatus();
    return absl::InvalidArgumentError("the pod's volume '" + name + "' is not hostPath " + path +
                                      ", which the webhook mounts under that name: rename it");
  }
  volumes.Append("volumes",
                 Json{{"name", name}, {"hostPath", {{"path", path}, {"type", "Directory"}}}});
  return absl::OkStatus();
}

void AddSupplementalGroup(const Json& pod_spec, int64_t gid, Json* ops) {
  JsonPointer context_path = JsonPointer().Key("spec").Key("securityContext");
  const Json* context = ObjectMember(pod_spec, "securityContext");
  if (context == nullptr) {
    ops->push_back(AddOp(context_path, Json{{"supplementalGroups", Json::array({gid})}}));
    return;
  }
  const Json* groups = ArrayMember(*context, "supplementalGroups");
  if (groups != nullptr && std::any_of(groups->begin(), groups->end(), [gid](const Json& g) {
        return g.is_number_integer() && g.get<int64_t>() == gid;
      })) {
    return;
  }
  ArrayAppender(*context, context_path, ops).Append("supplementalGroups", gid);
}

}  // namespace

std::string MutationConfig::ShimPath() const { return shim_dir + "/" + deviceplugin::kShimLibrary; }

std::string MutationConfig::SocketPath() const {
  return socket_dir + "/" + deviceplugin::kSocketName;
}

absl::StatusOr<Json> MutatePod(const MutationConfig& config, const Json& pod,
                               std::string_view namespace_name) {
  absl::StatusOr<TenantSpec> spec = ReadTenantSpec(pod, namespace_name);
  if (!spec.ok()) return spec.status();
  const Json& pod_spec = pod["spec"];  // ReadTenantSpec found spec.containers
  const Json& containers = pod_spec["containers"];
  Json ops = Json::array();
  bool needs_volumes = false;
  for (size_t i = 0; i < containers.size(); ++i) {
    const std::string name = StringMember(containers[i], "name");
    if (std::find(spec->containers.begin(), spec->containers.end(), name) ==
        spec->containers.end()) {
      continue;
    }
    MISSILE_ASSIGN_OR_RETURN(bool shimmed, PatchContainer(config, *spec, containers[i], i, &ops));
    needs_volumes = needs_volumes || shimmed;
  }
  if (needs_volumes) {
    ArrayAppender volumes(pod_spec, JsonPointer().Key("spec"), &ops);
    MISSILE_RETURN_IF_ERROR(AddVolume(pod_spec, kShimVolume, config.shim_dir, volumes));
    MISSILE_RETURN_IF_ERROR(AddVolume(pod_spec, kSocketVolume, config.socket_dir, volumes));
  }
  AddSupplementalGroup(pod_spec, config.socket_gid, &ops);
  return ops;
}

}  // namespace missile::webhook
