// Entry points: modules and kernel launches.
//
// A launch is an asynchronous stream operation (recorded as a node while the stream captures):
// when it reaches the head of its stream it runs on its device's compute engine (engine.h),
// applies the built-in kernel's effect (kernels.h) and completes. Outside capture, the launch
// callback (launch_callback.h) runs inside the call, after the launch's checks and before the
// work is queued; the TPCs it disables go with the queued kernel. Launch attributes, cooperative
// launches' grid-wide synchronisation and shared memory have no effect here.

#include "entry_points.h"
#include "fake_state.h"

namespace fakecuda {
namespace {

constexpr DefaultStream kLegacy = DefaultStream::kLegacy;
constexpr DefaultStream kPerThread = DefaultStream::kPerThread;

struct Dims {
  unsigned grid[3];
  unsigned block[3];
};

// The limits of compute capability 9.0.
CUresult CheckDims(const Dims& d) {
  for (int i = 0; i < 3; ++i) {
    if (d.grid[i] == 0 || d.block[i] == 0) return CUDA_ERROR_INVALID_VALUE;
  }
  if (d.grid[0] > 0x7fffffffu || d.grid[1] > 65535 || d.grid[2] > 65535) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  if (d.block[0] > 1024 || d.block[1] > 1024 || d.block[2] > 64 ||
      static_cast<uint64_t>(d.block[0]) * d.block[1] * d.block[2] > 1024) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  return CUDA_SUCCESS;
}

CUresult Launch(CUfunction f, const Dims& dims, CUstream h, void** params, void** extra,
                DefaultStream mode) {
  std::shared_ptr<Stream> stream;
  if (f != nullptr) {
    if (CUresult r = State().streams().Resolve(h, mode, &stream); r != CUDA_SUCCESS) return r;
  }
  KernelTask task;
  if (CUresult r = KernelOp(f, dims.grid, dims.block, params, extra,
                            stream != nullptr ? stream->ctx()->device : 0, &task);
      r != CUDA_SUCCESS) {
    return r;
  }
  return stream->SubmitKernel(std::move(task), State().launch_callbacks());
}

CUresult LaunchEx(const CUlaunchConfig* config, CUfunction f, void** params, void** extra,
                  DefaultStream mode) {
  if (config == nullptr || (config->numAttrs != 0 && config->attrs == nullptr)) {
    return CUDA_ERROR_INVALID_VALUE;
  }
  const Dims dims{{config->gridDimX, config->gridDimY, config->gridDimZ},
                  {config->blockDimX, config->blockDimY, config->blockDimZ}};
  return Launch(f, dims, config->hStream, params, extra, mode);
}

}  // namespace

CUresult KernelOp(CUfunction f, const unsigned grid[3], const unsigned block[3], void** params,
                  void** extra, int device, KernelTask* out) {
  if (f == nullptr) return CUDA_ERROR_INVALID_HANDLE;
  KernelKind kind = KernelKind::kSpin;
  if (CUresult r = State().modules().Lookup(f, &kind); r != CUDA_SUCCESS) return r;
  if (CUresult r = CheckDims({{grid[0], grid[1], grid[2]}, {block[0], block[1], block[2]}});
      r != CUDA_SUCCESS) {
    return r;
  }
  // An `extra` list other than the empty one ({CU_LAUNCH_PARAM_END}) is not supported.
  if (extra != nullptr && extra[0] != CU_LAUNCH_PARAM_END) {
    return params != nullptr ? CUDA_ERROR_INVALID_VALUE : CUDA_ERROR_NOT_SUPPORTED;
  }
  KernelCall call;
  if (CUresult r = PrepareKernel(kind, grid, params, State().address_space(), &call);
      r != CUDA_SUCCESS) {
    return r;
  }
  ComputeEngine* engine = &State().engine();
  const TpcLayout* tpcs = &State().tpcs();
  *out = [engine, tpcs, device, call = std::move(call)](const TpcMask& disabled) {
    RunKernel(*engine, *tpcs, device, call, disabled);
  };
  return CUDA_SUCCESS;
}

}  // namespace fakecuda

using fakecuda::Dims;
using fakecuda::kLegacy;
using fakecuda::kPerThread;
using fakecuda::State;

extern "C" {

CUresult cuModuleLoadData(CUmodule* module, const void* image) {
  FAKECUDA_ENTER(cuModuleLoadData);
  fakecuda::Context* ctx = nullptr;
  if (CUresult r = State().contexts().Current(&ctx); r != CUDA_SUCCESS) return r;
  return State().modules().Load(ctx, image, module);
}

CUresult cuModuleUnload(CUmodule hmod) {
  FAKECUDA_ENTER(cuModuleUnload);
  return State().modules().Unload(hmod);
}

CUresult cuModuleGetFunction(CUfunction* hfunc, CUmodule hmod, const char* name) {
  FAKECUDA_ENTER(cuModuleGetFunction);
  return State().modules().GetFunction(hmod, name, hfunc);
}

CUresult cuLaunchKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                        unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                        unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                        void** kernelParams, void** extra) {
  FAKECUDA_ENTER(cuLaunchKernel);
  const Dims dims{{gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ}};
  return fakecuda::Launch(f, dims, hStream, kernelParams, extra, kLegacy);
}

CUresult cuLaunchKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                             unsigned int gridDimZ, unsigned int blockDimX, unsigned int blockDimY,
                             unsigned int blockDimZ, unsigned int sharedMemBytes, CUstream hStream,
                             void** kernelParams, void** extra) {
  FAKECUDA_ENTER(cuLaunchKernel_ptsz);
  const Dims dims{{gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ}};
  return fakecuda::Launch(f, dims, hStream, kernelParams, extra, kPerThread);
}

CUresult cuLaunchKernelEx(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                          void** extra) {
  FAKECUDA_ENTER(cuLaunchKernelEx);
  return fakecuda::LaunchEx(config, f, kernelParams, extra, kLegacy);
}

CUresult cuLaunchKernelEx_ptsz(const CUlaunchConfig* config, CUfunction f, void** kernelParams,
                               void** extra) {
  FAKECUDA_ENTER(cuLaunchKernelEx_ptsz);
  return fakecuda::LaunchEx(config, f, kernelParams, extra, kPerThread);
}

CUresult cuLaunchCooperativeKernel(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                   unsigned int gridDimZ, unsigned int blockDimX,
                                   unsigned int blockDimY, unsigned int blockDimZ,
                                   unsigned int sharedMemBytes, CUstream hStream,
                                   void** kernelParams) {
  FAKECUDA_ENTER(cuLaunchCooperativeKernel);
  const Dims dims{{gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ}};
  return fakecuda::Launch(f, dims, hStream, kernelParams, nullptr, kLegacy);
}

CUresult cuLaunchCooperativeKernel_ptsz(CUfunction f, unsigned int gridDimX, unsigned int gridDimY,
                                        unsigned int gridDimZ, unsigned int blockDimX,
                                        unsigned int blockDimY, unsigned int blockDimZ,
                                        unsigned int sharedMemBytes, CUstream hStream,
                                        void** kernelParams) {
  FAKECUDA_ENTER(cuLaunchCooperativeKernel_ptsz);
  const Dims dims{{gridDimX, gridDimY, gridDimZ}, {blockDimX, blockDimY, blockDimZ}};
  return fakecuda::Launch(f, dims, hStream, kernelParams, nullptr, kPerThread);
}

}  // extern "C"
