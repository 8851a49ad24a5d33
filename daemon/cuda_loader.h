// The CUDA driver, loaded when missiled serves rather than when it starts.
//
// missiled does not link libcuda.so.1: `--help`, `--version` and `--check-config` work on a
// machine without the NVIDIA driver (a build host, a node being provisioned). The driver entry
// points the daemon calls are defined in cuda_loader.cc with the signatures of cuda.h; each
// forwards to the driver's own function, found with dlopen/dlsym by LoadCudaDriver. Before a
// successful LoadCudaDriver every one of them returns CUDA_ERROR_NOT_INITIALIZED.
//
// Thread safety: LoadCudaDriver may be called from any thread, any number of times (the first
// call loads, later ones return its result). Call it before starting the threads that use the
// driver; the entry points only read the table it filled.
#ifndef MISSILE_DAEMON_CUDA_LOADER_H_
#define MISSILE_DAEMON_CUDA_LOADER_H_

#include "absl/status/status.h"

namespace missile::daemon {

// The driver library missiled loads; found the way the dynamic loader finds libraries
// (LD_LIBRARY_PATH, the ld.so cache, the default directories).
inline constexpr char kCudaDriverLibrary[] = "libcuda.so.1";

// Loads kCudaDriverLibrary and resolves every entry point the daemon uses. FAILED_PRECONDITION
// naming the library and the loader's reason when the library cannot be loaded or lacks one
// of them (a driver too old for the VMM calls).
absl::Status LoadCudaDriver();

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_CUDA_LOADER_H_
