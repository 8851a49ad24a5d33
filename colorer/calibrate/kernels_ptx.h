// The PTX of kernels.cu and channel_kernels.cu (nvcc -ptx -arch=compute_90), embedded at build
// time by embed_ptx.cmake into the generated kernels_ptx.cc and channel_kernels_ptx.cc.
// NUL-terminated text, loaded with cuModuleLoadDataEx.

#ifndef MISSILE_COLORER_CALIBRATE_KERNELS_PTX_H_
#define MISSILE_COLORER_CALIBRATE_KERNELS_PTX_H_

namespace missile::calibrate {

extern const char kKernelsPtx[];
extern const char kChannelKernelsPtx[];

}  // namespace missile::calibrate

#endif  // MISSILE_COLORER_CALIBRATE_KERNELS_PTX_H_
