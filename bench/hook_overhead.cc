// hook_overhead: what libmissile.so adds to a driver call it passes through.
//
// Run it under the shim (LD_PRELOAD=libmissile.so). It calls the same entry points two ways in
// the same process, interleaved: "hooked" through the normal symbol (which binds to the shim)
// and "direct" through the real driver's own function (dlopen of the real driver by path,
// taken from MISSILE_REAL_LIBCUDA or argv[1]). Each call is timed on its own with the
// monotonic clock; the clock's cost is the same on both sides, so hooked - direct is the shim.
//   cuMemGetInfo_v2             no GPU work, a pure driver round trip
//   cuMemcpyHtoDAsync_v2 (8 B)  from pinned memory on a non-blocking stream, synchronised
//                               outside the timed region every 64 calls
//   cuLaunchKernel              an empty kernel (PTX, JIT-compiled at start) on the same stream,
//                               synchronised every 64 calls. With missiled running, the shim
//                               paces launches: as an LS tenant each one is marked (a store and a
//                               stream write after it), as a BE tenant each one is also admitted
//                               (not held while no LS tenant is busy).
// Prints median and p99 per call for each side and the differences.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Percentile(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  size_t i = static_cast<size_t>(p * (v.size() - 1) + 0.5);
  return v[i];
}

void Die(const char* what, CUresult r) {
  fprintf(stderr, "hook_overhead: %s failed with %d\n", what, static_cast<int>(r));
  exit(1);
}

// An empty kernel, for the launch path: JIT-compiled by the driver for whatever GPU is there.
constexpr char kEmptyKernelPtx[] = R"(
.version 7.0
.target sm_50
.address_size 64
.visible .entry missile_empty() { ret; }
)";

struct Series {
  std::vector<double> hooked, direct;
};

template <typename Call>
double TimeOne(Call&& call) {
  auto t0 = Clock::now();
  call();
  auto t1 = Clock::now();
  return std::chrono::duration<double, std::nano>(t1 - t0).count();
}

void Print(const char* name, const Series& s) {
  double hm = Percentile(s.hooked, 0.5), dm = Percentile(s.direct, 0.5);
  double h99 = Percentile(s.hooked, 0.99), d99 = Percentile(s.direct, 0.99);
  printf("%-26s %10.1f %10.1f %10.1f %10.1f %12.1f %12.1f\n", name, dm, hm, d99, h99, hm - dm,
         h99 - d99);
}

}  // namespace

// long: one benchmark top to bottom (open the driver, resolve both paths, time each, print);
// every step uses the handles and timings of the ones before.
int main(int argc, char** argv) {
  const char* real_path = argc > 1 ? argv[1] : getenv("MISSILE_REAL_LIBCUDA");
  int calls = argc > 2 ? atoi(argv[2]) : 200000;
  if (real_path == nullptr) {
    fprintf(stderr, "usage: hook_overhead REAL_LIBCUDA [CALLS] (or set MISSILE_REAL_LIBCUDA)\n");
    return 2;
  }
  void* real = dlopen(real_path, RTLD_NOW | RTLD_LOCAL);
  if (real == nullptr) {
    fprintf(stderr, "hook_overhead: cannot open %s: %s\n", real_path, dlerror());
    return 2;
  }
  auto direct_info = reinterpret_cast<PFN_cuMemGetInfo_v3020>(dlsym(real, "cuMemGetInfo_v2"));
  auto direct_htod =
      reinterpret_cast<PFN_cuMemcpyHtoDAsync_v3020>(dlsym(real, "cuMemcpyHtoDAsync_v2"));
  auto direct_launch = reinterpret_cast<PFN_cuLaunchKernel_v4000>(dlsym(real, "cuLaunchKernel"));
  if (direct_info == nullptr || direct_htod == nullptr || direct_launch == nullptr) {
    fprintf(stderr, "hook_overhead: %s lacks the entry points\n", real_path);
    return 2;
  }
  // Is the process's libcuda.so.1 the shim? Then the normal symbols are the hooked path.
  Dl_info info;
  bool shimmed = dladdr(reinterpret_cast<void*>(&cuMemGetInfo_v2), &info) != 0 &&
                 std::string(info.dli_fname).find("missile") != std::string::npos;

  CUresult r;
  if ((r = cuInit(0)) != CUDA_SUCCESS) Die("cuInit", r);
  CUdevice dev;
  if ((r = cuDeviceGet(&dev, 0)) != CUDA_SUCCESS) Die("cuDeviceGet", r);
  CUcontext ctx;
  if ((r = cuDevicePrimaryCtxRetain(&ctx, dev)) != CUDA_SUCCESS) Die("cuDevicePrimaryCtxRetain", r);
  if ((r = cuCtxSetCurrent(ctx)) != CUDA_SUCCESS) Die("cuCtxSetCurrent", r);
  CUstream stream;
  if ((r = cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING)) != CUDA_SUCCESS) Die("cuStreamCreate", r);
  CUdeviceptr dst;
  if ((r = cuMemAlloc_v2(&dst, 4096)) != CUDA_SUCCESS) Die("cuMemAlloc", r);
  void* src;
  if ((r = cuMemAllocHost_v2(&src, 4096)) != CUDA_SUCCESS) Die("cuMemAllocHost", r);

  Series info_series, htod_series;
  size_t free_b, total_b;
  for (int i = 0; i < 1000; ++i) {  // warm up both paths
    cuMemGetInfo_v2(&free_b, &total_b);
    direct_info(&free_b, &total_b);
  }
  for (int i = 0; i < calls; ++i) {
    if (i % 2 == 0) {
      info_series.hooked.push_back(TimeOne([&] { cuMemGetInfo_v2(&free_b, &total_b); }));
      info_series.direct.push_back(TimeOne([&] { direct_info(&free_b, &total_b); }));
    } else {
      info_series.direct.push_back(TimeOne([&] { direct_info(&free_b, &total_b); }));
      info_series.hooked.push_back(TimeOne([&] { cuMemGetInfo_v2(&free_b, &total_b); }));
    }
  }
  int htod_calls = calls / 4;
  for (int i = 0; i < htod_calls; ++i) {
    htod_series.hooked.push_back(TimeOne([&] { cuMemcpyHtoDAsync_v2(dst, src, 8, stream); }));
    htod_series.direct.push_back(TimeOne([&] { direct_htod(dst, src, 8, stream); }));
    if (i % 32 == 31) cuStreamSynchronize(stream);
  }
  cuStreamSynchronize(stream);

  // Launches: skipped where the driver cannot load PTX (the test double).
  Series launch_series;
  CUmodule module;
  CUfunction empty = nullptr;
  if (cuModuleLoadData(&module, kEmptyKernelPtx) == CUDA_SUCCESS &&
      cuModuleGetFunction(&empty, module, "missile_empty") == CUDA_SUCCESS) {
    for (int i = 0; i < 1000; ++i) cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr);
    cuStreamSynchronize(stream);
    for (int i = 0; i < htod_calls; ++i) {
      launch_series.hooked.push_back(TimeOne(
          [&] { cuLaunchKernel(empty, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr); }));
      launch_series.direct.push_back(TimeOne(
          [&] { direct_launch(empty, 1, 1, 1, 32, 1, 1, 0, stream, nullptr, nullptr); }));
      if (i % 32 == 31) cuStreamSynchronize(stream);
    }
    cuStreamSynchronize(stream);
  }

  printf("hook_overhead: %s; real driver %s; %d cuMemGetInfo and %d cuMemcpyHtoDAsync pairs\n",
         shimmed ? "libcuda.so.1 is libmissile.so (hooked path active)"
                 : "WARNING: not running under libmissile.so, both sides are direct",
         real_path, calls, htod_calls);
  printf("%-26s %10s %10s %10s %10s %12s %12s\n", "entry point (ns per call)", "direct p50",
         "hooked p50", "direct p99", "hooked p99", "added p50", "added p99");
  Print("cuMemGetInfo_v2", info_series);
  Print("cuMemcpyHtoDAsync_v2 8B", htod_series);
  if (!launch_series.hooked.empty()) {
    Print("cuLaunchKernel (empty)", launch_series);
  } else {
    printf("cuLaunchKernel (empty)     skipped: the driver cannot load the PTX kernel\n");
  }
  return shimmed ? 0 : 3;
}
