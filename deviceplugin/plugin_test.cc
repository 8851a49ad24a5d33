// missile-device-plugin as a kubelet sees it: a fake kubelet serving Registration on a
// temporary directory's kubelet.sock records the Register calls, then dials the plugin's
// sockets and calls DevicePlugin as the kubelet would. A fake missiled serves Admin.Status with
// two GPUs, and stops and starts again to drive the devices' health. At the end, the built
// executable's --help, --version and errors.
#include <stdlib.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <functional>
#include <thread>
#include <tuple>

#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "gmock/gmock.h"
#include "grpcpp/grpcpp.h"
#include "gtest/gtest.h"
#include "missile/v1/missile.grpc.pb.h"
#include "missile/version.h"
#include "plugin.h"

namespace missile::deviceplugin {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// Bounds on waiting for something that should happen within a second or two; reaching one
// fails the test instead of hanging it.
constexpr absl::Duration kPatience = absl::Seconds(30);

const std::string kUuid0 = "GPU-00000000-1111-2222-3333-444444444444";
const std::string kUuid1 = "GPU-55555555-6666-7777-8888-999999999999";

bool WaitUntil(const std::function<bool()>& done) {
  const absl::Time deadline = absl::Now() + kPatience;
  while (!done()) {
    if (absl::Now() > deadline) return false;
    absl::SleepFor(absl::Milliseconds(10));
  }
  return true;
}

bool Exists(const std::string& path) {
  struct stat st;
  return stat(path.c_str(), &st) == 0;
}

// Registration, as the kubelet serves it.
class FakeKubelet final : public v1beta1::Registration::Service {
 public:
  explicit FakeKubelet(std::string dir) : dir_(std::move(dir)) {}
  ~FakeKubelet() override { Stop(); }

  void Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + dir_ + "/kubelet.sock", grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  // A kubelet going away: its socket goes.
  void Stop() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
    std::filesystem::remove(dir_ + "/kubelet.sock");
  }
  // A kubelet restarting: it removes every plugin socket, then serves a new kubelet.sock.
  void Restart() {
    Stop();
    for (const auto& entry : std::filesystem::directory_iterator(dir_)) {
      std::filesystem::remove(entry.path());
    }
    Start();
  }

  grpc::Status Register(grpc::ServerContext*, const v1beta1::RegisterRequest* request,
                        v1beta1::Empty*) override {
    absl::MutexLock lock(&mu_);
    requests_.push_back(*request);
    return grpc::Status::OK;
  }

  std::vector<v1beta1::RegisterRequest> requests() {
    absl::MutexLock lock(&mu_);
    return requests_;
  }

  // The DevicePlugin stub of an endpoint, as the kubelet dials it.
  std::unique_ptr<v1beta1::DevicePlugin::Stub> Dial(const std::string& endpoint) {
    return v1beta1::DevicePlugin::NewStub(
        grpc::CreateChannel("unix:" + dir_ + "/" + endpoint, grpc::InsecureChannelCredentials()));
  }

 private:
  const std::string dir_;
  std::unique_ptr<grpc::Server> server_;
  absl::Mutex mu_;
  std::vector<v1beta1::RegisterRequest> requests_ ABSL_GUARDED_BY(mu_);
};

// missiled's Admin.Status with two GPUs.
class FakeMissiled final : public v1::Admin::Service {
 public:
  explicit FakeMissiled(std::string socket) : socket_(std::move(socket)) {}
  ~FakeMissiled() override { Stop(); }

  void Start() {
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(this);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void Stop() {
    if (server_ == nullptr) return;
    server_->Shutdown(std::chrono::system_clock::now());
    server_->Wait();
    server_.reset();
    std::filesystem::remove(socket_);
  }

  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*,
                      v1::StatusResponse* response) override {
    for (uint32_t i = 0; i < 2; ++i) {
      v1::PoolStatus* pool = response->add_pools();
      pool->set_capacity_bytes(i == 0 ? 40 * kGiB : 80 * kGiB);
      v1::GpuInfo* gpu = pool->mutable_gpu();
      gpu->set_index(i);
      gpu->set_uuid(i == 0 ? kUuid0 : kUuid1);
    }
    return grpc::Status::OK;
  }

 private:
  const std::string socket_;
  std::unique_ptr<grpc::Server> server_;
};

class DevicePluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char pattern[] = "/tmp/missile-dp-XXXXXX";
    ASSERT_NE(mkdtemp(pattern), nullptr);
    root_ = pattern;
    kubelet_dir_ = root_ + "/device-plugins";
    std::filesystem::create_directory(kubelet_dir_);
    config_.kubelet_dir = kubelet_dir_;
    config_.missiled_socket = root_ + "/missiled.sock";
    config_.device_root = root_ + "/dev";
    config_.ls.slots_per_gpu = 2;
    config_.be.slots_per_gpu = 3;
    config_.poll_interval = std::chrono::milliseconds(20);
    config_.failures_before_unhealthy = 1;
    kubelet_ = std::make_unique<FakeKubelet>(kubelet_dir_);
    missiled_ = std::make_unique<FakeMissiled>(config_.missiled_socket);
  }
  void TearDown() override {
    plugin_.reset();
    kubelet_.reset();
    missiled_.reset();
    std::filesystem::remove_all(root_);
  }

  void StartPlugin() {
    plugin_ = std::make_unique<DevicePlugin>(
        config_, MakeMissiledGpuSource(config_.missiled_socket, std::chrono::seconds(2)));
    ASSERT_TRUE(plugin_->Start().ok());
  }
  // Starts all three and waits for the plugin's first registration of both resources.
  void StartAll() {
    missiled_->Start();
    kubelet_->Start();
    StartPlugin();
    ASSERT_TRUE(WaitUntil([&] { return kubelet_->requests().size() >= 2; }));
  }

  std::string root_, kubelet_dir_;
  PluginConfig config_;
  std::unique_ptr<FakeKubelet> kubelet_;
  std::unique_ptr<FakeMissiled> missiled_;
  std::unique_ptr<DevicePlugin> plugin_;
};

std::vector<std::string> Ids(const v1beta1::ListAndWatchResponse& r) {
  std::vector<std::string> out;
  for (const auto& d : r.devices()) out.push_back(d.id());
  return out;
}

bool AllHealth(const v1beta1::ListAndWatchResponse& r, const std::string& health) {
  for (const auto& d : r.devices()) {
    if (d.health() != health) return false;
  }
  return r.devices_size() > 0;
}

TEST_F(DevicePluginTest, RegistersEachResourceWithItsOwnEndpoint) {
  StartAll();
  std::vector<v1beta1::RegisterRequest> requests = kubelet_->requests();
  ASSERT_EQ(requests.size(), 2u);
  EXPECT_EQ(requests[0].version(), "v1beta1");
  EXPECT_EQ(requests[0].resource_name(), "missile.io/ls");
  EXPECT_EQ(requests[0].endpoint(), "missile-ls.sock");
  EXPECT_EQ(requests[1].version(), "v1beta1");
  EXPECT_EQ(requests[1].resource_name(), "missile.io/be");
  EXPECT_EQ(requests[1].endpoint(), "missile-be.sock");
  for (const auto& r : requests) {
    EXPECT_TRUE(r.options().get_preferred_allocation_available());
    EXPECT_FALSE(r.options().pre_start_required());
    EXPECT_TRUE(Exists(kubelet_dir_ + "/" + r.endpoint()));
  }
  grpc::ClientContext context;
  v1beta1::DevicePluginOptions options;
  ASSERT_TRUE(kubelet_->Dial("missile-be.sock")
                  ->GetDevicePluginOptions(&context, v1beta1::Empty(), &options)
                  .ok());
  EXPECT_TRUE(options.get_preferred_allocation_available());
  grpc::ClientContext pre_context;
  v1beta1::PreStartContainerRequest pre;
  v1beta1::PreStartContainerResponse pre_response;
  EXPECT_TRUE(kubelet_->Dial("missile-be.sock")
                  ->PreStartContainer(&pre_context, pre, &pre_response)
                  .ok());
}

TEST_F(DevicePluginTest, ListAndWatchFollowsMissiledsHealth) {
  StartAll();
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
  auto stub = kubelet_->Dial("missile-ls.sock");
  auto stream = stub->ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  EXPECT_THAT(Ids(list), ElementsAre(kUuid0 + "-ls-0", kUuid0 + "-ls-1", kUuid1 + "-ls-0",
                                     kUuid1 + "-ls-1"));
  EXPECT_TRUE(AllHealth(list, "Healthy"));

  missiled_->Stop();
  ASSERT_TRUE(stream->Read(&list));
  EXPECT_EQ(list.devices_size(), 4);
  EXPECT_TRUE(AllHealth(list, "Unhealthy"));

  missiled_->Start();
  ASSERT_TRUE(stream->Read(&list));
  EXPECT_EQ(list.devices_size(), 4);
  EXPECT_TRUE(AllHealth(list, "Healthy"));
  context.TryCancel();
}

TEST_F(DevicePluginTest, AllocateMakesTheContainerATenant) {
  StartAll();
  grpc::ClientContext context;
  v1beta1::AllocateRequest request;
  request.add_container_requests()->add_devices_ids(kUuid1 + "-be-2");
  v1beta1::AllocateResponse response;
  grpc::Status status = kubelet_->Dial("missile-be.sock")->Allocate(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.container_responses_size(), 1);
  const v1beta1::ContainerAllocateResponse& c = response.container_responses(0);
  EXPECT_EQ(c.envs().at("LD_PRELOAD"), "/opt/missile/shim/libmissile.so");
  EXPECT_EQ(c.envs().at("MISSILE_TENANT_CLASS"), "be");
  EXPECT_EQ(c.envs().at("MISSILE_QUOTA"), "8GiB");
  EXPECT_EQ(c.envs().at("MISSILE_SOCKET"), "/run/missile/missiled.sock");
  EXPECT_EQ(c.envs().at("MISSILE_K8S_DEVICES"), kUuid1 + "-be-2");
  ASSERT_EQ(c.mounts_size(), 2);
  EXPECT_EQ(c.mounts(0).host_path(), "/opt/missile/shim");
  EXPECT_TRUE(c.mounts(0).read_only());
  EXPECT_EQ(c.mounts(1).host_path(), "/run/missile");
  std::vector<std::string> hosts;
  for (const auto& d : c.devices()) hosts.push_back(d.host_path());
  const std::string dev = root_ + "/dev/";
  EXPECT_THAT(hosts, ElementsAre(dev + "nvidia1", dev + "nvidiactl", dev + "nvidia-uvm",
                                 dev + "nvidia-uvm-tools"));

  grpc::ClientContext bad_context;
  v1beta1::AllocateRequest bad;
  bad.add_container_requests()->add_devices_ids(kUuid1 + "-ls-0");  // another resource's
  status = kubelet_->Dial("missile-be.sock")->Allocate(&bad_context, bad, &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_THAT(status.error_message(), HasSubstr("unknown missile.io/be device"));
}

// The pool sizes come from missiled's status (40 GiB on GPU 0, 80 GiB on GPU 1).
TEST_F(DevicePluginTest, AllocateTakesAPercentageOfTheGpusPool) {
  config_.ls.quota_per_slot = SizeOrFraction::Fraction(0.25);
  StartAll();
  auto quota = [&](const std::string& id) {
    grpc::ClientContext context;
    v1beta1::AllocateRequest request;
    request.add_container_requests()->add_devices_ids(id);
    v1beta1::AllocateResponse response;
    grpc::Status status =
        kubelet_->Dial("missile-ls.sock")->Allocate(&context, request, &response);
    EXPECT_TRUE(status.ok()) << status.error_message();
    return status.ok() ? response.container_responses(0).envs().at("MISSILE_QUOTA") : "";
  };
  EXPECT_EQ(quota(kUuid0 + "-ls-1"), "10GiB");
  EXPECT_EQ(quota(kUuid1 + "-ls-0"), "20GiB");
}

TEST_F(DevicePluginTest, PrefersSlotsOnOneGpu) {
  StartAll();
  grpc::ClientContext context;
  v1beta1::PreferredAllocationRequest request;
  auto* req = request.add_container_requests();
  for (const std::string& id : {kUuid0 + "-be-0", kUuid1 + "-be-0", kUuid1 + "-be-2"}) {
    req->add_available_deviceids(id);
  }
  req->set_allocation_size(2);
  v1beta1::PreferredAllocationResponse response;
  grpc::Status status =
      kubelet_->Dial("missile-be.sock")->GetPreferredAllocation(&context, request, &response);
  ASSERT_TRUE(status.ok()) << status.error_message();
  ASSERT_EQ(response.container_responses_size(), 1);
  EXPECT_THAT(response.container_responses(0).deviceids(),
              ElementsAre(kUuid1 + "-be-0", kUuid1 + "-be-2"));

  grpc::ClientContext bad_context;
  req->set_allocation_size(4);
  status = kubelet_->Dial("missile-be.sock")->GetPreferredAllocation(&bad_context, request,
                                                                      &response);
  EXPECT_EQ(status.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
}

TEST_F(DevicePluginTest, RegistersAgainWhenTheKubeletRestarts) {
  StartAll();
  kubelet_->Restart();
  ASSERT_TRUE(WaitUntil([&] { return kubelet_->requests().size() >= 4; }));
  std::vector<v1beta1::RegisterRequest> requests = kubelet_->requests();
  EXPECT_EQ(requests[2].resource_name(), "missile.io/ls");
  EXPECT_EQ(requests[3].resource_name(), "missile.io/be");
  // The plugin serves again on new sockets.
  EXPECT_TRUE(Exists(kubelet_dir_ + "/missile-ls.sock"));
  grpc::ClientContext context;
  context.set_deadline(absl::ToChronoTime(absl::Now() + kPatience));
  auto stream = kubelet_->Dial("missile-be.sock")->ListAndWatch(&context, v1beta1::Empty());
  v1beta1::ListAndWatchResponse list;
  ASSERT_TRUE(stream->Read(&list));
  EXPECT_EQ(list.devices_size(), 6);
  context.TryCancel();
}

TEST_F(DevicePluginTest, WaitsForTheKubeletAndRegistersWhenItComes) {
  missiled_->Start();
  StartPlugin();
  absl::SleepFor(absl::Milliseconds(100));
  EXPECT_TRUE(kubelet_->requests().empty());
  kubelet_->Start();
  EXPECT_TRUE(WaitUntil([&] { return kubelet_->requests().size() >= 2; }));
}

TEST_F(DevicePluginTest, StartFailsWithoutTheKubeletDirectory) {
  config_.kubelet_dir = root_ + "/missing";
  DevicePlugin plugin(config_, MakeMissiledGpuSource(config_.missiled_socket,
                                                     std::chrono::seconds(1)));
  absl::Status status = plugin.Start();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(status.message()), HasSubstr("is missing"));
}

// Runs the executable with `args`; returns its exit status and output (stdout and stderr).
std::pair<int, std::string> RunPlugin(const std::string& args) {
  const std::string command = std::string(DEVICE_PLUGIN_BIN) + " " + args + " 2>&1";
  FILE* pipe = popen(command.c_str(), "r");
  if (pipe == nullptr) return {-1, ""};
  std::string out;
  char buf[512];
  size_t n;
  while ((n = fread(buf, 1, sizeof(buf), pipe)) > 0) out.append(buf, n);
  const int status = pclose(pipe);
  return {WIFEXITED(status) ? WEXITSTATUS(status) : -1, out};
}

TEST(DevicePluginToolTest, HelpVersionAndErrors) {
  auto [rc, out] = RunPlugin("--help");
  EXPECT_EQ(rc, 0);
  EXPECT_THAT(out, HasSubstr("usage: missile-device-plugin"));
  std::tie(rc, out) = RunPlugin("--version");
  EXPECT_EQ(rc, 0);
  EXPECT_EQ(out, std::string("missile-device-plugin ") + kVersion + "\n");
  std::tie(rc, out) = RunPlugin("--ls-slots lots");
  EXPECT_EQ(rc, 2);
  EXPECT_EQ(out, "missile-device-plugin: --ls-slots: 'lots' is not a whole number in 0..1000\n");
  std::tie(rc, out) = RunPlugin("--kubelet-dir /nonexistent/device-plugins");
  EXPECT_EQ(rc, 1);
  EXPECT_THAT(out, HasSubstr("/nonexistent/device-plugins is missing"));
}

}  // namespace
}  // namespace missile::deviceplugin
