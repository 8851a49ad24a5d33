// The kubelet's pod-resources API (v1, pod_resources.proto) as a PodIdentityResolver: which
// pod, namespace and container the kubelet gave a set of missile.io/ls or missile.io/be device
// IDs. The kubelet, not the tenant, is the authority on that (docs/operations.md, "Kubernetes
// identity").
// Thread-safety: MatchPodDevices is pure; KubeletPodResolver::Resolve may be called from any
// thread (gRPC channels are thread-safe), each call one List RPC bounded by the deadline.
#ifndef MISSILE_DAEMON_POD_RESOURCES_H_
#define MISSILE_DAEMON_POD_RESOURCES_H_

#include <grpcpp/grpcpp.h>

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "missile/common/k8s_identity.h"
#include "pod_identity_resolver.h"
#include "podresources/v1/pod_resources.grpc.pb.h"

namespace missile::daemon {

// The resources whose device IDs identify a tenant: missile-device-plugin's two classes.
inline constexpr const char* kPodResourceNames[] = {"missile.io/ls", "missile.io/be"};

// The container in `list` whose devices of kPodResourceNames include every ID of `device_ids`.
// NOT_FOUND (saying which) when `device_ids` is empty, when no container holds them all (IDs of
// another resource do not count; a container holding only some of them is not it) or when
// more than one does; INVALID_ARGUMENT when the kubelet's names are out of Kubernetes' bounds.
absl::StatusOr<K8sIdentity> MatchPodDevices(const ::v1::ListPodResourcesResponse& list,
                                            const std::vector<std::string>& device_ids);

class KubeletPodResolver : public PodIdentityResolver {
 public:
  // `socket`: the kubelet's pod-resources socket (a path). Nothing is dialled until Resolve.
  KubeletPodResolver(const std::string& socket, std::chrono::milliseconds deadline);

  // One List call, at most `deadline` long (UNAVAILABLE, DEADLINE_EXCEEDED, ... as gRPC says,
  // the message naming the socket), then MatchPodDevices.
  absl::StatusOr<K8sIdentity> Resolve(const std::vector<std::string>& device_ids) override;

 private:
  const std::string socket_;
  const std::chrono::milliseconds deadline_;
  std::unique_ptr<::v1::PodResourcesLister::Stub> stub_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_POD_RESOURCES_H_
