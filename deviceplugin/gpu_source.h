// Where the plugin learns the node's GPUs: missiled's Admin.Status call over its Unix socket
// (the plugin needs no libcuda). A call that fails or passes its deadline counts as missiled
// not answering.
// Thread safety: ListGpus may be called from any thread; calls do not share state beyond the
// gRPC channel, which is thread-safe.
#ifndef MISSILE_DEVICEPLUGIN_GPU_SOURCE_H_
#define MISSILE_DEVICEPLUGIN_GPU_SOURCE_H_

#include <chrono>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "slots.h"

namespace missile::deviceplugin {

class GpuSource {
 public:
  virtual ~GpuSource() = default;
  // The GPUs in the daemon's order; UNAVAILABLE (with the reason) when it does not answer.
  virtual absl::StatusOr<std::vector<GpuRef>> ListGpus() = 0;
};

// Asks missiled at `socket` with a deadline of `timeout` per call.
std::unique_ptr<GpuSource> MakeMissiledGpuSource(const std::string& socket,
                                                 std::chrono::milliseconds timeout);

}  // namespace missile::deviceplugin

#endif  // MISSILE_DEVICEPLUGIN_GPU_SOURCE_H_
