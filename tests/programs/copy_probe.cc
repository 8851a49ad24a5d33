// copy_probe: host-device copy traffic for the PCIe scheduler tests (driver API, pinned host
// memory).
//   copy_probe lat  MIB COUNT GAP_MS [async]   COUNT copies host-to-device of MIB MiB, one every
//                                               GAP_MS; prints "lat p50_us=.. p99_us=.. max_us=.."
//   copy_probe bulk MIB SECONDS [async] [d2h]  copies of MIB MiB back to back for SECONDS;
//                                               prints "bulk copies=.. bytes_per_s=.."
//   option stall:MS: each copy waits behind MS milliseconds of other work on its stream (a host
//   function that sleeps; for a synchronous copy, on the legacy default stream), as a copy
//   queued behind a long kernel does.
// Prints "ready" once its memory is set up, and verifies the data of its last copy.
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    printf("error %s %d\n", what, static_cast<int>(r));
    exit(1);
  }
}

}  // namespace

// long: the probe's two modes (lat, bulk) over one context and one pair of buffers; the tests
// read the output lines it prints.
int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 5) {
    fprintf(stderr, "usage: copy_probe lat|bulk MIB COUNT|SECONDS GAP_MS|- [async] [d2h]\n");
    return 2;
  }
  std::string mode = argv[1];
  size_t bytes = strtoull(argv[2], nullptr, 10) << 20;
  bool async = false, d2h = false;
  static long stall_ms = 0;
  for (int i = 5; i < argc; ++i) {
    std::string arg = argv[i];
    async |= arg == "async";
    d2h |= arg == "d2h";
    if (arg.rfind("stall:", 0) == 0) stall_ms = atol(arg.c_str() + 6);
  }
  CUdevice dev;
  CUcontext ctx;
  Check(cuInit(0), "cuInit");
  Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
  Check(cuCtxSetCurrent(ctx), "set current");
  void* host = nullptr;
  Check(cuMemAllocHost_v2(&host, bytes), "cuMemAllocHost");
  memset(host, 0x3c, bytes);
  CUdeviceptr dptr;
  Check(cuMemAlloc_v2(&dptr, bytes), "cuMemAlloc");
  CUstream stream;
  Check(cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING), "cuStreamCreate");
  auto copy = [&] {
    if (stall_ms > 0) {
      CUhostFn busy = [](void*) { std::this_thread::sleep_for(std::chrono::milliseconds(stall_ms)); };
      Check(cuLaunchHostFunc(async ? stream : CU_STREAM_LEGACY, busy, nullptr), "cuLaunchHostFunc");
    }
    if (d2h) {
      if (async) {
        Check(cuMemcpyDtoHAsync_v2(host, dptr, bytes, stream), "DtoHAsync");
        Check(cuStreamSynchronize(stream), "sync");
      } else {
        Check(cuMemcpyDtoH_v2(host, dptr, bytes), "DtoH");
      }
    } else if (async) {
      Check(cuMemcpyHtoDAsync_v2(dptr, host, bytes, stream), "HtoDAsync");
      Check(cuStreamSynchronize(stream), "sync");
    } else {
      Check(cuMemcpyHtoD_v2(dptr, host, bytes), "HtoD");
    }
  };
  copy();  // warm up
  printf("ready\n");
  if (mode == "lat") {
    int count = atoi(argv[3]);
    double gap_ms = atof(argv[4]);
    std::vector<double> us;
    for (int i = 0; i < count; ++i) {
      auto t0 = Clock::now();
      copy();
      us.push_back(std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<long>(gap_ms * 1000)));
    }
    std::sort(us.begin(), us.end());
    printf("lat p50_us=%.1f p99_us=%.1f max_us=%.1f\n", us[us.size() / 2],
           us[static_cast<size_t>(0.99 * (us.size() - 1) + 0.5)], us.back());
  } else {
    double seconds = atof(argv[3]);
    auto end = Clock::now() + std::chrono::duration<double>(seconds);
    auto t0 = Clock::now();
    long copies = 0;
    while (Clock::now() < end) {
      copy();
      ++copies;
    }
    double s = std::chrono::duration<double>(Clock::now() - t0).count();
    printf("bulk copies=%ld bytes_per_s=%.0f\n", copies, copies * static_cast<double>(bytes) / s);
  }
  // The data arrived intact.
  std::vector<unsigned char> back(bytes);
  Check(cuMemcpyDtoH_v2(back.data(), dptr, bytes), "verify");
  bool ok = d2h || std::all_of(back.begin(), back.end(), [](unsigned char c) { return c == 0x3c; });
  printf("data %s\n", ok ? "ok" : "corrupt");
  return ok ? 0 : 1;
}
