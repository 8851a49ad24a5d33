// missile-device-plugin's running part: one DevicePlugin gRPC server per advertised resource,
// each on its own socket in the kubelet's plugin directory, registered with the kubelet; and a
// poller thread that, every poll interval,
//   - asks missiled for its GPUs and feeds the answer to the shared state (health, device
//     list; ListAndWatch streams send the change), and
//   - looks at the kubelet's socket and at the plugin's own sockets. The kubelet removes plugin
//     sockets when it starts and then creates kubelet.sock anew; when kubelet.sock is a new
//     file (another inode) or a plugin socket is gone, the plugin serves its endpoints afresh
//     on new sockets and registers again. A registration that fails is tried again at the next
//     poll.
// Thread safety: Start and Stop from one thread (the owner); the rest runs on the poller and
// gRPC threads.
#ifndef MISSILE_DEVICEPLUGIN_PLUGIN_H_
#define MISSILE_DEVICEPLUGIN_PLUGIN_H_

#include <sys/types.h>

#include <atomic>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "gpu_source.h"
#include "plugin_config.h"
#include "plugin_state.h"

namespace grpc {
class Server;
}

namespace missile::deviceplugin {

class DevicePluginService;

class DevicePlugin {
 public:
  DevicePlugin(PluginConfig config, std::unique_ptr<GpuSource> gpus);
  ~DevicePlugin();  // Stop()
  DevicePlugin(const DevicePlugin&) = delete;
  DevicePlugin& operator=(const DevicePlugin&) = delete;

  // Checks the kubelet directory, then starts the poller, which serves and registers as soon as
  // it can. FAILED_PRECONDITION when the directory is missing.
  absl::Status Start();
  // Stops serving, ends ListAndWatch streams, removes the plugin's sockets. Idempotent.
  void Stop();

  // How many times the plugin has registered successfully (all resources count as one).
  int registrations() const { return registrations_.load(); }
  const PluginState& state() const { return *state_; }

 private:
  struct Endpoint {
    ClassResource resource;
    std::unique_ptr<DevicePluginService> service;
    std::unique_ptr<grpc::Server> server;
  };
  // The identity of a file, to notice one removed and created again.
  struct FileId {
    dev_t dev = 0;
    ino_t ino = 0;
    bool operator==(const FileId&) const = default;
  };

  void PollLoop();
  // One round of the poller's kubelet work.
  void CheckKubelet() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status ServeAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ShutdownAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RegisterAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool SocketsPresent() const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const PluginConfig config_;
  const std::unique_ptr<GpuSource> gpus_;
  const std::shared_ptr<PluginState> state_;
  std::atomic<int> registrations_{0};

  absl::Mutex mu_;
  std::vector<Endpoint> endpoints_ ABSL_GUARDED_BY(mu_);
  bool registered_ ABSL_GUARDED_BY(mu_) = false;
  FileId kubelet_id_ ABSL_GUARDED_BY(mu_);  // kubelet.sock when last registered
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread poller_;
};

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_PLUGIN_H_
