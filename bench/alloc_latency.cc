// alloc_latency: how long a device allocation takes, plain or through libmissile.so and
// missiled (run it under the shim with a daemon for the latter).
//
//   alloc_latency [ITERATIONS]
// For each size from 2 MiB to 1 GiB (ITERATIONS per size, a fifth of them but at least 5 from
// 256 MiB), two patterns:
//  - cold: that many allocations (timed) kept live together, each touched with a 1-byte
//    memset, then all freed. Under Missile each one needs blocks from the daemon (a lease, an
//    import and a map). At most 8 GiB are live at once, so large sizes allocate fewer.
//  - warm: after 2 untimed rounds, that many times cuMemAlloc (timed), a 1-byte memset,
//    cuMemFree (timed). Under Missile the freed range is reused by the next allocation.
// The cold pattern runs first for each size, so nothing of that size is cached yet. Then 20000
// small allocations of 4 KiB (timed one by one, all kept, then freed). Prints p50/p99/max per
// size in microseconds.
#include <cuda.h>
#include <dlfcn.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

constexpr size_t kColdMaxLiveBytes = size_t{8} << 30;  // fits any quota the bench scripts use

double Pct(std::vector<double> v, double p) {
  std::sort(v.begin(), v.end());
  return v[static_cast<size_t>(p * (v.size() - 1) + 0.5)];
}

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "alloc_latency: %s failed: %d\n", what, static_cast<int>(r));
    exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  int iterations = argc > 1 ? atoi(argv[1]) : 50;
  Check(cuInit(0), "cuInit");
  CUdevice dev;
  Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "cuDevicePrimaryCtxRetain");
  Check(cuCtxSetCurrent(ctx), "cuCtxSetCurrent");
  Dl_info info;
  bool shimmed = dladdr(reinterpret_cast<void*>(&cuMemAlloc_v2), &info) != 0 &&
                 std::string(info.dli_fname).find("missile") != std::string::npos;
  printf("alloc_latency: %s, %d iterations per size\n",
         shimmed ? "through libmissile.so" : "plain driver", iterations);
  printf("# warm: allocate, memset, free in a loop (alloc/free columns; under Missile the freed "
         "range is reused); cold: the same count (at most 8 GiB) kept live together, then freed "
         "(each allocation new; cold n = how many)\n");
  printf("%10s %10s %10s %10s %10s %10s %10s %10s %6s\n", "size", "alloc p50", "alloc p99",
         "alloc max", "free p50", "free p99", "cold p50", "cold p99", "cold n");
  // The first allocation pays one-off costs (under Missile: connecting to the daemon). A size
  // no pattern uses, so that nothing it leaves behind serves a cold allocation.
  for (int i = 0; i < 2; ++i) {
    CUdeviceptr p = 0;
    Check(cuMemAlloc_v2(&p, size_t{6} << 20), "cuMemAlloc warm-up");
    Check(cuMemsetD8_v2(p, 1, 1), "cuMemsetD8");
    Check(cuCtxSynchronize(), "cuCtxSynchronize");
    Check(cuMemFree_v2(p), "cuMemFree warm-up");
  }
  for (size_t mib = 2; mib <= 1024; mib *= 2) {
    std::vector<double> alloc_us, free_us, cold_us;
    int n = mib >= 256 ? std::max(5, iterations / 5) : iterations;
    int cold_n = static_cast<int>(std::min<size_t>(n, std::max<size_t>(1, kColdMaxLiveBytes /
                                                                           (mib << 20))));
    std::vector<CUdeviceptr> live(cold_n);
    for (CUdeviceptr& p : live) {
      auto t0 = Clock::now();
      Check(cuMemAlloc_v2(&p, mib << 20), "cuMemAlloc cold");
      cold_us.push_back(Us(t0, Clock::now()));
      Check(cuMemsetD8_v2(p, 1, 1), "cuMemsetD8");
    }
    Check(cuCtxSynchronize(), "cuCtxSynchronize");
    for (CUdeviceptr p : live) Check(cuMemFree_v2(p), "cuMemFree cold");
    for (int i = 0; i < n + 2; ++i) {
      CUdeviceptr p = 0;
      auto t0 = Clock::now();
      Check(cuMemAlloc_v2(&p, mib << 20), "cuMemAlloc");
      auto t1 = Clock::now();
      Check(cuMemsetD8_v2(p, 1, 1), "cuMemsetD8");
      Check(cuCtxSynchronize(), "cuCtxSynchronize");
      auto t2 = Clock::now();
      Check(cuMemFree_v2(p), "cuMemFree");
      auto t3 = Clock::now();
      if (i >= 2) {  // the first two warm the path
        alloc_us.push_back(Us(t0, t1));
        free_us.push_back(Us(t2, t3));
      }
    }
    printf("%7zu MiB %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %10.1f %6d\n", mib,
           Pct(alloc_us, 0.5), Pct(alloc_us, 0.99), Pct(alloc_us, 1.0), Pct(free_us, 0.5),
           Pct(free_us, 0.99), Pct(cold_us, 0.5), Pct(cold_us, 0.99), cold_n);
  }
  std::vector<double> small_us, small_free_us;
  std::vector<CUdeviceptr> small(20000);
  for (auto& p : small) {
    auto t0 = Clock::now();
    Check(cuMemAlloc_v2(&p, 4096), "cuMemAlloc small");
    small_us.push_back(Us(t0, Clock::now()));
  }
  for (auto p : small) {
    auto t0 = Clock::now();
    Check(cuMemFree_v2(p), "cuMemFree small");
    small_free_us.push_back(Us(t0, Clock::now()));
  }
  printf("%10s %10.2f %10.2f %10.1f %10.2f %10.2f %10s %10s %6s\n", "4 KiB", Pct(small_us, 0.5),
         Pct(small_us, 0.99), Pct(small_us, 1.0), Pct(small_free_us, 0.5),
         Pct(small_free_us, 0.99), "-", "-", "-");
  return 0;
}
