// Opens the GPUs that missiled manages: a CudaDevice per configured ordinal, with its pool, copy
// arbiter and pacing domain set up as gpu_setup.h decides. The only part of GPU set-up that
// calls the driver (and looks for the driver test double's physical-address hook).
// Thread safety: call from one thread, at start-up.
#ifndef MISSILE_DAEMON_GPU_OPEN_H_
#define MISSILE_DAEMON_GPU_OPEN_H_

#include <vector>

#include "absl/status/statusor.h"
#include "daemon/config.h"
#include "gpu.h"

namespace missile::daemon {

// gpu.devices, or every device the driver reports; an error names the GPU that failed.
absl::StatusOr<std::vector<Gpu>> OpenGpus(const DaemonConfig& config);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_GPU_OPEN_H_
