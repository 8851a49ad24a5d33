// The DevicePlugin gRPC service of one resource (missile.io/ls or missile.io/be). It only
// translates between the API's messages and the plain logic: the slot inventory (slots.h),
// allocation (allocation.h) and the shared state (plugin_state.h).
// Thread safety: gRPC calls the methods from its own threads, concurrently; the service holds
// no mutable state of its own.
#ifndef MISSILE_DEVICEPLUGIN_SERVICE_H_
#define MISSILE_DEVICEPLUGIN_SERVICE_H_

#include <memory>

#include "deviceplugin/v1beta1/api.grpc.pb.h"
#include "plugin_config.h"
#include "plugin_state.h"

namespace missile::deviceplugin {

// The device list of `resource` for a snapshot: every slot, with the snapshot's health.
// Empty when missiled has never answered or its GPU list does not make valid slots.
v1beta1::ListAndWatchResponse DeviceList(const ClassResource& resource,
                                         const StateSnapshot& snapshot);

// The options the plugin registers with and answers GetDevicePluginOptions with.
v1beta1::DevicePluginOptions PluginOptions();

class DevicePluginService final : public v1beta1::DevicePlugin::Service {
 public:
  // `config` and `state` must outlive the service.
  DevicePluginService(const PluginConfig& config, ClassResource resource,
                      std::shared_ptr<PluginState> state)
      : config_(config), resource_(std::move(resource)), state_(std::move(state)) {}

  grpc::Status GetDevicePluginOptions(grpc::ServerContext* context, const v1beta1::Empty* request,
                                      v1beta1::DevicePluginOptions* response) override;
  // Sends the list, then a new one after each change, until the kubelet goes or the plugin
  // stops.
  grpc::Status ListAndWatch(grpc::ServerContext* context, const v1beta1::Empty* request,
                            grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) override;
  grpc::Status GetPreferredAllocation(grpc::ServerContext* context,
                                      const v1beta1::PreferredAllocationRequest* request,
                                      v1beta1::PreferredAllocationResponse* response) override;
  grpc::Status Allocate(grpc::ServerContext* context, const v1beta1::AllocateRequest* request,
                        v1beta1::AllocateResponse* response) override;
  grpc::Status PreStartContainer(grpc::ServerContext* context,
                                 const v1beta1::PreStartContainerRequest* request,
                                 v1beta1::PreStartContainerResponse* response) override;

 private:
  // The current slots; FAILED_PRECONDITION while missiled has never answered.
  absl::StatusOr<std::vector<Slot>> CurrentSlots() const;

  const PluginConfig& config_;
  const ClassResource resource_;
  const std::shared_ptr<PluginState> state_;
};

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_SERVICE_H_
