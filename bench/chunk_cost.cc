// chunk_cost: what cutting a host-to-device copy into chunks costs on the GPU itself, with
// and without the stream memory operations the copy gate puts around each chunk. No daemon,
// no shim: the plain driver API on one stream.
//
// For chunk sizes 2, 4 and 8 MiB, a 1 GiB pinned copy is issued as chunks:
//   whole         one copy of 1 GiB (the reference)
//   plain         chunk copies only
//   +done         each chunk followed by cuStreamWriteValue32 to a host word (with fence)
//   +wait+done    each chunk preceded by cuStreamWaitValue32 on a host word that is already
//                 set, and followed by the write (what a granted chunk costs the copy gate)
// (CU_STREAM_WRITE_VALUE_NO_MEMORY_BARRIER would drop the fence, but the v2 entry points
// reject it: CUDA_ERROR_INVALID_VALUE on the H200.)
// Prints GB/s (median of REPS) per variant and the implied cost per chunk in microseconds.
// usage: chunk_cost [REPS]
#include <cuda.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

namespace {

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    const char* name = nullptr;
    cuGetErrorName(r, &name);
    fprintf(stderr, "%s failed: %s\n", what, name ? name : "?");
    exit(1);
  }
}

}  // namespace

int main(int argc, char** argv) {
  const int reps = argc > 1 ? atoi(argv[1]) : 5;
  constexpr size_t kTotal = size_t{1} << 30;
  Check(cuInit(0), "cuInit");
  CUdevice dev;
  CUcontext ctx;
  Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
  Check(cuCtxSetCurrent(ctx), "set current");
  void* host = nullptr;
  Check(cuMemHostAlloc(&host, kTotal, 0), "cuMemHostAlloc");
  memset(host, 1, kTotal);
  CUdeviceptr dst;
  Check(cuMemAlloc(&dst, kTotal), "cuMemAlloc");
  void* words_host = nullptr;
  Check(cuMemHostAlloc(&words_host, 4096, CU_MEMHOSTALLOC_DEVICEMAP), "cuMemHostAlloc words");
  auto* words = static_cast<volatile uint32_t*>(words_host);
  words[0] = 1;  // the "go" word, already open
  words[1] = 0;  // the "done" word
  CUdeviceptr words_dev;
  Check(cuMemHostGetDevicePointer(&words_dev, words_host, 0), "device pointer");
  CUstream s;
  Check(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING), "cuStreamCreate");

  enum Variant { kWhole, kPlain, kDone, kWaitDone, kVariants };
  const char* names[] = {"whole", "plain", "+done", "+wait+done"};
  printf("chunk_cost: 1 GiB host-to-device, pinned, one stream, median of %d\n", reps);
  printf("%8s %-14s %8s %14s\n", "chunk", "variant", "GB/s", "us per chunk");
  double whole_s = 0;
  for (size_t chunk_mib : {2, 4, 8}) {
    const size_t chunk = chunk_mib << 20;
    for (int v = 0; v < kVariants; ++v) {
      if (v == kWhole && chunk_mib != 2) continue;
      std::vector<double> secs;
      for (int rep = 0; rep < reps + 1; ++rep) {
        auto t0 = std::chrono::steady_clock::now();
        if (v == kWhole) {
          Check(cuMemcpyHtoDAsync(dst, host, kTotal, s), "copy");
        } else {
          for (size_t off = 0; off < kTotal; off += chunk) {
            if (v == kWaitDone) {
              Check(cuStreamWaitValue32(s, words_dev, 1, CU_STREAM_WAIT_VALUE_GEQ), "wait");
            }
            Check(cuMemcpyHtoDAsync(dst + off, static_cast<char*>(host) + off, chunk, s), "copy");
            if (v == kDone || v == kWaitDone) {
              Check(cuStreamWriteValue32(s, words_dev + 4, 1, 0), "write");
            }
          }
        }
        Check(cuStreamSynchronize(s), "sync");
        double sec = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
        if (rep > 0) secs.push_back(sec);  // the first round warms up
      }
      std::sort(secs.begin(), secs.end());
      double med = secs[secs.size() / 2];
      if (v == kWhole) whole_s = med;
      double per_chunk_us = (med - whole_s) / (kTotal / chunk) * 1e6;
      printf("%5zuMiB %-14s %8.2f %14.2f\n", chunk_mib, names[v], kTotal / med / 1e9,
             v == kWhole ? 0.0 : per_chunk_us);
    }
  }
  return 0;
}
