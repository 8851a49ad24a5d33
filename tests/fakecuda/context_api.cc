// Entry points: initialisation, devices, primary and created contexts.

#include <cstring>

#include "entry_points.h"
#include "fake_state.h"

namespace fakecuda {
namespace {

constexpr int kDriverVersion = 13000;
constexpr char kDeviceName[] = "Fake GPU (missile test double)";

// The attributes the fake reports as non-zero. Values follow an H100/H200 (compute capability
// 9.0, 132 SMs with the default floorswept TPCs, tpcs.h) where the tests care; everything else
// reads 0.
int AttributeValue(CUdevice_attribute attrib) {
  switch (attrib) {
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR:
      return 9;
    case CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR:
      return 0;
    case CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT:
      return State().tpcs().sm_count();
    case CU_DEVICE_ATTRIBUTE_MPS_ENABLED:
      return State().config().mps ? 1 : 0;
    case CU_DEVICE_ATTRIBUTE_UNIFIED_ADDRESSING:
    case CU_DEVICE_ATTRIBUTE_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_MEMORY_POOLS_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_CAN_USE_HOST_POINTER_FOR_REGISTERED_MEM:
    // cuMemCreate with a host location works too.
    case CU_DEVICE_ATTRIBUTE_HOST_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
    case CU_DEVICE_ATTRIBUTE_HOST_NUMA_VIRTUAL_MEMORY_MANAGEMENT_SUPPORTED:
      return 1;
    default:
      return 0;
  }
}

CUresult CurrentContext(Context** ctx) { return State().contexts().Current(ctx); }

CUresult DeviceUuid(CUuuid* uuid, CUdevice dev) {
  if (uuid == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = State().contexts().CheckDevice(dev); r != CUDA_SUCCESS) return r;
  // Stable per ordinal: "fakecuda-gpu" + 0x00 0x00 0x00 + ordinal.
  static constexpr char kPrefix[] = "fakecuda-gpu";
  std::memset(uuid->bytes, 0, sizeof(uuid->bytes));
  std::memcpy(uuid->bytes, kPrefix, sizeof(kPrefix) - 1);
  uuid->bytes[15] = static_cast<char>(dev);
  return CUDA_SUCCESS;
}

}  // namespace
}  // namespace fakecuda

using fakecuda::Context;
using fakecuda::State;

extern "C" {

CUresult cuInit(unsigned int Flags) {
  FAKECUDA_ENTER_NOINIT(cuInit);
  return State().Init(Flags);
}

CUresult cuDriverGetVersion(int* driverVersion) {
  FAKECUDA_ENTER_NOINIT(cuDriverGetVersion);
  if (driverVersion == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *driverVersion = fakecuda::kDriverVersion;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetCount(int* count) {
  FAKECUDA_ENTER(cuDeviceGetCount);
  if (count == nullptr) return CUDA_ERROR_INVALID_VALUE;
  *count = State().contexts().device_count();
  return CUDA_SUCCESS;
}

CUresult cuDeviceGet(CUdevice* device, int ordinal) {
  FAKECUDA_ENTER(cuDeviceGet);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = State().contexts().CheckDevice(ordinal); r != CUDA_SUCCESS) return r;
  *device = ordinal;
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetName(char* name, int len, CUdevice dev) {
  FAKECUDA_ENTER(cuDeviceGetName);
  if (name == nullptr || len <= 0) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = State().contexts().CheckDevice(dev); r != CUDA_SUCCESS) return r;
  const size_t n = std::min(static_cast<size_t>(len) - 1, sizeof(fakecuda::kDeviceName) - 1);
  std::memcpy(name, fakecuda::kDeviceName, n);
  name[n] = '\0';
  return CUDA_SUCCESS;
}

CUresult cuDeviceGetUuid(CUuuid* uuid, CUdevice dev) {
  FAKECUDA_ENTER(cuDeviceGetUuid);
  return fakecuda::DeviceUuid(uuid, dev);
}

CUresult cuDeviceGetUuid_v2(CUuuid* uuid, CUdevice dev) {
  FAKECUDA_ENTER(cuDeviceGetUuid_v2);
  return fakecuda::DeviceUuid(uuid, dev);
}

CUresult cuDeviceGetAttribute(int* pi, CUdevice_attribute attrib, CUdevice dev) {
  FAKECUDA_ENTER(cuDeviceGetAttribute);
  if (pi == nullptr || attrib <= 0 || attrib >= CU_DEVICE_ATTRIBUTE_MAX) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (CUresult r = State().contexts().CheckDevice(dev); r != CUDA_SUCCESS) return r;
  *pi = fakecuda::AttributeValue(attrib);
  return CUDA_SUCCESS;
}

CUresult cuDeviceTotalMem_v2(size_t* bytes, CUdevice dev) {
  FAKECUDA_ENTER(cuDeviceTotalMem_v2);
  if (bytes == nullptr) return CUDA_ERROR_INVALID_VALUE;
  if (CUresult r = State().contexts().CheckDevice(dev); r != CUDA_SUCCESS) return r;
  *bytes = State().config().total_mem;
  return CUDA_SUCCESS;
}

CUresult cuDevicePrimaryCtxRetain(CUcontext* pctx, CUdevice dev) {
  FAKECUDA_ENTER(cuDevicePrimaryCtxRetain);
  return State().contexts().PrimaryRetain(dev, pctx);
}

CUresult cuDevicePrimaryCtxRelease_v2(CUdevice dev) {
  FAKECUDA_ENTER(cuDevicePrimaryCtxRelease_v2);
  return State().contexts().PrimaryRelease(dev);
}

CUresult cuDevicePrimaryCtxGetState(CUdevice dev, unsigned int* flags, int* active) {
  FAKECUDA_ENTER(cuDevicePrimaryCtxGetState);
  return State().contexts().PrimaryGetState(dev, flags, active);
}

CUresult cuDevicePrimaryCtxSetFlags_v2(CUdevice dev, unsigned int flags) {
  FAKECUDA_ENTER(cuDevicePrimaryCtxSetFlags_v2);
  return State().contexts().PrimarySetFlags(dev, flags);
}

CUresult cuDevicePrimaryCtxReset_v2(CUdevice dev) {
  FAKECUDA_ENTER(cuDevicePrimaryCtxReset_v2);
  return State().contexts().PrimaryReset(dev);
}

CUresult cuCtxCreate_v2(CUcontext* pctx, unsigned int flags, CUdevice dev) {
  FAKECUDA_ENTER(cuCtxCreate_v2);
  return State().contexts().Create(dev, flags, pctx);
}

CUresult cuCtxCreate_v3(CUcontext* pctx, CUexecAffinityParam* paramsArray, int numParams,
                        unsigned int flags, CUdevice dev) {
  FAKECUDA_ENTER(cuCtxCreate_v3);
  if (numParams < 0 || (numParams > 0 && paramsArray == nullptr)) return CUDA_ERROR_INVALID_VALUE;
  if (numParams > 0) return CUDA_ERROR_NOT_SUPPORTED;  // no SM affinity in the fake
  return State().contexts().Create(dev, flags, pctx);
}

CUresult cuCtxCreate_v4(CUcontext* pctx, CUctxCreateParams* ctxCreateParams, unsigned int flags,
                        CUdevice dev) {
  FAKECUDA_ENTER(cuCtxCreate_v4);
  if (ctxCreateParams != nullptr &&
      (ctxCreateParams->numExecAffinityParams != 0 || ctxCreateParams->cigParams != nullptr)) {
    return CUDA_ERROR_NOT_SUPPORTED;  // no SM affinity or CUDA-in-graphics in the fake
  }
  return State().contexts().Create(dev, flags, pctx);
}

CUresult cuCtxDestroy_v2(CUcontext ctx) {
  FAKECUDA_ENTER(cuCtxDestroy_v2);
  return State().contexts().Destroy(ctx);
}

CUresult cuCtxSetCurrent(CUcontext ctx) {
  FAKECUDA_ENTER(cuCtxSetCurrent);
  return State().contexts().SetCurrent(ctx);
}

CUresult cuCtxGetCurrent(CUcontext* pctx) {
  FAKECUDA_ENTER(cuCtxGetCurrent);
  return State().contexts().GetCurrent(pctx);
}

CUresult cuCtxPushCurrent_v2(CUcontext ctx) {
  FAKECUDA_ENTER(cuCtxPushCurrent_v2);
  return State().contexts().Push(ctx);
}

CUresult cuCtxPopCurrent_v2(CUcontext* pctx) {
  FAKECUDA_ENTER(cuCtxPopCurrent_v2);
  return State().contexts().Pop(pctx);
}

CUresult cuCtxGetDevice(CUdevice* device) {
  FAKECUDA_ENTER(cuCtxGetDevice);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* ctx = nullptr;
  if (CUresult r = fakecuda::CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
  *device = ctx->device;
  return CUDA_SUCCESS;
}

CUresult cuCtxGetDevice_v2(CUdevice* device, CUcontext ctx) {
  FAKECUDA_ENTER(cuCtxGetDevice_v2);
  if (device == nullptr) return CUDA_ERROR_INVALID_VALUE;
  Context* c = nullptr;
  if (CUresult r = State().contexts().Resolve(ctx, &c); r != CUDA_SUCCESS) return r;
  *device = c->device;
  return CUDA_SUCCESS;
}

CUresult cuCtxSynchronize(void) {
  FAKECUDA_ENTER(cuCtxSynchronize);
  Context* ctx = nullptr;
  if (CUresult r = fakecuda::CurrentContext(&ctx); r != CUDA_SUCCESS) return r;
  return State().contexts().Synchronize(ctx);
}

CUresult cuCtxSynchronize_v2(CUcontext ctx) {
  FAKECUDA_ENTER(cuCtxSynchronize_v2);
  Context* c = nullptr;
  if (CUresult r = State().contexts().Resolve(ctx, &c); r != CUDA_SUCCESS) return r;
  return State().contexts().Synchronize(c);
}

}  // extern "C"
