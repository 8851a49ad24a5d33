#include "cuda_loader.h"

#include <cuda.h>
#include <dlfcn.h>

#include <mutex>
#include <string>

namespace missile::daemon {
namespace {

// Every driver entry point missiled calls: name, parameters, arguments. A name that cuda.h
// maps to a versioned symbol (cuDeviceTotalMem -> cuDeviceTotalMem_v2) is written unversioned:
// the macro renames the definition below and the symbol looked up alike, so the daemon gets the
// same ABI variant it would get by linking the driver. A call added to the daemon without a row
// here fails to link.
#define MISSILE_CUDA_ENTRY_POINTS(X)                                                            \
  X(cuInit, (unsigned int flags), (flags))                                                       \
  X(cuGetErrorName, (CUresult error, const char** name), (error, name))                          \
  X(cuGetErrorString, (CUresult error, const char** text), (error, text))                        \
  X(cuDeviceGetCount, (int* count), (count))                                                     \
  X(cuDeviceGet, (CUdevice * device, int ordinal), (device, ordinal))                            \
  X(cuDeviceGetAttribute, (int* value, CUdevice_attribute attribute, CUdevice device),           \
    (value, attribute, device))                                                                  \
  X(cuDeviceGetName, (char* name, int len, CUdevice device), (name, len, device))                \
  X(cuDeviceGetUuid, (CUuuid * uuid, CUdevice device), (uuid, device))                           \
  X(cuDeviceTotalMem, (size_t * bytes, CUdevice device), (bytes, device))                        \
  X(cuDevicePrimaryCtxRetain, (CUcontext * context, CUdevice device), (context, device))         \
  X(cuDevicePrimaryCtxRelease, (CUdevice device), (device))                                      \
  X(cuCtxSetCurrent, (CUcontext context), (context))                                             \
  X(cuMemGetAllocationGranularity,                                                               \
    (size_t * granularity, const CUmemAllocationProp* prop,                                      \
     CUmemAllocationGranularity_flags option),                                                   \
    (granularity, prop, option))                                                                 \
  X(cuMemCreate,                                                                                 \
    (CUmemGenericAllocationHandle * handle, size_t size, const CUmemAllocationProp* prop,        \
     unsigned long long flags),                                                                  \
    (handle, size, prop, flags))                                                                 \
  X(cuMemRelease, (CUmemGenericAllocationHandle handle), (handle))                               \
  X(cuMemExportToShareableHandle,                                                                \
    (void* shareable, CUmemGenericAllocationHandle handle, CUmemAllocationHandleType type,       \
     unsigned long long flags),                                                                  \
    (shareable, handle, type, flags))                                                            \
  X(cuMemAddressReserve,                                                                         \
    (CUdeviceptr * ptr, size_t size, size_t alignment, CUdeviceptr addr,                         \
     unsigned long long flags),                                                                  \
    (ptr, size, alignment, addr, flags))                                                         \
  X(cuMemAddressFree, (CUdeviceptr ptr, size_t size), (ptr, size))                               \
  X(cuMemMap,                                                                                    \
    (CUdeviceptr ptr, size_t size, size_t offset, CUmemGenericAllocationHandle handle,           \
     unsigned long long flags),                                                                  \
    (ptr, size, offset, handle, flags))                                                          \
  X(cuMemUnmap, (CUdeviceptr ptr, size_t size), (ptr, size))                                     \
  X(cuMemSetAccess, (CUdeviceptr ptr, size_t size, const CUmemAccessDesc* desc, size_t count),   \
    (ptr, size, desc, count))                                                                    \
  X(cuMemsetD8Async, (CUdeviceptr dst, unsigned char value, size_t n, CUstream stream),          \
    (dst, value, n, stream))                                                                     \
  X(cuStreamCreate, (CUstream * stream, unsigned int flags), (stream, flags))                    \
  X(cuStreamSynchronize, (CUstream stream), (stream))                                            \
  X(cuStreamDestroy, (CUstream stream), (stream))

// The symbol name after cuda.h's renaming: "cuDeviceTotalMem_v2".
#define MISSILE_SYMBOL_NAME(name) MISSILE_SYMBOL_TEXT(name)
#define MISSILE_SYMBOL_TEXT(name) #name

struct DriverTable {
#define MISSILE_TABLE_SLOT(name, params, args) decltype(&::name) name = nullptr;
  MISSILE_CUDA_ENTRY_POINTS(MISSILE_TABLE_SLOT)
#undef MISSILE_TABLE_SLOT
};

// Written once by LoadCudaDriver (under call_once), read by the entry points afterwards.
DriverTable g_driver;

absl::Status Load() {
  // The library stays loaded until the process exits: the daemon's devices use it to the end.
  // RTLD_GLOBAL, as if linked: the daemon looks up the test double's extra entry points with
  // dlsym(RTLD_DEFAULT) (gpu_open.cc). Nothing in missiled is exported for the driver to bind
  // to instead of its own functions: the executable exports no cu* symbol.
  void* lib = dlopen(kCudaDriverLibrary, RTLD_NOW | RTLD_GLOBAL);
  if (lib == nullptr) {
    const char* why = dlerror();
    return absl::FailedPreconditionError(
        std::string("cannot load the CUDA driver (") + (why != nullptr ? why : kCudaDriverLibrary) +
        "): missiled needs the NVIDIA driver to serve");
  }
  DriverTable table;
#define MISSILE_RESOLVE(name, params, args)                                                     \
  table.name = reinterpret_cast<decltype(&::name)>(dlsym(lib, MISSILE_SYMBOL_NAME(name)));      \
  if (table.name == nullptr) {                                                                   \
    return absl::FailedPreconditionError(std::string("the CUDA driver ") + kCudaDriverLibrary + \
                                         " lacks " MISSILE_SYMBOL_NAME(name) ": too old?");      \
  }
  MISSILE_CUDA_ENTRY_POINTS(MISSILE_RESOLVE)
#undef MISSILE_RESOLVE
  g_driver = table;
  return absl::OkStatus();
}

}  // namespace

absl::Status LoadCudaDriver() {
  static std::once_flag once;
  static absl::Status result;
  std::call_once(once, [] { result = Load(); });
  return result;
}

}  // namespace missile::daemon

// The entry points, with cuda.h's declarations (a signature that differs from the header does
// not compile).
#define MISSILE_FORWARD(name, params, args)                                                     \
  extern "C" CUresult CUDAAPI name params {                                                     \
    auto* fn = missile::daemon::g_driver.name;                                                   \
    return fn == nullptr ? CUDA_ERROR_NOT_INITIALIZED : fn args;                                 \
  }
MISSILE_CUDA_ENTRY_POINTS(MISSILE_FORWARD)
#undef MISSILE_FORWARD
