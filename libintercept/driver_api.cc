#include "driver_api.h"

#include <dlfcn.h>

#include <string>

namespace missile::shim {

template <typename T>
static void Load(void* handle, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(handle, name));
}

void DriverApi::Resolve(void* h) {
  Load(h, "cuGetErrorName", &GetErrorName);
  Load(h, "cuCtxGetCurrent", &CtxGetCurrent);
  Load(h, "cuCtxSetCurrent", &CtxSetCurrent);
  Load(h, "cuCtxGetDevice", &CtxGetDevice);
  Load(h, "cuCtxSynchronize", &CtxSynchronize);
  Load(h, "cuDeviceGet", &DeviceGet);
  Load(h, "cuDeviceGetUuid_v2", &DeviceGetUuid);
  Load(h, "cuDeviceGetAttribute", &DeviceGetAttribute);
  Load(h, "cuDeviceTotalMem_v2", &DeviceTotalMem);
  Load(h, "cuMemGetInfo_v2", &MemGetInfo);
  Load(h, "cuMemAddressReserve", &MemAddressReserve);
  Load(h, "cuMemAddressFree", &MemAddressFree);
  Load(h, "cuMemImportFromShareableHandle", &MemImportFromShareableHandle);
  Load(h, "cuMemMap", &MemMap);
  Load(h, "cuMemUnmap", &MemUnmap);
  Load(h, "cuMemSetAccess", &MemSetAccess);
  Load(h, "cuMemRelease", &MemRelease);
  Load(h, "cuStreamIsCapturing", &StreamIsCapturing);
  Load(h, "cuStreamIsCapturing_ptsz", &StreamIsCapturingPtsz);
  Load(h, "cuStreamGetCtx", &StreamGetCtx);
  Load(h, "cuStreamQuery", &StreamQuery);
  Load(h, "cuStreamSynchronize", &StreamSynchronize);
  Load(h, "cuStreamSynchronize_ptsz", &StreamSynchronizePtsz);
  Load(h, "cuStreamQuery_ptsz", &StreamQueryPtsz);
  Load(h, "cuEventCreate", &EventCreate);
  Load(h, "cuEventRecord", &EventRecord);
  Load(h, "cuEventRecord_ptsz", &EventRecordPtsz);
  Load(h, "cuEventQuery", &EventQuery);
  Load(h, "cuEventSynchronize", &EventSynchronize);
  Load(h, "cuEventDestroy_v2", &EventDestroy);
  Load(h, "cuMemHostRegister_v2", &MemHostRegister);
  Load(h, "cuMemHostUnregister", &MemHostUnregister);
  Load(h, "cuMemHostGetDevicePointer_v2", &MemHostGetDevicePointer);
  Load(h, "cuPointerGetAttribute", &PointerGetAttribute);
  Load(h, "cuStreamWaitValue32_v2", &StreamWaitValue32);
  Load(h, "cuStreamWaitValue32_v2_ptsz", &StreamWaitValue32Ptsz);
  Load(h, "cuStreamWriteValue32_v2", &StreamWriteValue32);
  Load(h, "cuStreamWriteValue32_v2_ptsz", &StreamWriteValue32Ptsz);
  Load(h, "cuStreamWriteValue64_v2", &StreamWriteValue64);
  Load(h, "cuStreamWriteValue64_v2_ptsz", &StreamWriteValue64Ptsz);
  Load(h, "cuGraphGetNodes", &GraphGetNodes);
  Load(h, "cuGraphGetEdges", &GraphGetEdges);
  Load(h, "cuGraphNodeGetType", &GraphNodeGetType);
  Load(h, "cuGraphChildGraphNodeGetGraph", &GraphChildGraphNodeGetGraph);
  Load(h, "cuGraphClone", &GraphClone);
  Load(h, "cuGraphNodeFindInClone", &GraphNodeFindInClone);
  Load(h, "cuGraphDestroyNode", &GraphDestroyNode);
  Load(h, "cuGraphDestroy", &GraphDestroy);
  Load(h, "cuGraphInstantiateWithFlags", &GraphInstantiateWithFlags);
  Load(h, "cuGraphExecDestroy", &GraphExecDestroy);
  Load(h, "cuGraphLaunch", &GraphLaunch);
  Load(h, "cuGraphLaunch_ptsz", &GraphLaunchPtsz);
  Load(h, "cuGraphUpload", &GraphUpload);
  Load(h, "cuGraphUpload_ptsz", &GraphUploadPtsz);
  Load(h, "cuStreamWaitEvent", &StreamWaitEvent);
  Load(h, "cuStreamWaitEvent_ptsz", &StreamWaitEventPtsz);
  Load(h, "cuGetExportTable", &GetExportTable);
  Load(h, "cuThreadExchangeStreamCaptureMode", &ThreadExchangeStreamCaptureMode);
  Load(h, "cuModuleLoadData", &ModuleLoadData);
  Load(h, "cuModuleGetFunction", &ModuleGetFunction);
  Load(h, "cuModuleUnload", &ModuleUnload);
  Load(h, "cuLaunchKernel", &LaunchKernel);
  Load(h, "cuMemAlloc_v2", &MemAlloc);
  Load(h, "cuMemFree_v2", &MemFree);
  Load(h, "cuMemcpyDtoH_v2", &MemcpyDtoH);
  Load(h, "cuStreamCreate", &StreamCreate);
  Load(h, "cuStreamDestroy_v2", &StreamDestroy);
}

absl::Status DriverStatus(const DriverApi& api, const char* what, CUresult r) {
  const char* name = nullptr;
  if (api.GetErrorName != nullptr) api.GetErrorName(r, &name);
  std::string text = std::string(what) + ": " + (name ? name : "CUDA error") + " (" +
                     std::to_string(static_cast<int>(r)) + ")";
  return r == CUDA_ERROR_OUT_OF_MEMORY ? absl::ResourceExhaustedError(text)
                                       : absl::InternalError(text);
}

}  // namespace missile::shim
