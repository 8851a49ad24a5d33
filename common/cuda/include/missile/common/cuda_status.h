// The one conversion of a driver API CUresult to an absl::Status, for the daemon and the
// calibration tool (the shim keeps its own, at the hook edge, without Abseil's status codes).
// Thread safety: a pure function of its arguments and the driver's error tables.
#ifndef MISSILE_COMMON_CUDA_STATUS_H_
#define MISSILE_COMMON_CUDA_STATUS_H_

#include <cuda.h>

#include <string_view>

#include "absl/status/status.h"

namespace missile {

struct CudaStatusOptions {
  // Adds the driver's description of the error: "cuInit failed: CUDA_ERROR_NO_DEVICE (no
  // CUDA-capable device is detected)" rather than "cuInit failed: CUDA_ERROR_NO_DEVICE (100)".
  bool describe = false;
  // Names CUDA_ERROR_STUB_LIBRARY, which the toolkit's stub libcuda cannot name itself, and says
  // what it means (a tool run on a machine without a driver).
  bool name_stub_library = false;
  // Errors that mean "no usable GPU or driver here" (no device, stub library, driver mismatch,
  // device unavailable, ...) become UNAVAILABLE rather than INTERNAL.
  bool unavailable_when_no_gpu = false;
};

// `what` failed with `r` (not CUDA_SUCCESS): RESOURCE_EXHAUSTED for out of memory, INTERNAL
// otherwise, unless the options say more. The message starts "<what> failed: ".
absl::Status CudaStatus(std::string_view what, CUresult r, const CudaStatusOptions& options = {});

}  // namespace missile

#endif  // MISSILE_COMMON_CUDA_STATUS_H_
