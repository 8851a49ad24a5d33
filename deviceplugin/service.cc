#include "service.h"

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "allocation.h"

namespace missile::deviceplugin {

namespace {

// How often a waiting ListAndWatch looks whether the kubelet hung up.
constexpr std::chrono::milliseconds kStreamCheck{200};

grpc::Status ToGrpc(const absl::Status& status) {
  grpc::StatusCode code = grpc::StatusCode::UNKNOWN;
  switch (status.code()) {
    case absl::StatusCode::kInvalidArgument:
      code = grpc::StatusCode::INVALID_ARGUMENT;
      break;
    case absl::StatusCode::kFailedPrecondition:
      code = grpc::StatusCode::FAILED_PRECONDITION;
      break;
    case absl::StatusCode::kUnavailable:
      code = grpc::StatusCode::UNAVAILABLE;
      break;
    default:
      break;
  }
  return grpc::Status(code, std::string(status.message()));
}

}  // namespace

v1beta1::ListAndWatchResponse DeviceList(const ClassResource& resource,
                                         const StateSnapshot& snapshot) {
  v1beta1::ListAndWatchResponse out;
  if (!snapshot.known) return out;
  absl::StatusOr<std::vector<Slot>> slots =
      BuildSlots(snapshot.gpus, resource.cls, resource.slots_per_gpu);
  if (!slots.ok()) return out;
  for (const Slot& slot : *slots) {
    v1beta1::Device* device = out.add_devices();
    device->set_id(slot.id);
    device->set_health(snapshot.healthy ? kHealthy : kUnhealthy);
  }
  return out;
}

v1beta1::DevicePluginOptions PluginOptions() {
  v1beta1::DevicePluginOptions options;
  options.set_pre_start_required(false);
  options.set_get_preferred_allocation_available(true);
  return options;
}

absl::StatusOr<std::vector<Slot>> DevicePluginService::CurrentSlots() const {
  StateSnapshot snapshot = state_->Snapshot();
  if (!snapshot.known) {
    return absl::FailedPreconditionError("missiled has not reported its GPUs yet");
  }
  return BuildSlots(snapshot.gpus, resource_.cls, resource_.slots_per_gpu);
}

grpc::Status DevicePluginService::GetDevicePluginOptions(grpc::ServerContext*,
                                                         const v1beta1::Empty*,
                                                         v1beta1::DevicePluginOptions* response) {
  *response = PluginOptions();
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::ListAndWatch(
    grpc::ServerContext* context, const v1beta1::Empty*,
    grpc::ServerWriter<v1beta1::ListAndWatchResponse>* writer) {
  StateSnapshot snapshot = state_->Snapshot();
  if (!writer->Write(DeviceList(resource_, snapshot))) return grpc::Status::OK;
  while (!context->IsCancelled() && !state_->stopped()) {
    StateSnapshot next = state_->WaitForChange(snapshot.generation, kStreamCheck);
    if (next.generation == snapshot.generation) continue;
    snapshot = std::move(next);
    if (!writer->Write(DeviceList(resource_, snapshot))) break;
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::GetPreferredAllocation(
    grpc::ServerContext*, const v1beta1::PreferredAllocationRequest* request,
    v1beta1::PreferredAllocationResponse* response) {
  absl::StatusOr<std::vector<Slot>> slots = CurrentSlots();
  if (!slots.ok()) return ToGrpc(slots.status());
  for (const v1beta1::ContainerPreferredAllocationRequest& req : request->container_requests()) {
    absl::StatusOr<std::vector<std::string>> chosen = PreferSlots(
        *slots, {req.available_deviceids().begin(), req.available_deviceids().end()},
        {req.must_include_deviceids().begin(), req.must_include_deviceids().end()},
        req.allocation_size());
    if (!chosen.ok()) return ToGrpc(chosen.status());
    auto* out = response->add_container_responses();
    for (const std::string& id : *chosen) out->add_deviceids(id);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::Allocate(grpc::ServerContext*,
                                           const v1beta1::AllocateRequest* request,
                                           v1beta1::AllocateResponse* response) {
  absl::StatusOr<std::vector<Slot>> slots = CurrentSlots();
  if (!slots.ok()) return ToGrpc(slots.status());
  for (const v1beta1::ContainerAllocateRequest& req : request->container_requests()) {
    absl::StatusOr<v1beta1::ContainerAllocateResponse> container = BuildAllocation(
        config_, resource_, *slots, {req.devices_ids().begin(), req.devices_ids().end()});
    if (!container.ok()) return ToGrpc(container.status());
    *response->add_container_responses() = std::move(*container);
  }
  return grpc::Status::OK;
}

grpc::Status DevicePluginService::PreStartContainer(grpc::ServerContext*,
                                                    const v1beta1::PreStartContainerRequest*,
                                                    v1beta1::PreStartContainerResponse*) {
  return grpc::Status::OK;
}

}  // namespace missile::deviceplugin
