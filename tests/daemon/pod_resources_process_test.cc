// missiled names a tenant by what the kubelet says, not by what the tenant claims: a fake
// kubelet serves the pod-resources API (v1 PodResourcesLister.List) on a Unix socket in the
// test, missiled is configured with it ([kubernetes] pod_resources_socket), and a tenant
// started with the device plugin's MISSILE_K8S_DEVICES and a wrong MISSILE_K8S_POD is listed
// (Admin.ListTenants) with the kubelet's pod, namespace and container. Without a kubelet, or
// with one too slow to answer, the tenant's claim stays and it registers all the same.
#include <atomic>
#include <memory>
#include <string>
#include <thread>

#include "daemon_process_fixture.h"
#include "podresources/v1/pod_resources.grpc.pb.h"

namespace missile::process_test {
namespace {

const std::string kGpu = "GPU-66616b65-6375-6461-2d67-707500000000";

// The kubelet's pod-resources service, answering List with a fixed node: a pod without
// devices, the tenant's pod (a sidecar and the "server" container with two LS slots) and a BE
// pod. `delay` holds every answer that long.
class FakeKubelet final : public ::v1::PodResourcesLister::Service {
 public:
  grpc::Status List(grpc::ServerContext*, const ::v1::ListPodResourcesRequest*,
                    ::v1::ListPodResourcesResponse* resp) override {
    ++calls;
    std::this_thread::sleep_for(delay);
    AddPod(resp, "kube-system", "coredns-1", "coredns", "", "");
    ::v1::PodResources* web = AddPod(resp, "shop", "web-7f9c-x2x9z", "proxy", "", "");
    ::v1::ContainerDevices* d = web->add_containers()->add_devices();
    web->mutable_containers(1)->set_name("server");
    d->set_resource_name("missile.io/ls");
    d->add_device_ids(kGpu + "-ls-0");
    d->add_device_ids(kGpu + "-ls-1");
    AddPod(resp, "batch", "train-0", "trainer", "missile.io/be", kGpu + "-be-0");
    return grpc::Status::OK;
  }

  std::atomic<int> calls{0};
  std::chrono::milliseconds delay{0};

 private:
  static ::v1::PodResources* AddPod(::v1::ListPodResourcesResponse* resp, const std::string& ns,
                                    const std::string& name, const std::string& container,
                                    const std::string& resource, const std::string& id) {
    ::v1::PodResources* pod = resp->add_pod_resources();
    pod->set_namespace_(ns);
    pod->set_name(name);
    ::v1::ContainerResources* c = pod->add_containers();
    c->set_name(container);
    if (!resource.empty()) {
      ::v1::ContainerDevices* d = c->add_devices();
      d->set_resource_name(resource);
      d->add_device_ids(id);
    }
    return pod;
  }
};

class PodResourcesTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    kubelet_socket_ = dir_.path() + "/kubelet.sock";
    daemon_log_ = dir_.path() + "/missiled.log";
  }
  void TearDown() override {
    DaemonTest::TearDown();
    if (server_) server_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(1));
  }

  void StartKubelet() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + kubelet_socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&kubelet_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }

  void StartDaemonWithKubelet() {
    StartDaemon("[kubernetes]\npod_resources_socket = \"" + kubelet_socket_ + "\"\n");
  }

  // A tenant that claims to be shop/liar container wrong, holding the kubelet's LS slots.
  void StartTenant(Child* tenant) {
    auto env = TenantEnv("ls", "web");
    env["MISSILE_K8S_DEVICES"] = kGpu + "-ls-1," + kGpu + "-ls-0";
    env["MISSILE_K8S_POD"] = "liar";
    env["MISSILE_K8S_NAMESPACE"] = "shop";
    env["MISSILE_K8S_CONTAINER"] = "wrong";
    ASSERT_TRUE(tenant->Start({TENANT_PROBE, "alloc:16", "hold"}, env));
    ASSERT_EQ(tenant->WaitForLine("ready"), "ready") << DaemonLog();
  }

  // The one tenant's "namespace/pod/container" as Admin.ListTenants lists it.
  std::string ListedIdentity() {
    v1::ListTenantsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    if (resp.tenants_size() != 1) return "tenants: " + std::to_string(resp.tenants_size());
    const v1::TenantInfo& t = resp.tenants(0);
    return t.k8s_namespace() + "/" + t.k8s_pod() + "/" + t.k8s_container();
  }

  std::string kubelet_socket_;
  FakeKubelet kubelet_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(PodResourcesTest, TheKubeletsAnswerReplacesTheTenantsClaim) {
  StartKubelet();
  StartDaemonWithKubelet();
  Child tenant;
  StartTenant(&tenant);
  EXPECT_EQ(ListedIdentity(), "shop/web-7f9c-x2x9z/server") << DaemonLog();
  EXPECT_GE(kubelet_.calls.load(), 1);
  EXPECT_NE(DaemonLog().find("the kubelet says shop/web-7f9c-x2x9z container server"),
            std::string::npos)
      << DaemonLog();
}

TEST_F(PodResourcesTest, WithoutAKubeletTheClaimStaysAndTheTenantRegisters) {
  StartDaemonWithKubelet();  // nothing listens on the socket
  Child tenant;
  const auto start = std::chrono::steady_clock::now();
  StartTenant(&tenant);
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
  EXPECT_EQ(ListedIdentity(), "shop/liar/wrong");
  EXPECT_NE(DaemonLog().find("keeping the tenant's own claim"), std::string::npos) << DaemonLog();
}

TEST_F(PodResourcesTest, AKubeletSlowerThanTheDeadlineKeepsTheClaim) {
  kubelet_.delay = std::chrono::milliseconds(3000);
  StartKubelet();
  StartDaemonWithKubelet();
  Child tenant;
  StartTenant(&tenant);
  EXPECT_EQ(ListedIdentity(), "shop/liar/wrong");
  EXPECT_NE(DaemonLog().find("Deadline"), std::string::npos) << DaemonLog();
}

}  // namespace
}  // namespace missile::process_test
