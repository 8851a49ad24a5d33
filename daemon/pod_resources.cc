#include "pod_resources.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace missile::daemon {
namespace {

bool IsMissileResource(const std::string& name) {
  for (const char* r : kPodResourceNames) {
    if (name == r) return true;
  }
  return false;
}

// The missile device IDs of one container.
std::set<std::string> MissileDevices(const ::v1::ContainerResources& c) {
  std::set<std::string> ids;
  for (const ::v1::ContainerDevices& d : c.devices()) {
    if (IsMissileResource(d.resource_name())) ids.insert(d.device_ids().begin(), d.device_ids().end());
  }
  return ids;
}

}  // namespace

absl::StatusOr<K8sIdentity> MatchPodDevices(const ::v1::ListPodResourcesResponse& list,
                                            const std::vector<std::string>& device_ids) {
  if (device_ids.empty()) return absl::NotFoundError("no device IDs to look up");
  std::vector<K8sIdentity> found;
  std::string partly;  // a container that holds some of the IDs, for the message
  for (const ::v1::PodResources& pod : list.pod_resources()) {
    for (const ::v1::ContainerResources& c : pod.containers()) {
      const std::set<std::string> held = MissileDevices(c);
      size_t hits = 0;
      for (const std::string& id : device_ids) hits += held.count(id);
      if (hits == device_ids.size()) {
        found.push_back(K8sIdentity{pod.name(), pod.namespace_(), c.name()});
      } else if (hits > 0 && partly.empty()) {
        partly = absl::StrCat(pod.namespace_(), "/", pod.name(), " container ", c.name());
      }
    }
  }
  const std::string ids = absl::StrJoin(device_ids, ",");
  if (found.size() > 1) {
    return absl::NotFoundError(
        absl::StrCat(found.size(), " containers hold devices ", ids, ": none is taken"));
  }
  if (found.empty()) {
    return absl::NotFoundError(
        partly.empty()
            ? absl::StrCat("no container holds missile devices ", ids)
            : absl::StrCat("no container holds all of ", ids, " (", partly, " holds some)"));
  }
  if (absl::Status s = ValidateK8sIdentity(found[0]); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("the kubelet's answer: ", s.message()));
  }
  return found[0];
}

KubeletPodResolver::KubeletPodResolver(const std::string& socket,
                                       std::chrono::milliseconds deadline)
    : socket_(socket),
      deadline_(deadline),
      stub_(::v1::PodResourcesLister::NewStub(
          grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials()))) {}

absl::StatusOr<K8sIdentity> KubeletPodResolver::Resolve(
    const std::vector<std::string>& device_ids) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + deadline_);
  ::v1::ListPodResourcesRequest req;
  ::v1::ListPodResourcesResponse resp;
  grpc::Status s = stub_->List(&ctx, req, &resp);
  if (!s.ok()) {
    // absl and gRPC share the canonical code numbering.
    return absl::Status(static_cast<absl::StatusCode>(s.error_code()),
                        absl::StrCat("kubelet pod-resources List on ", socket_, ": ",
                                     s.error_message()));
  }
  return MatchPodDevices(resp, device_ids);
}

}  // namespace missile::daemon
