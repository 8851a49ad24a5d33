// pace_probe: GPU work for the pacing tests (driver API), timed with CLOCK_MONOTONIC so the
// test can compare moments across processes.
//   pace_probe ls MS [WAIT]     an LS request that stays on the GPU for MS milliseconds: a host
//                               function that sleeps MS, then a memset behind it on the same
//                               stream (the memset is the marked work item). Prints
//                               "marked t=NS" once enqueued and "done t=NS" when it finished.
//                               WAIT: sync (cuStreamSynchronize, the default), or stream-query
//                               / event-query: polls cuStreamQuery, or cuEventQuery of an event
//                               recorded behind the memset, every 0.2 ms; then stays (still a
//                               tenant) until stdin closes.
//   pace_probe be [COPY_MIB] [PRIOR]
//                               first runs PRIOR memsets (each synchronised) so the BE has earlier
//                               items whose completion its shim has not reported yet; then
//                               prints "ready"; once stdin closes, runs one BE item: a memset of
//                               a buffer on its stream, then (COPY_MIB > 0) a pinned
//                               asynchronous copy of COPY_MIB MiB device-to-host behind it, and
//                               checks the bytes. Prints "be t0=NS t1=NS ok=1 waits=N" (N: stream
//                               waits it enqueued, counted by the test double) and exits.
//   pace_probe order N          prints "ready"; once stdin closes, runs on two streams joined by
//                               events: s1 fills A with 1 and B with 0, s2 waits for that and
//                               adds A to B N times, s1 waits for s2 and adds B into C; then
//                               checks every word of B is N and of C is N. Prints "order ok=1".
//   pace_probe idle             runs one memset (so the tenant joins its GPU's pacing), prints
//                               "ready" and exits once stdin closes.
//   pace_probe spin US SECONDS  prints "ready"; once stdin closes, launches the test double's
//                               fakecuda_spin kernel of US microseconds back to back (a
//                               synchronisation every 8) for SECONDS; prints "spin kernels=N".
//   pace_probe graph N R        fills A with 1 and B with 0, captures N kernels adding A into B
//                               (0.2 ms each) into a graph and instantiates it; prints "ready";
//                               once stdin closes, launches the graph R times (alternating two
//                               streams) and checks every word of B is N * R. Prints
//                               "graph ok=1 b0=N*R".
//   pace_probe requests N K US GAP_MS
//                               an eager LS service: N requests GAP_MS milliseconds apart, each
//                               K fakecuda_spin kernels of US microseconds, one after the other
//                               (each synchronised before the next is launched, as a program
//                               that reads a result to pick its next step), after 5 untimed
//                               ones; times each request from its first launch to its last
//                               synchronisation. Prints
//                               "requests n=N p50_us=X p99_us=Y max_us=Z".
//   pace_probe sms GRAPH        prints "ready"; once stdin closes, launches the test double's
//                               fakecuda_sm_probe kernel (4 blocks per SM) and reads back the
//                               SM of every block; with GRAPH=1 the kernel is captured into a
//                               graph first, instantiated and launched (its mask is taken at
//                               upload). Prints "sms n=COUNT list=A,B,..." (distinct SMs, sorted).
// Every mode runs on device 0, or on device N with PACE_PROBE_DEVICE=N (its primary context).
// Exits 1 with "error ..." on any driver error.
#include <cuda.h>
#include <dlfcn.h>
#include <time.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <algorithm>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

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

// A built-in kernel of the test double (its module loaded once).
CUfunction Kernel(const char* name) {
  static CUmodule module = [] {
    CUmodule m;
    Check(cuModuleLoadData(&m, "fakecuda-module"), "module (needs the test double)");
    return m;
  }();
  CUfunction f;
  Check(cuModuleGetFunction(&f, module, name), name);
  return f;
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

// long: the probe's two modes (ls, be) over one context, stream and kernel; the tests read the
// output lines it prints.
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
  const char* device = getenv("PACE_PROBE_DEVICE");
  Check(cuDeviceGet(&dev, device != nullptr ? atoi(device) : 0), "cuDeviceGet");
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
    const std::string wait = argc >= 4 ? argv[3] : "sync";
    CUevent done;
    if (wait == "event-query") {
      Check(cuEventCreate(&done, CU_EVENT_DISABLE_TIMING), "event");
      Check(cuEventRecord(done, s), "record");
    }
    printf("marked t=%llu\n", static_cast<unsigned long long>(Now()));
    if (wait == "sync") {
      Check(cuStreamSynchronize(s), "sync");
    } else {
      CUresult r;
      while ((r = wait == "event-query" ? cuEventQuery(done) : cuStreamQuery(s)) ==
             CUDA_ERROR_NOT_READY) {
        std::this_thread::sleep_for(std::chrono::microseconds(200));
      }
      Check(r, "query");
    }
    printf("done t=%llu\n", static_cast<unsigned long long>(Now()));
    if (wait != "sync") {
      for (char c; read(0, &c, 1) > 0;) {
      }
    }
    return 0;
  }
  if (mode == "idle") {
    Check(cuMemsetD32Async(buf, 3, kWords, s), "memset");
    Check(cuStreamSynchronize(s), "sync");
    printf("ready\n");
    char c;
    while (read(0, &c, 1) > 0) {
    }
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
  if (mode == "order" && argc >= 3) {
    const long n = atol(argv[2]);
    CUfunction fill = Kernel("fakecuda_fill_u32");
    CUfunction add = Kernel("fakecuda_add_u32");
    CUstream s2;
    Check(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), "stream 2");
    CUevent filled, added;
    Check(cuEventCreate(&filled, CU_EVENT_DISABLE_TIMING), "event");
    Check(cuEventCreate(&added, CU_EVENT_DISABLE_TIMING), "event");
    CUdeviceptr a, b, c;
    uint64_t count = 4096;
    Check(cuMemAlloc_v2(&a, count * 4), "a");
    Check(cuMemAlloc_v2(&b, count * 4), "b");
    Check(cuMemAlloc_v2(&c, count * 4), "c");
    printf("ready\n");
    char ch;
    while (read(0, &ch, 1) > 0) {
    }
    uint32_t one = 1, zero = 0;
    uint64_t dur = 200'000;  // 0.2 ms each
    void* fill_a[] = {&a, &one, &count, &dur};
    void* fill_b[] = {&b, &zero, &count, &dur};
    void* fill_c[] = {&c, &zero, &count, &dur};
    void* add_ba[] = {&b, &a, &count, &dur};
    void* add_cb[] = {&c, &b, &count, &dur};
    Check(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fill_a, nullptr), "fill a");
    Check(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fill_b, nullptr), "fill b");
    Check(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fill_c, nullptr), "fill c");
    Check(cuEventRecord(filled, s), "record");
    Check(cuStreamWaitEvent(s2, filled, 0), "wait");
    for (long i = 0; i < n; ++i) {
      Check(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s2, add_ba, nullptr), "add b");
    }
    Check(cuEventRecord(added, s2), "record");
    Check(cuStreamWaitEvent(s, added, 0), "wait");
    Check(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, add_cb, nullptr), "add c");
    Check(cuStreamSynchronize(s), "sync");
    std::vector<uint32_t> hb(count), hc(count);
    Check(cuMemcpyDtoH_v2(hb.data(), b, count * 4), "read b");
    Check(cuMemcpyDtoH_v2(hc.data(), c, count * 4), "read c");
    bool ok = true;
    for (uint64_t i = 0; i < count; ++i) {
      ok &= hb[i] == static_cast<uint32_t>(n) && hc[i] == static_cast<uint32_t>(n);
    }
    printf("order ok=%d b0=%u c0=%u\n", ok ? 1 : 0, hb[0], hc[0]);
    return ok ? 0 : 1;
  }
  if (mode == "graph" && argc >= 4) {
    const long n = atol(argv[2]);
    const long launches = atol(argv[3]);
    CUfunction fill = Kernel("fakecuda_fill_u32");
    CUfunction add = Kernel("fakecuda_add_u32");
    CUstream s2;
    Check(cuStreamCreate(&s2, CU_STREAM_NON_BLOCKING), "stream 2");
    CUdeviceptr a, b;
    uint64_t count = 4096;
    Check(cuMemAlloc_v2(&a, count * 4), "a");
    Check(cuMemAlloc_v2(&b, count * 4), "b");
    uint32_t one = 1, zero = 0;
    uint64_t dur = 200'000;
    void* fill_a[] = {&a, &one, &count, &dur};
    void* fill_b[] = {&b, &zero, &count, &dur};
    void* add_ba[] = {&b, &a, &count, &dur};
    Check(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fill_a, nullptr), "fill a");
    Check(cuLaunchKernel(fill, 1, 1, 1, 1, 1, 1, 0, s, fill_b, nullptr), "fill b");
    Check(cuStreamSynchronize(s), "sync");
    Check(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture");
    for (long i = 0; i < n; ++i) {
      Check(cuLaunchKernel(add, 1, 1, 1, 1, 1, 1, 0, s, add_ba, nullptr), "add b");
    }
    CUgraph graph;
    Check(cuStreamEndCapture(s, &graph), "end capture");
    CUgraphExec exec;
    Check(cuGraphInstantiateWithFlags(&exec, graph, 0), "instantiate");
    printf("ready\n");
    char ch;
    while (read(0, &ch, 1) > 0) {
    }
    for (long i = 0; i < launches; ++i) {
      Check(cuGraphLaunch(exec, i % 2 == 0 ? s : s2), "launch");
    }
    Check(cuCtxSynchronize(), "sync");
    std::vector<uint32_t> hb(count);
    Check(cuMemcpyDtoH_v2(hb.data(), b, count * 4), "read b");
    bool ok = true;
    for (uint64_t i = 0; i < count; ++i) ok &= hb[i] == static_cast<uint32_t>(n * launches);
    Check(cuGraphExecDestroy(exec), "destroy");
    printf("graph ok=%d b0=%u\n", ok ? 1 : 0, hb[0]);
    return ok ? 0 : 1;
  }
  if (mode == "sms" && argc >= 3) {
    const bool graph = atoi(argv[2]) != 0;
    int sm_count = 0;
    Check(cuDeviceGetAttribute(&sm_count, CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, dev), "sms");
    const unsigned blocks = 4 * static_cast<unsigned>(sm_count);
    CUdeviceptr out;
    Check(cuMemAlloc_v2(&out, blocks * 4), "out");
    uint64_t dur = 10'000;
    void* params[] = {&out, &dur};
    CUfunction probe = Kernel("fakecuda_sm_probe");
    printf("ready\n");
    char ch;
    while (read(0, &ch, 1) > 0) {
    }
    if (graph) {
      Check(cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL), "capture");
      Check(cuLaunchKernel(probe, blocks, 1, 1, 1, 1, 1, 0, s, params, nullptr), "probe");
      CUgraph g;
      Check(cuStreamEndCapture(s, &g), "end capture");
      CUgraphExec exec;
      Check(cuGraphInstantiateWithFlags(&exec, g, 0), "instantiate");
      Check(cuGraphLaunch(exec, s), "launch");
    } else {
      Check(cuLaunchKernel(probe, blocks, 1, 1, 1, 1, 1, 0, s, params, nullptr), "probe");
    }
    Check(cuStreamSynchronize(s), "sync");
    std::vector<uint32_t> host(blocks);
    Check(cuMemcpyDtoH_v2(host.data(), out, blocks * 4), "read");
    std::sort(host.begin(), host.end());
    host.erase(std::unique(host.begin(), host.end()), host.end());
    std::string list;
    for (uint32_t sm : host) list += (list.empty() ? "" : ",") + std::to_string(sm);
    printf("sms n=%zu list=%s\n", host.size(), list.c_str());
    return 0;
  }
  if (mode == "spin" && argc >= 4) {
    CUfunction spin = Kernel("fakecuda_spin");
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
  if (mode == "requests" && argc >= 6) {
    CUfunction spin = Kernel("fakecuda_spin");
    const long n = atol(argv[2]);
    const long k = atol(argv[3]);
    uint64_t duration_ns = strtoull(argv[4], nullptr, 10) * 1000;
    const long gap_ms = atol(argv[5]);
    constexpr long kWarmup = 5;  // untimed: the first requests start the test double's threads
    void* params[] = {&duration_ns};
    std::vector<uint64_t> latency;
    for (long i = -kWarmup; i < n; ++i) {
      const uint64_t t0 = Now();
      for (long j = 0; j < k; ++j) {
        Check(cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr), "launch");
        Check(cuStreamSynchronize(s), "sync");
      }
      if (i >= 0) latency.push_back(Now() - t0);
      std::this_thread::sleep_for(std::chrono::milliseconds(gap_ms));
    }
    if (latency.empty()) return 2;
    std::sort(latency.begin(), latency.end());
    auto at = [&](double q) {
      return latency[static_cast<size_t>(q * static_cast<double>(latency.size() - 1))] / 1000;
    };
    printf("requests n=%ld p50_us=%llu p99_us=%llu max_us=%llu\n", n,
           static_cast<unsigned long long>(at(0.5)), static_cast<unsigned long long>(at(0.99)),
           static_cast<unsigned long long>(latency.back() / 1000));
    return 0;
  }
  fprintf(stderr, "pace_probe: unknown mode\n");
  return 2;
}
