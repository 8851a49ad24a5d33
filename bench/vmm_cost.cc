// vmm_cost: what each driver call on the shim's allocation path costs on this GPU, to explain
// (and bound) what an allocation through Missile can cost. One process plays both sides:
// cuMemCreate + export (the daemon's side), import + map + set access (the shim's side), then
// unmap + release. Prints the median microseconds of each step per block size, and the cost of
// mapping N separate 2 MiB blocks versus one block of N x 2 MiB.
#include <cuda.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

namespace {

using Clock = std::chrono::steady_clock;

double Us(Clock::time_point a, Clock::time_point b) {
  return std::chrono::duration<double, std::micro>(b - a).count();
}

double Median(std::vector<double> v) {
  std::sort(v.begin(), v.end());
  return v[v.size() / 2];
}

void Check(CUresult r, const char* what) {
  if (r != CUDA_SUCCESS) {
    fprintf(stderr, "vmm_cost: %s failed: %d\n", what, static_cast<int>(r));
    exit(1);
  }
}

struct Steps {
  std::vector<double> create, exp, import, map, access, unmap, release;
};

// Creates `count` blocks of `bytes`, exports, imports, maps them contiguously, sets access on
// the whole range, unmaps and releases; adds per-step totals (for all blocks) to `s`.
void Round(int ordinal, uint64_t bytes, int count, Steps* s) {
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  std::vector<CUmemGenericAllocationHandle> made(count), imported(count);
  std::vector<int> fds(count);
  auto t0 = Clock::now();
  for (int i = 0; i < count; ++i) Check(cuMemCreate(&made[i], bytes, &prop, 0), "cuMemCreate");
  auto t1 = Clock::now();
  for (int i = 0; i < count; ++i) {
    Check(cuMemExportToShareableHandle(&fds[i], made[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "export");
  }
  auto t2 = Clock::now();
  for (int i = 0; i < count; ++i) {
    Check(cuMemImportFromShareableHandle(&imported[i], reinterpret_cast<void*>(uintptr_t(fds[i])),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "import");
    close(fds[i]);
  }
  auto t3 = Clock::now();
  CUdeviceptr va = 0;
  Check(cuMemAddressReserve(&va, bytes * count, 0, 0, 0), "reserve");
  auto t4 = Clock::now();
  for (int i = 0; i < count; ++i) Check(cuMemMap(va + i * bytes, bytes, 0, imported[i], 0), "map");
  auto t5 = Clock::now();
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  Check(cuMemSetAccess(va, bytes * count, &access, 1), "set access");
  auto t6 = Clock::now();
  Check(cuMemsetD8_v2(va, 1, bytes * count), "memset");
  Check(cuCtxSynchronize(), "sync");
  auto t7 = Clock::now();
  Check(cuMemUnmap(va, bytes * count), "unmap");
  auto t8 = Clock::now();
  for (int i = 0; i < count; ++i) {
    Check(cuMemRelease(imported[i]), "release imported");
    Check(cuMemRelease(made[i]), "release");
  }
  auto t9 = Clock::now();
  cuMemAddressFree(va, bytes * count);
  s->create.push_back(Us(t0, t1));
  s->exp.push_back(Us(t1, t2));
  s->import.push_back(Us(t2, t3));
  s->map.push_back(Us(t4, t5));
  s->access.push_back(Us(t5, t6));
  s->unmap.push_back(Us(t7, t8));
  s->release.push_back(Us(t8, t9));
}

// Times each call on its own for `count` 2 MiB blocks made one after another (create, export,
// import, map, access per block), to tell a fixed cost per burst from a cost per call.
// long: one timed sequence per block; the timers sit next to the calls they time, so each
// printed column reads off the code.
void PerCall(int ordinal, int count) {
  const uint64_t bytes = 2 << 20;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = ordinal;
  prop.requestedHandleTypes = CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR;
  CUdeviceptr va = 0;
  Check(cuMemAddressReserve(&va, bytes * count, 0, 0, 0), "reserve");
  std::vector<CUmemGenericAllocationHandle> made(count), imported(count);
  printf("per call, 2 MiB blocks one after another (microseconds)\n%5s %9s %9s %9s %9s %9s\n",
         "block", "create", "export", "import", "map", "access");
  for (int i = 0; i < count; ++i) {
    int fd = -1;
    auto t0 = Clock::now();
    Check(cuMemCreate(&made[i], bytes, &prop, 0), "cuMemCreate");
    auto t1 = Clock::now();
    Check(cuMemExportToShareableHandle(&fd, made[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "export");
    auto t2 = Clock::now();
    Check(cuMemImportFromShareableHandle(&imported[i], reinterpret_cast<void*>(uintptr_t(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "import");
    auto t3 = Clock::now();
    close(fd);
    Check(cuMemMap(va + i * bytes, bytes, 0, imported[i], 0), "map");
    auto t4 = Clock::now();
    CUmemAccessDesc access{};
    access.location = prop.location;
    access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
    Check(cuMemSetAccess(va + i * bytes, bytes, &access, 1), "set access");
    auto t5 = Clock::now();
    printf("%5d %9.1f %9.1f %9.1f %9.1f %9.1f\n", i, Us(t0, t1), Us(t1, t2), Us(t2, t3), Us(t3, t4),
           Us(t4, t5));
  }
  // The same fds made up front, then imported one per call with 1 ms of idle between imports.
  std::vector<int> fds(count);
  std::vector<CUmemGenericAllocationHandle> again(count);
  for (int i = 0; i < count; ++i) {
    Check(cuMemExportToShareableHandle(&fds[i], made[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "export");
  }
  printf("import of a block this process already holds, 1 ms apart:");
  for (int i = 0; i < count; ++i) {
    usleep(1000);
    auto t0 = Clock::now();
    Check(cuMemImportFromShareableHandle(&again[i], reinterpret_cast<void*>(uintptr_t(fds[i])),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "import");
    printf(" %.1f", Us(t0, Clock::now()));
    close(fds[i]);
  }
  printf("\n");
  // Is a map's cost right after an import a wait for work the import started? Map the blocks
  // just imported again (a second range), 1 ms after each import.
  CUdeviceptr va2 = 0;
  Check(cuMemAddressReserve(&va2, bytes * count, 0, 0, 0), "reserve");
  printf("map 1 ms after its block's import:");
  for (int i = 0; i < count; ++i) {
    int fd = -1;
    CUmemGenericAllocationHandle h = 0;
    Check(cuMemExportToShareableHandle(&fd, made[i], CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR, 0),
          "export");
    Check(cuMemImportFromShareableHandle(&h, reinterpret_cast<void*>(uintptr_t(fd)),
                                         CU_MEM_HANDLE_TYPE_POSIX_FILE_DESCRIPTOR),
          "import");
    close(fd);
    usleep(1000);
    auto t0 = Clock::now();
    Check(cuMemMap(va2 + i * bytes, bytes, 0, h, 0), "map");
    printf(" %.1f", Us(t0, Clock::now()));
    cuMemRelease(h);
  }
  printf("\n");
  Check(cuMemUnmap(va2, bytes * count), "unmap");
  cuMemAddressFree(va2, bytes * count);
  Check(cuMemUnmap(va, bytes * count), "unmap");
  for (int i = 0; i < count; ++i) {
    cuMemRelease(again[i]);
    cuMemRelease(imported[i]);
    cuMemRelease(made[i]);
  }
  cuMemAddressFree(va, bytes * count);
}

}  // namespace

int main(int argc, char** argv) {
  int rounds = argc > 1 ? atoi(argv[1]) : 20;
  Check(cuInit(0), "cuInit");
  CUdevice dev;
  Check(cuDeviceGet(&dev, 0), "cuDeviceGet");
  CUcontext ctx;
  Check(cuDevicePrimaryCtxRetain(&ctx, dev), "retain");
  Check(cuCtxSetCurrent(ctx), "set current");
  printf("vmm_cost: median microseconds over %d rounds (all blocks of the round together)\n", rounds);
  printf("%-22s %9s %9s %9s %9s %9s %9s %9s %11s\n", "shape", "create", "export", "import",
         "map", "access", "unmap", "release", "shim side");
  const uint64_t kMiB = 1 << 20;
  struct Shape {
    uint64_t mib;
    int count;
  } shapes[] = {{2, 1}, {2, 4}, {2, 32}, {8, 1}, {64, 1}, {512, 1}, {1024, 1}, {2, 512}};
  for (const Shape& sh : shapes) {
    Steps s;
    for (int r = 0; r < rounds; ++r) Round(0, sh.mib * kMiB, sh.count, &s);
    char name[64];
    snprintf(name, sizeof(name), "%d x %llu MiB", sh.count, static_cast<unsigned long long>(sh.mib));
    double shim = Median(s.import) + Median(s.map) + Median(s.access);
    printf("%-22s %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %9.1f %11.1f\n", name, Median(s.create),
           Median(s.exp), Median(s.import), Median(s.map), Median(s.access), Median(s.unmap),
           Median(s.release), shim);
  }
  PerCall(0, 16);
  return 0;
}
