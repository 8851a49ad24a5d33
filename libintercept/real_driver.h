// Finding and loading the real CUDA driver from inside the shim.
//
// libmissile.so carries the SONAME libcuda.so.1, so once it is preloaded every
// dlopen("libcuda.so.1") and every DT_NEEDED on libcuda.so.1 in the process binds to the shim.
// The real driver is therefore opened by its full path. Candidates, in order:
// MISSILE_REAL_LIBCUDA if set (and nothing else), then libcuda.so.1 in each LD_LIBRARY_PATH
// directory, the usual system directories, and the paths the dynamic linker's cache
// (/etc/ld.so.cache) lists. The shim's own file and the CUDA toolkit's stub are skipped.
// Thread-safety: the functions are reentrant; the shim calls OpenRealDriver once.
#ifndef MISSILE_LIBINTERCEPT_REAL_DRIVER_H_
#define MISSILE_LIBINTERCEPT_REAL_DRIVER_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace missile::shim {

// Candidate paths for the real libcuda.so.1, without duplicates, in search order.
std::vector<std::string> DriverCandidates(const std::string& explicit_path,
                                          const char* ld_library_path,
                                          std::string_view ld_cache_contents);

struct RealDriver {
  void* handle = nullptr;
  std::string path;
};

// Opens the first candidate that is not the shim itself (`self` is any address inside the
// shim) and not a toolkit stub. The error lists what was tried.
absl::StatusOr<RealDriver> OpenRealDriver(const std::string& explicit_path, const void* self);

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_REAL_DRIVER_H_
