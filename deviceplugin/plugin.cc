#include "plugin.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <optional>

#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "service.h"
#include "spdlog/sinks/stdout_sinks.h"
#include "spdlog/spdlog.h"

namespace missile::deviceplugin {

namespace {

// A Register call that takes longer than this counts as failed (tried again next poll).
constexpr std::chrono::seconds kRegisterDeadline{5};
// Streams still open this long after Stop are cut by gRPC.
constexpr std::chrono::seconds kShutdownGrace{1};

spdlog::logger& Log() {
  static auto* logger = [] {
    auto* l = new spdlog::logger("missile-device-plugin",
                                 std::make_shared<spdlog::sinks::stderr_sink_mt>());
    l->set_pattern("missile-device-plugin %l: %v");
    return l;
  }();
  return *logger;
}

std::string SocketPath(const PluginConfig& config, const ClassResource& resource) {
  return config.kubelet_dir + "/" + resource.endpoint;
}

}  // namespace

DevicePlugin::DevicePlugin(PluginConfig config, std::unique_ptr<GpuSource> gpus)
    : config_(std::move(config)),
      gpus_(std::move(gpus)),
      state_(std::make_shared<PluginState>(config_.failures_before_unhealthy)) {}

DevicePlugin::~DevicePlugin() { Stop(); }

absl::Status DevicePlugin::Start() {
  struct stat st;
  if (stat(config_.kubelet_dir.c_str(), &st) != 0 || !S_ISDIR(st.st_mode)) {
    return absl::FailedPreconditionError(
        absl::StrCat("the kubelet's device plugin directory ", config_.kubelet_dir,
                     " is missing (is this a Kubernetes node? see --kubelet-dir)"));
  }
  poller_ = std::thread([this] { PollLoop(); });
  return absl::OkStatus();
}

void DevicePlugin::Stop() {
  {
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    stopping_ = true;
  }
  state_->Stop();
  if (poller_.joinable()) poller_.join();
  absl::MutexLock lock(&mu_);
  ShutdownAll();
}

void DevicePlugin::PollLoop() {
  std::optional<bool> answered_before;  // logs the first outcome, then each change
  while (true) {
    absl::StatusOr<std::vector<GpuRef>> gpus = gpus_->ListGpus();
    if (answered_before != gpus.ok()) {
      if (gpus.ok()) {
        Log().info("missiled answers: {} GPU(s)", gpus->size());
      } else {
        Log().warn("{}", std::string(gpus.status().message()));
      }
      answered_before = gpus.ok();
    }
    if (state_->Observe(gpus)) {
      const StateSnapshot now = state_->Snapshot();
      Log().info("devices {} ({} GPU(s))", now.healthy ? kHealthy : kUnhealthy, now.gpus.size());
    }
    absl::MutexLock lock(&mu_);
    if (stopping_) return;
    CheckKubelet();
    mu_.AwaitWithTimeout(absl::Condition(&stopping_), absl::FromChrono(config_.poll_interval));
    if (stopping_) return;
  }
}

void DevicePlugin::CheckKubelet() {
  struct stat st;
  if (stat(config_.KubeletSocket().c_str(), &st) != 0 || !S_ISSOCK(st.st_mode)) {
    if (registered_) Log().warn("{} is gone: waiting for the kubelet", config_.KubeletSocket());
    registered_ = false;
    return;
  }
  const FileId kubelet{st.st_dev, st.st_ino};
  if (registered_ && kubelet == kubelet_id_ && SocketsPresent()) return;
  if (registered_) Log().info("the kubelet restarted: serving and registering again");
  ShutdownAll();
  if (absl::Status s = ServeAll(); !s.ok()) {
    Log().error("{}", std::string(s.message()));
    ShutdownAll();
    return;
  }
  if (absl::Status s = RegisterAll(); !s.ok()) {
    Log().warn("{} (trying again)", std::string(s.message()));
    ShutdownAll();
    return;
  }
  registered_ = true;
  kubelet_id_ = kubelet;
  registrations_.fetch_add(1);
}

absl::Status DevicePlugin::ServeAll() {
  for (const ClassResource& resource : config_.Resources()) {
    const std::string path = SocketPath(config_, resource);
    if (unlink(path.c_str()) != 0 && errno != ENOENT) {
      return absl::InternalError(absl::StrCat("cannot remove the old socket ", path, ": ",
                                              std::strerror(errno)));
    }
    Endpoint endpoint{resource, std::make_unique<DevicePluginService>(config_, resource, state_),
                      nullptr};
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + path, grpc::InsecureServerCredentials());
    builder.RegisterService(endpoint.service.get());
    endpoint.server = builder.BuildAndStart();
    if (endpoint.server == nullptr) {
      return absl::UnavailableError(absl::StrCat("cannot serve ", resource.resource, " on ", path));
    }
    endpoints_.push_back(std::move(endpoint));
  }
  return absl::OkStatus();
}

void DevicePlugin::ShutdownAll() {
  for (Endpoint& endpoint : endpoints_) {
    endpoint.server->Shutdown(std::chrono::system_clock::now() + kShutdownGrace);
    endpoint.server->Wait();
    unlink(SocketPath(config_, endpoint.resource).c_str());
  }
  endpoints_.clear();
}

absl::Status DevicePlugin::RegisterAll() {
  auto stub = v1beta1::Registration::NewStub(grpc::CreateChannel(
      "unix:" + config_.KubeletSocket(), grpc::InsecureChannelCredentials()));
  for (const Endpoint& endpoint : endpoints_) {
    v1beta1::RegisterRequest request;
    request.set_version(kApiVersion);
    request.set_endpoint(endpoint.resource.endpoint);
    request.set_resource_name(endpoint.resource.resource);
    *request.mutable_options() = PluginOptions();
    grpc::ClientContext context;
    context.set_deadline(std::chrono::system_clock::now() + kRegisterDeadline);
    v1beta1::Empty reply;
    grpc::Status status = stub->Register(&context, request, &reply);
    if (!status.ok()) {
      return absl::UnavailableError(absl::StrCat("the kubelet refused ", endpoint.resource.resource,
                                                 ": ", status.error_message()));
    }
    Log().info("registered {} on {}", endpoint.resource.resource,
               SocketPath(config_, endpoint.resource));
  }
  return absl::OkStatus();
}

bool DevicePlugin::SocketsPresent() const {
  struct stat st;
  for (const Endpoint& endpoint : endpoints_) {
    if (stat(SocketPath(config_, endpoint.resource).c_str(), &st) != 0) return false;
  }
  return true;
}

}  // namespace missile::deviceplugin
