// ABI typedefs that cudaTypedefs.h declares only for the driver's own build
// (__CUDA_API_VERSION_INTERNAL) but that the CUDA runtime still requests through
// cuGetProcAddress; copied from CUDA 13.0's cudaTypedefs.h. Both are 64-bit clean.
#ifndef MISSILE_LIBINTERCEPT_LEGACY_ABI_H_
#define MISSILE_LIBINTERCEPT_LEGACY_ABI_H_

#include <cuda.h>

#if !defined(__CUDA_API_VERSION_INTERNAL)
typedef CUresult(CUDAAPI* PFN_cuMemHostRegister_v4000)(void* p, size_t bytesize,
                                                       unsigned int Flags);
typedef CUresult(CUDAAPI* PFN_cuIpcOpenMemHandle_v4010)(CUdeviceptr_v2* pdptr,
                                                        CUipcMemHandle_v1 handle,
                                                        unsigned int Flags);
typedef CUresult(CUDAAPI* PFN_cuGraphInstantiate_v10000)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                         CUgraphNode* phErrorNode,
                                                         char* logBuffer, size_t bufferSize);
typedef CUresult(CUDAAPI* PFN_cuGraphInstantiate_v11000)(CUgraphExec* phGraphExec, CUgraph hGraph,
                                                         CUgraphNode* phErrorNode,
                                                         char* logBuffer, size_t bufferSize);
#endif

#endif  // MISSILE_LIBINTERCEPT_LEGACY_ABI_H_
