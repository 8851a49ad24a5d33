// MatchPodDevices: which container of the kubelet's List answer holds a tenant's device IDs.
#include "pod_resources.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using ::testing::HasSubstr;

const std::string kGpu = "GPU-00000000-1111-2222-3333-444444444444";

struct Ctr {
  std::string name;
  std::vector<std::pair<std::string, std::vector<std::string>>> devices;
};

void AddPod(::v1::ListPodResourcesResponse* list, const std::string& ns, const std::string& pod,
            const std::vector<Ctr>& containers) {
  ::v1::PodResources* p = list->add_pod_resources();
  p->set_name(pod);
  p->set_namespace_(ns);
  for (const Ctr& c : containers) {
    ::v1::ContainerResources* cr = p->add_containers();
    cr->set_name(c.name);
    for (const auto& [resource, ids] : c.devices) {
      ::v1::ContainerDevices* d = cr->add_devices();
      d->set_resource_name(resource);
      for (const std::string& id : ids) d->add_device_ids(id);
    }
  }
}

// Three pods on the node: one without devices, one with an LS container beside a sidecar, one
// with a BE container and a GPU of another plugin.
::v1::ListPodResourcesResponse Node() {
  ::v1::ListPodResourcesResponse list;
  AddPod(&list, "kube-system", "coredns-1", {{"coredns", {}}});
  AddPod(&list, "shop", "web-7f9c",
         {{"proxy", {}},
          {"server", {{"missile.io/ls", {kGpu + "-ls-0", kGpu + "-ls-3"}}}}});
  AddPod(&list, "batch", "train-2",
         {{"trainer",
           {{"nvidia.com/gpu", {kGpu + "-ls-5"}}, {"missile.io/be", {kGpu + "-be-1"}}}}});
  return list;
}

TEST(MatchPodDevicesTest, FindsTheOneContainerAmongSeveralPods) {
  absl::StatusOr<K8sIdentity> id = MatchPodDevices(Node(), {kGpu + "-ls-3", kGpu + "-ls-0"});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, (K8sIdentity{"web-7f9c", "shop", "server"}));
  id = MatchPodDevices(Node(), {kGpu + "-be-1"});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(*id, (K8sIdentity{"train-2", "batch", "trainer"}));
  // A subset of the container's devices (a tenant told only one of them) still names it.
  id = MatchPodDevices(Node(), {kGpu + "-ls-0"});
  ASSERT_TRUE(id.ok()) << id.status();
  EXPECT_EQ(id->pod, "web-7f9c");
}

TEST(MatchPodDevicesTest, IdsOfAnotherResourceDoNotCount) {
  absl::StatusOr<K8sIdentity> id = MatchPodDevices(Node(), {kGpu + "-ls-5"});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
}

TEST(MatchPodDevicesTest, APartialOverlapIsNoMatch) {
  absl::StatusOr<K8sIdentity> id = MatchPodDevices(Node(), {kGpu + "-ls-0", kGpu + "-ls-1"});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("shop/web-7f9c container server"));
  // IDs split over two containers: neither holds them all.
  id = MatchPodDevices(Node(), {kGpu + "-ls-0", kGpu + "-be-1"});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
}

TEST(MatchPodDevicesTest, NoMatchNoIdsOrTwoMatches) {
  EXPECT_EQ(MatchPodDevices(Node(), {kGpu + "-ls-9"}).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(MatchPodDevices(Node(), {}).status().code(), absl::StatusCode::kNotFound);
  EXPECT_EQ(MatchPodDevices(::v1::ListPodResourcesResponse(), {kGpu + "-ls-0"}).status().code(),
            absl::StatusCode::kNotFound);
  ::v1::ListPodResourcesResponse twice = Node();
  AddPod(&twice, "other", "copy", {{"c", {{"missile.io/ls", {kGpu + "-ls-0"}}}}});
  absl::StatusOr<K8sIdentity> id = MatchPodDevices(twice, {kGpu + "-ls-0"});
  EXPECT_EQ(id.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("2 containers"));
}

TEST(MatchPodDevicesTest, NamesOutOfBoundsAreRefused) {
  ::v1::ListPodResourcesResponse list;
  AddPod(&list, "ns", "bad pod", {{"c", {{"missile.io/be", {kGpu + "-be-0"}}}}});
  EXPECT_EQ(MatchPodDevices(list, {kGpu + "-be-0"}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(KubeletPodResolverTest, NoKubeletIsAnErrorWithinTheDeadline) {
  KubeletPodResolver resolver(::testing::TempDir() + "/no-kubelet.sock",
                              std::chrono::milliseconds(1000));
  auto start = std::chrono::steady_clock::now();
  absl::StatusOr<K8sIdentity> id = resolver.Resolve({kGpu + "-ls-0"});
  EXPECT_FALSE(id.ok());
  EXPECT_THAT(std::string(id.status().message()), HasSubstr("no-kubelet.sock"));
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(3));
}

}  // namespace
}  // namespace missile::daemon
