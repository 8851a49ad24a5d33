// pace_probe: GPU work for the pacing tests (driver API), timed with CLOCK_MONOTONIC so the
// test can compare moments across processes.
//   pace_probe ls MS            an LS request that stays on the GPU for MS milliseconds: a host
//                               function that sleeps MS, then a memset behind it on the same
//                               stream (the memset is the marked work item). Prints
//                               "marked t=NS" once enqueued and "done t=NS" when it finished.
//   pace_probe be [COPY_MIB] [PRIOR]
//                               first runs PRIOR memsets (each synchronised) so the BE has earlier
//                               items whose completion its shim has not reported yet; then
//                               prints "ready"; once stdin closes, runs one BE item: a memset of
//                               a buffer on its stream, then (COPY_MIB > 0) a pinned
//                               asynchronous copy of COPY_MIB MiB device-to-host behind it, and
//                               checks the bytes. Prints "be t0=NS t1=NS ok=1 waits=N" (N: stream
//                               waits it enqueued, counted by the test double) and exits.
//   pace_probe spin US SECONDS  prints "ready"; once stdin closes, launches the test double's
//                               fakecuda_spin kernel of US microseconds back to back (a
//                               synchronisation every 8) for SECONDS; prints "spin kernels=N".
// Exits 1 with "error ..." on any driver error.
#include <cuda.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>

namespace {

uint64_t Now() {
  timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<uint64_t>(ts.tv_sec) * 1000000000ull + static_cast<uint64_t>(ts.tv_nsec);
}

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    printf("error %s %d\n", what, static_cast<int>(r));
    exit(1);
  }
}

void CUDA_CB Sleep(void* ms) {
  std::this_thread::sleep_for(std::chrono::milliseconds(*static_cast<long*>(ms)));
}

// Stream waits this process enqueued, as the test double counts them (0 on a real driver).
// Under the shim, libcuda.so.1 is the shim: the driver behind it is MISSILE_REAL_LIBCUDA.
unsigned long long StreamWaits() {
  using Count = unsigned long long (*)(const char*);
  const char* real = getenv("MISSILE_REAL_LIBCUDA");
  void* h = dlopen(real != nullptr ? real : "libcuda.so.1", RTLD_NOW | RTLD_NOLOAD);
  auto count = h ? reinterpret_cast<Count>(dlsym(h, "fakecudaCallCount")) : nullptr;
  if (count == nullptr) return 0;
  unsigned long long n = 0;
  for (const char* name : {"cuStreamWaitValue32", "cuStreamWaitValue32_ptsz", "cuStreamWaitValue32_v2",
                           "cuStreamWaitValue32_v2_ptsz", "cuStreamWaitValue64_v2"}) {
    n += count(name);
  }
  return n;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 2) {
    fprintf(stderr, "usage: pace_probe ls MS | be [COPY_MIB]\n");
    return 2;
  }
  const std::string mode = argv[1];
  CUdevice dev;
  CUcontext ctx;
  Check(cuInit(0), "cuInit");
  Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
  Check(cuCtxSetCurrent(ctx), "set current");
  CUstream s;
  Check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "stream");
  constexpr size_t kWords = 1 << 16;
  CUdeviceptr buf;
  Check(cuMemAlloc_v2(&buf, kWords * 4), "alloc");
  if (mode == "ls" && argc >= 3) {
    static long ms = atol(argv[2]);
    Check(cuLaunchHostFunc(s, Sleep, &ms), "host func");
    Check(cuMemsetD32Async(buf, 7, kWords, s), "memset");
    printf("marked t=%llu\n", static_cast<unsigned long long>(Now()));
    Check(cuStreamSynchronize(s), "sync");
    printf("done t=%llu\n", static_cast<unsigned long long>(Now()));
    return 0;
  }
  if (mode == "be") {
    const size_t copy_bytes = (argc >= 3 ? strtoull(argv[2], nullptr, 10) : 0) << 20;
    const long prior = argc >= 4 ? atol(argv[3]) : 0;
    for (long i = 0; i < prior; ++i) {
      Check(cuMemsetD32Async(buf, 1, kWords, s), "prior memset");
      Check(cuStreamSynchronize(s), "prior sync");
    }
    void* host = nullptr;
    CUdeviceptr big = 0;
    if (copy_bytes > 0) {
      Check(cuMemAllocHost_v2(&host, copy_bytes), "host alloc");
      Check(cuMemAlloc_v2(&big, copy_bytes), "big alloc");
      memset(host, 0, copy_bytes);
    }
    printf("ready\n");
    char c;
    while (read(0, &c, 1) > 0) {
    }
    const uint64_t t0 = Now();
    bool ok = true;
    if (copy_bytes > 0) {
      Check(cuMemsetD32Async(big, 0x5a5a5a5a, copy_bytes / 4, s), "memset");
      Check(cuMemcpyDtoHAsync_v2(host, big, copy_bytes, s), "copy");
      Check(cuStreamSynchronize(s), "sync");
      const auto* words = static_cast<const uint32_t*>(host);
      for (size_t i = 0; i < copy_bytes / 4 && ok; ++i) ok = words[i] == 0x5a5a5a5au;
    } else {
      Check(cuMemsetD32Async(buf, 3, kWords, s), "memset");
      Check(cuStreamSynchronize(s), "sync");
    }
    const uint64_t t1 = Now();
    printf("be t0=%llu t1=%llu ok=%d waits=%llu\n", static_cast<unsigned long long>(t0),
           static_cast<unsigned long long>(t1), ok ? 1 : 0, StreamWaits());
    return ok ? 0 : 1;
  }
  if (mode == "spin" && argc >= 4) {
    CUmodule module;
    CUfunction spin;
    Check(cuModuleLoadData(&module, "fakecuda-module"), "module (needs the test double)");
    Check(cuModuleGetFunction(&spin, module, "fakecuda_spin"), "function");
    uint64_t duration_ns = strtoull(argv[2], nullptr, 10) * 1000;
    const uint64_t seconds = strtoull(argv[3], nullptr, 10);
    void* params[] = {&duration_ns};
    printf("ready\n");
    char c;
    while (read(0, &c, 1) > 0) {
    }
    const uint64_t end = Now() + seconds * 1000000000ull;
    uint64_t kernels = 0;
    while (Now() < end) {
      for (int i = 0; i < 8; ++i) {
        Check(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr), "launch");
      }
      Check(cuStreamSynchronize(s), "sync");
      kernels += 8;
    }
    printf("spin kernels=%llu\n", static_cast<unsigned long long>(kernels));
    return 0;
  }
  fprintf(stderr, "pace_probe: unknown mode\n");
  return 2;
}
