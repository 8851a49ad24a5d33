// soak_tenant: one tenant of the soak and fault-injection run (tests/soak/run_soak.py), on the
// driver test double (its built-in kernels). Driver API only, like any program under the shim.
//
//   soak_tenant ID SECONDS [STATS_PATH]
//
// Until SECONDS pass or SIGTERM arrives, it repeats one round: allocate two device buffers of
// 1 to 4 MiB, fill pinned host memory with a pattern of its own (from ID and the round), copy it
// to the device (synchronous and asynchronous copies in turn), copy it back and check it, launch
// kernels (fakecuda_fill_u32, fakecuda_add_u32) that add a constant to it on the device, copy it
// back and check it again, and free the buffers. Every data check runs right after a copy.
// It times every driver call and keeps the worst of each kind.
//
// Output (stdout, and STATS_PATH rewritten after every round so a driver can read the figures
// of a tenant that it kills): one line
//   soak_tenant id=ID rounds=N ops=N corrupt=N errors=N worst_us=N worst_call=NAME
// Exit status: 0 when every check passed and every call succeeded; 3 on corrupt data (printed
// at once, with the first bad word); 1 on a failed call; 2 on bad arguments.
#include <cuda.h>
#include <signal.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <random>
#include <string>
#include <thread>

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kMaxBytes = 4 << 20;
constexpr size_t kMaxWords = kMaxBytes / sizeof(uint32_t);

volatile sig_atomic_t g_stop = 0;

void OnTerm(int) { g_stop = 1; }

struct Stats {
  uint32_t id = 0;
  uint64_t rounds = 0;
  uint64_t ops = 0;
  uint64_t corrupt = 0;
  uint64_t errors = 0;
  double worst_us = 0;
  const char* worst_call = "none";
};

Stats g_stats;
std::string g_stats_path;

std::string StatsLine() {
  char line[256];
  snprintf(line, sizeof(line),
           "soak_tenant id=%u rounds=%llu ops=%llu corrupt=%llu errors=%llu worst_us=%.0f "
           "worst_call=%s\n",
           g_stats.id, static_cast<unsigned long long>(g_stats.rounds),
           static_cast<unsigned long long>(g_stats.ops),
           static_cast<unsigned long long>(g_stats.corrupt),
           static_cast<unsigned long long>(g_stats.errors), g_stats.worst_us,
           g_stats.worst_call);
  return line;
}

// Written to a temporary name and renamed, so a reader never sees half a line.
void WriteStats() {
  if (g_stats_path.empty()) return;
  const std::string tmp = g_stats_path + ".tmp";
  FILE* f = fopen(tmp.c_str(), "w");
  if (f == nullptr) return;
  fputs(StatsLine().c_str(), f);
  fclose(f);
  rename(tmp.c_str(), g_stats_path.c_str());
}

[[noreturn]] void Finish(int code) {
  WriteStats();
  fputs(StatsLine().c_str(), stdout);
  fflush(stdout);
  exit(code);
}

// Runs one driver call, timing it; a failure ends the tenant.
template <typename F>
void Call(const char* name, F&& f) {
  const auto t0 = Clock::now();
  const CUresult r = f();
  const double us = std::chrono::duration<double, std::micro>(Clock::now() - t0).count();
  ++g_stats.ops;
  if (us > g_stats.worst_us) {
    g_stats.worst_us = us;
    g_stats.worst_call = name;
  }
  if (r != CUDA_SUCCESS) {
    ++g_stats.errors;
    printf("error %s %d\n", name, static_cast<int>(r));
    Finish(1);
  }
}

uint32_t Pattern(uint32_t id, uint64_t round, size_t i) {
  uint64_t x = (uint64_t{id} << 40) ^ (round * 0x9E3779B97F4A7C15ull) ^ i;
  x ^= x >> 31;
  x *= 0xBF58476D1CE4E5B9ull;
  return static_cast<uint32_t>(x ^ (x >> 29));
}

// Checks `got` against the pattern plus `add`; on a mismatch reports it and ends the tenant.
void Verify(const uint32_t* got, size_t words, uint64_t round, uint32_t add, const char* after) {
  for (size_t i = 0; i < words; ++i) {
    const uint32_t want = Pattern(g_stats.id, round, i) + add;
    if (got[i] != want) {
      ++g_stats.corrupt;
      printf("corrupt id=%u round=%llu after=%s word=%zu got=%08x want=%08x\n", g_stats.id,
             static_cast<unsigned long long>(round), after, i, got[i], want);
      Finish(3);
    }
  }
}

struct Kernels {
  CUfunction fill = nullptr;
  CUfunction add = nullptr;
};

// long: one round of the tenant's work, the calls in the order the soak checks them; splitting
// it would only pass the same buffers and stream around.
void Round(const Kernels& k, CUstream stream, uint32_t* host, uint32_t* back, std::mt19937& rng) {
  const uint64_t round = g_stats.rounds;
  const size_t words = (1 + rng() % 4) * (kMaxWords / 4);
  const size_t bytes = words * sizeof(uint32_t);
  const bool async = round % 2 == 1;
  for (size_t i = 0; i < words; ++i) host[i] = Pattern(g_stats.id, round, i);

  CUdeviceptr a = 0, b = 0;
  Call("cuMemAlloc", [&] { return cuMemAlloc_v2(&a, bytes); });
  Call("cuMemAlloc", [&] { return cuMemAlloc_v2(&b, bytes); });
  if (async) {
    Call("cuMemcpyHtoDAsync", [&] { return cuMemcpyHtoDAsync_v2(a, host, bytes, stream); });
    Call("cuMemcpyDtoHAsync", [&] { return cuMemcpyDtoHAsync_v2(back, a, bytes, stream); });
    Call("cuStreamSynchronize", [&] { return cuStreamSynchronize(stream); });
  } else {
    Call("cuMemcpyHtoD", [&] { return cuMemcpyHtoD_v2(a, host, bytes); });
    Call("cuMemcpyDtoH", [&] { return cuMemcpyDtoH_v2(back, a, bytes); });
  }
  Verify(back, words, round, 0, "copy");

  // b = add; a += b, on the device.
  uint32_t add = static_cast<uint32_t>(round % 1000) + 1;
  uint64_t count = words;
  uint64_t duration_ns = 20'000;
  void* fill_args[] = {&b, &add, &count, &duration_ns};
  void* add_args[] = {&a, &b, &count, &duration_ns};
  Call("cuLaunchKernel", [&] {
    return cuLaunchKernel(k.fill, 1, 1, 1, 1, 1, 1, 0, stream, fill_args, nullptr);
  });
  Call("cuLaunchKernel", [&] {
    return cuLaunchKernel(k.add, 1, 1, 1, 1, 1, 1, 0, stream, add_args, nullptr);
  });
  Call("cuStreamSynchronize", [&] { return cuStreamSynchronize(stream); });
  if (async) {
    Call("cuMemcpyDtoHAsync", [&] { return cuMemcpyDtoHAsync_v2(back, a, bytes, stream); });
    Call("cuStreamSynchronize", [&] { return cuStreamSynchronize(stream); });
  } else {
    Call("cuMemcpyDtoH", [&] { return cuMemcpyDtoH_v2(back, a, bytes); });
  }
  Verify(back, words, round, add, "kernel");
  Call("cuMemFree", [&] { return cuMemFree_v2(a); });
  Call("cuMemFree", [&] { return cuMemFree_v2(b); });
  ++g_stats.rounds;
}

}  // namespace

int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  if (argc < 3) {
    fprintf(stderr, "usage: soak_tenant ID SECONDS [STATS_PATH]\n");
    return 2;
  }
  char* end = nullptr;
  const unsigned long id = strtoul(argv[1], &end, 10);
  const double seconds = atof(argv[2]);
  if (*end != '\0' || id > 0xffffff || !(seconds > 0)) {
    fprintf(stderr, "soak_tenant: ID must be an integer in [0, 16777215], SECONDS positive\n");
    return 2;
  }
  g_stats.id = static_cast<uint32_t>(id);
  if (argc > 3) g_stats_path = argv[3];
  struct sigaction sa = {};
  sa.sa_handler = OnTerm;
  sigaction(SIGTERM, &sa, nullptr);
  sigaction(SIGINT, &sa, nullptr);

  CUdevice dev;
  CUcontext ctx;
  CUmodule module;
  Kernels k;
  CUstream stream;
  void* host = nullptr;
  void* back = nullptr;
  Call("cuInit", [&] { return cuInit(0); });
  Call("cuDeviceGet", [&] { return cuDeviceGet(&dev, 0); });
  Call("cuDevicePrimaryCtxRetain", [&] { return cuDevicePrimaryCtxRetain(&ctx, dev); });
  Call("cuCtxSetCurrent", [&] { return cuCtxSetCurrent(ctx); });
  Call("cuModuleLoadData", [&] { return cuModuleLoadData(&module, "fakecuda-module"); });
  Call("cuModuleGetFunction",
       [&] { return cuModuleGetFunction(&k.fill, module, "fakecuda_fill_u32"); });
  Call("cuModuleGetFunction",
       [&] { return cuModuleGetFunction(&k.add, module, "fakecuda_add_u32"); });
  Call("cuStreamCreate", [&] { return cuStreamCreate(&stream, CU_STREAM_NON_BLOCKING); });
  Call("cuMemAllocHost", [&] { return cuMemAllocHost_v2(&host, kMaxBytes); });
  Call("cuMemAllocHost", [&] { return cuMemAllocHost_v2(&back, kMaxBytes); });
  printf("ready\n");

  std::mt19937 rng(static_cast<uint32_t>(id) * 7919u + 1);
  const auto deadline = Clock::now() + std::chrono::duration<double>(seconds);
  while (g_stop == 0 && Clock::now() < deadline) {
    Round(k, stream, static_cast<uint32_t*>(host), static_cast<uint32_t*>(back), rng);
    WriteStats();
    // A pause between rounds: 32 tenants on a small machine leave the daemon a core.
    std::this_thread::sleep_for(std::chrono::milliseconds(5 + rng() % 20));
  }
  Finish(0);
}
