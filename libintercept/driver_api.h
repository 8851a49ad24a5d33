// The real driver functions the shim's own logic calls (never the hooks: calling a hooked
// entry point from inside the shim would recurse). Resolved once from the real driver; a
// missing function is null and the feature that needs it reports an error.
// Thread-safety: immutable after Resolve.
#ifndef MISSILE_LIBINTERCEPT_DRIVER_API_H_
#define MISSILE_LIBINTERCEPT_DRIVER_API_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "absl/status/status.h"

namespace missile::shim {

struct DriverApi {
  PFN_cuGetErrorName_v6000 GetErrorName = nullptr;
  PFN_cuCtxGetCurrent_v4000 CtxGetCurrent = nullptr;
  PFN_cuCtxSetCurrent_v4000 CtxSetCurrent = nullptr;
  PFN_cuCtxGetDevice_v2000 CtxGetDevice = nullptr;
  PFN_cuCtxSynchronize_v2000 CtxSynchronize = nullptr;
  PFN_cuDeviceGet_v2000 DeviceGet = nullptr;
  PFN_cuDeviceGetUuid_v11040 DeviceGetUuid = nullptr;
  PFN_cuDeviceGetAttribute_v2000 DeviceGetAttribute = nullptr;
  PFN_cuDeviceTotalMem_v3020 DeviceTotalMem = nullptr;
  PFN_cuMemGetInfo_v3020 MemGetInfo = nullptr;
  PFN_cuMemAddressReserve_v10020 MemAddressReserve = nullptr;
  PFN_cuMemAddressFree_v10020 MemAddressFree = nullptr;
  PFN_cuMemImportFromShareableHandle_v10020 MemImportFromShareableHandle = nullptr;
  PFN_cuMemMap_v10020 MemMap = nullptr;
  PFN_cuMemUnmap_v10020 MemUnmap = nullptr;
  PFN_cuMemSetAccess_v10020 MemSetAccess = nullptr;
  PFN_cuMemRelease_v10020 MemRelease = nullptr;
  // Stream calls come in two flavours, because stream 0 means the legacy default stream to
  // one and the per-thread default stream to the other (_ptsz): use the caller's flavour.
  PFN_cuStreamIsCapturing_v10000 StreamIsCapturing = nullptr;
  PFN_cuStreamIsCapturing_v10000_ptsz StreamIsCapturingPtsz = nullptr;
  PFN_cuStreamGetCtx_v9020 StreamGetCtx = nullptr;
  PFN_cuStreamQuery_v2000 StreamQuery = nullptr;
  PFN_cuStreamSynchronize_v2000 StreamSynchronize = nullptr;
  PFN_cuStreamSynchronize_v7000_ptsz StreamSynchronizePtsz = nullptr;
  PFN_cuStreamQuery_v7000_ptsz StreamQueryPtsz = nullptr;
  PFN_cuEventCreate_v2000 EventCreate = nullptr;
  PFN_cuEventRecord_v2000 EventRecord = nullptr;
  PFN_cuEventRecord_v7000_ptsz EventRecordPtsz = nullptr;
  PFN_cuEventQuery_v2000 EventQuery = nullptr;
  PFN_cuEventSynchronize_v2000 EventSynchronize = nullptr;
  PFN_cuEventDestroy_v4000 EventDestroy = nullptr;

  // For the copy gate: the copy channel's gates registered for the GPU, and stream memory
  // operations.
  PFN_cuMemHostRegister_v6050 MemHostRegister = nullptr;
  PFN_cuMemHostUnregister_v4000 MemHostUnregister = nullptr;
  PFN_cuMemHostGetDevicePointer_v3020 MemHostGetDevicePointer = nullptr;
  PFN_cuPointerGetAttribute_v4000 PointerGetAttribute = nullptr;
  PFN_cuStreamWaitValue32_v11070 StreamWaitValue32 = nullptr;
  PFN_cuStreamWaitValue32_v11070_ptsz StreamWaitValue32Ptsz = nullptr;
  PFN_cuStreamWriteValue32_v11070 StreamWriteValue32 = nullptr;
  PFN_cuStreamWriteValue32_v11070_ptsz StreamWriteValue32Ptsz = nullptr;
  // For the pacer: the GPU reports a work item finished by writing its sequence number.
  PFN_cuStreamWriteValue64_v11070 StreamWriteValue64 = nullptr;
  PFN_cuStreamWriteValue64_v11070_ptsz StreamWriteValue64Ptsz = nullptr;

  // For splitting a BE tenant's graphs into pieces (graph_split.h).
  PFN_cuGraphGetNodes_v10000 GraphGetNodes = nullptr;
  PFN_cuGraphGetEdges_v10000 GraphGetEdges = nullptr;
  PFN_cuGraphNodeGetType_v10000 GraphNodeGetType = nullptr;
  PFN_cuGraphChildGraphNodeGetGraph_v10000 GraphChildGraphNodeGetGraph = nullptr;
  PFN_cuGraphClone_v10000 GraphClone = nullptr;
  PFN_cuGraphNodeFindInClone_v10000 GraphNodeFindInClone = nullptr;
  PFN_cuGraphDestroyNode_v10000 GraphDestroyNode = nullptr;
  PFN_cuGraphDestroy_v10000 GraphDestroy = nullptr;
  PFN_cuGraphInstantiateWithFlags_v11040 GraphInstantiateWithFlags = nullptr;
  PFN_cuGraphExecDestroy_v10000 GraphExecDestroy = nullptr;
  PFN_cuGraphLaunch_v10000 GraphLaunch = nullptr;
  PFN_cuGraphLaunch_v10000_ptsz GraphLaunchPtsz = nullptr;
  PFN_cuGraphUpload_v11010 GraphUpload = nullptr;
  PFN_cuGraphUpload_v11010_ptsz GraphUploadPtsz = nullptr;
  PFN_cuStreamWaitEvent_v3020 StreamWaitEvent = nullptr;
  PFN_cuStreamWaitEvent_v7000_ptsz StreamWaitEventPtsz = nullptr;

  // For the LS reserve of TPCs (tpc_mask.h): the launch callback and the probe kernel.
  PFN_cuGetExportTable_v3000 GetExportTable = nullptr;
  PFN_cuThreadExchangeStreamCaptureMode_v10010 ThreadExchangeStreamCaptureMode = nullptr;
  PFN_cuModuleLoadData_v2000 ModuleLoadData = nullptr;
  PFN_cuModuleGetFunction_v2000 ModuleGetFunction = nullptr;
  PFN_cuModuleUnload_v2000 ModuleUnload = nullptr;
  PFN_cuLaunchKernel_v4000 LaunchKernel = nullptr;
  PFN_cuMemAlloc_v3020 MemAlloc = nullptr;
  PFN_cuMemFree_v3020 MemFree = nullptr;
  PFN_cuMemcpyDtoH_v3020 MemcpyDtoH = nullptr;
  PFN_cuStreamCreate_v2000 StreamCreate = nullptr;
  PFN_cuStreamDestroy_v4000 StreamDestroy = nullptr;

  // Fills every pointer from the real driver's handle (dlsym).
  void Resolve(void* driver_handle);
};

// A failed driver call `what` as a Status: RESOURCE_EXHAUSTED for CUDA_ERROR_OUT_OF_MEMORY,
// INTERNAL otherwise, named through api.GetErrorName when the driver has it.
absl::Status DriverStatus(const DriverApi& api, const char* what, CUresult r);

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_DRIVER_API_H_
