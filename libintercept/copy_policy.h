// The policies of the host-device copy entry points: each asks the CopyManager for a gate and
// runs the copy through it (copy_gate.h), or passes it to the driver. Declared here so hooks.cc
// instantiates these; defined in copy_hooks.cc.
#ifndef MISSILE_LIBINTERCEPT_COPY_POLICY_H_
#define MISSILE_LIBINTERCEPT_COPY_POLICY_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "policy.h"

namespace missile::shim {

#define MISSILE_COPY_POLICY(sym, pfn, ...)      \
  template <>                                   \
  struct Policy<HookId::k_##sym> {              \
    static CUresult Run(pfn real, __VA_ARGS__); \
  };

MISSILE_COPY_POLICY(cuMemcpyHtoD_v2, PFN_cuMemcpyHtoD_v3020, CUdeviceptr, const void*, size_t)
MISSILE_COPY_POLICY(cuMemcpyHtoD_v2_ptds, PFN_cuMemcpyHtoD_v7000_ptds, CUdeviceptr, const void*,
                    size_t)
MISSILE_COPY_POLICY(cuMemcpyDtoH_v2, PFN_cuMemcpyDtoH_v3020, void*, CUdeviceptr, size_t)
MISSILE_COPY_POLICY(cuMemcpyDtoH_v2_ptds, PFN_cuMemcpyDtoH_v7000_ptds, void*, CUdeviceptr, size_t)
MISSILE_COPY_POLICY(cuMemcpyHtoDAsync_v2, PFN_cuMemcpyHtoDAsync_v3020, CUdeviceptr, const void*,
                    size_t, CUstream)
MISSILE_COPY_POLICY(cuMemcpyHtoDAsync_v2_ptsz, PFN_cuMemcpyHtoDAsync_v7000_ptsz, CUdeviceptr,
                    const void*, size_t, CUstream)
MISSILE_COPY_POLICY(cuMemcpyDtoHAsync_v2, PFN_cuMemcpyDtoHAsync_v3020, void*, CUdeviceptr, size_t,
                    CUstream)
MISSILE_COPY_POLICY(cuMemcpyDtoHAsync_v2_ptsz, PFN_cuMemcpyDtoHAsync_v7000_ptsz, void*,
                    CUdeviceptr, size_t, CUstream)
MISSILE_COPY_POLICY(cuMemcpy, PFN_cuMemcpy_v4000, CUdeviceptr, CUdeviceptr, size_t)
MISSILE_COPY_POLICY(cuMemcpy_ptds, PFN_cuMemcpy_v7000_ptds, CUdeviceptr, CUdeviceptr, size_t)
MISSILE_COPY_POLICY(cuMemcpyAsync, PFN_cuMemcpyAsync_v4000, CUdeviceptr, CUdeviceptr, size_t,
                    CUstream)
MISSILE_COPY_POLICY(cuMemcpyAsync_ptsz, PFN_cuMemcpyAsync_v7000_ptsz, CUdeviceptr, CUdeviceptr,
                    size_t, CUstream)

MISSILE_COPY_POLICY(cuMemcpy2D_v2, PFN_cuMemcpy2D_v3020, const CUDA_MEMCPY2D*)
MISSILE_COPY_POLICY(cuMemcpy2D_v2_ptds, PFN_cuMemcpy2D_v7000_ptds, const CUDA_MEMCPY2D*)
MISSILE_COPY_POLICY(cuMemcpy2DUnaligned_v2, PFN_cuMemcpy2DUnaligned_v3020, const CUDA_MEMCPY2D*)
MISSILE_COPY_POLICY(cuMemcpy2DUnaligned_v2_ptds, PFN_cuMemcpy2DUnaligned_v7000_ptds,
                    const CUDA_MEMCPY2D*)
MISSILE_COPY_POLICY(cuMemcpy2DAsync_v2, PFN_cuMemcpy2DAsync_v3020, const CUDA_MEMCPY2D*, CUstream)
MISSILE_COPY_POLICY(cuMemcpy2DAsync_v2_ptsz, PFN_cuMemcpy2DAsync_v7000_ptsz, const CUDA_MEMCPY2D*,
                    CUstream)
MISSILE_COPY_POLICY(cuMemcpy3D_v2, PFN_cuMemcpy3D_v3020, const CUDA_MEMCPY3D*)
MISSILE_COPY_POLICY(cuMemcpy3D_v2_ptds, PFN_cuMemcpy3D_v7000_ptds, const CUDA_MEMCPY3D*)
MISSILE_COPY_POLICY(cuMemcpy3DAsync_v2, PFN_cuMemcpy3DAsync_v3020, const CUDA_MEMCPY3D*, CUstream)
MISSILE_COPY_POLICY(cuMemcpy3DAsync_v2_ptsz, PFN_cuMemcpy3DAsync_v7000_ptsz, const CUDA_MEMCPY3D*,
                    CUstream)
MISSILE_COPY_POLICY(cuMemcpyHtoA_v2, PFN_cuMemcpyHtoA_v3020, CUarray, size_t, const void*, size_t)
MISSILE_COPY_POLICY(cuMemcpyHtoA_v2_ptds, PFN_cuMemcpyHtoA_v7000_ptds, CUarray, size_t,
                    const void*, size_t)
MISSILE_COPY_POLICY(cuMemcpyAtoH_v2, PFN_cuMemcpyAtoH_v3020, void*, CUarray, size_t, size_t)
MISSILE_COPY_POLICY(cuMemcpyAtoH_v2_ptds, PFN_cuMemcpyAtoH_v7000_ptds, void*, CUarray, size_t,
                    size_t)
MISSILE_COPY_POLICY(cuMemcpyHtoAAsync_v2, PFN_cuMemcpyHtoAAsync_v3020, CUarray, size_t,
                    const void*, size_t, CUstream)
MISSILE_COPY_POLICY(cuMemcpyHtoAAsync_v2_ptsz, PFN_cuMemcpyHtoAAsync_v7000_ptsz, CUarray, size_t,
                    const void*, size_t, CUstream)
MISSILE_COPY_POLICY(cuMemcpyAtoHAsync_v2, PFN_cuMemcpyAtoHAsync_v3020, void*, CUarray, size_t,
                    size_t, CUstream)
MISSILE_COPY_POLICY(cuMemcpyAtoHAsync_v2_ptsz, PFN_cuMemcpyAtoHAsync_v7000_ptsz, void*, CUarray,
                    size_t, size_t, CUstream)

#undef MISSILE_COPY_POLICY

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_COPY_POLICY_H_
