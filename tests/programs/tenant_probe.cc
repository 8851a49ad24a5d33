// tenant_probe: a driver API program that plays a tenant in the daemon tests. It runs the
// steps given as arguments, in order, and prints one line per step:
//   info                 "info free=<bytes> total=<bytes> devtotal=<bytes>" (cuMemGetInfo,
//                        cuDeviceTotalMem)
//   alloc:<MiB>          allocate, fill with a pattern unique to this process, read it back:
//                        "alloc <MiB> ok phys=<physical address of each 2 MiB, comma-separated>"
//                        or "alloc <MiB> err <code>"
//   zero:<MiB>           allocate and read before writing anything: "zero <MiB> yes|no
//                        phys=<...>" (yes: every byte was 0), then fill it like alloc
//   small:<count>        <count> allocations of 4 KiB each, kept: "small <count> ok|err <code>"
//   many:<MiB>:<n>       <n> allocations of <MiB>, each filled and checked, all kept:
//                        "many <MiB> <n> ok|corrupt imports=<k>" or "many <MiB> <n> err <code>"
//   loop:<MiB>:<n>       <n> times: allocate <MiB>, fill and check, free:
//                        "loop <MiB> <n> ok|corrupt imports=<k>" or "loop <MiB> <n> err <code>"
//   vmm:<MiB>            cuMemCreate + cuMemAddressReserve + cuMemMap + cuMemSetAccess, write,
//                        read, unmap, release: "vmm <MiB> ok|err <code>"
//   async:<MiB>          cuMemAllocAsync + write + cuMemFreeAsync + synchronize: "async ..."
//   vmmc:<MiB>           cuMemCreate asking for compressible memory (CU_MEM_ALLOCATION_COMP_GENERIC),
//                        mapped, written and read, kept until exit: "vmmc <MiB> ok compressed=<0|1>
//                        imports=<k>" (compressed: what cuMemGetAllocationPropertiesFromHandle
//                        says was granted) or "vmmc <MiB> err <code>"
//   capture:<MiB>        on a stream being captured into a graph: cuMemAllocAsync, a memset of
//                        it, and (for even <MiB>) cuMemFreeAsync; then the graph is instantiated,
//                        launched and synchronized, the memory read back (for odd <MiB>, and
//                        freed after that with cuMemFreeAsync outside the capture):
//                        "capture <MiB> ok|corrupt|err <code>"
//   capturepool:<MiB>    the same with cuMemAllocFromPoolAsync from the device's default pool
//   range                cuMemGetAddressRange of an interior pointer of the last allocation:
//                        "range base_ok=<0|1> size=<bytes>"
//   check                re-reads every allocation still held: "check ok|corrupt"
//   freeall              frees every allocation: "freeall ok|err <code>"
//   hold                 prints "ready" and waits until stdin closes (or the process is killed)
//   await:<path>         prints "awaiting" and waits until <path> exists (at most 60 s, else
//                        "await timeout" and exit 3)
//   dev:<n>              makes device n's primary context current for the steps after it (the
//                        probe starts on device 0): "dev <n> ok|err <code>"
//   peer                 fills the second-to-last allocation with a new pattern and copies it
//                        with cuMemcpyPeer to the last one, each with the context it was
//                        allocated in, then reads back 4 KiB at both
//                        ends of the copy (below the scheduler's bypass size):
//                        "peer <bytes> ok|corrupt|err <code>"
// Physical addresses come from the driver test double when it is the driver (fakecuda's
// fakecudaPointerPhysAddr); on a real driver they print as 0. <k> is how many blocks this process
// imported (cuMemImportFromShareableHandle, counted by the test double) during the step; -1 on a
// real driver.
#include <cuda.h>
#include <dlfcn.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

namespace {

struct Held {
  CUdeviceptr ptr;
  size_t bytes;
  unsigned char pattern;
  CUcontext ctx;  // current when it was allocated
};

std::vector<Held> held;

unsigned long long PhysAddr(CUdeviceptr p) {
  // The shim loads the real driver privately; find the test double by the path it was given.
  const char* path = getenv("MISSILE_REAL_LIBCUDA");
  void* h = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (h == nullptr) return 0;
  using Fn = CUresult (*)(CUdeviceptr, unsigned long long*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "fakecudaPointerPhysAddr"));
  unsigned long long phys = 0;
  if (fn == nullptr || fn(p, &phys) != CUDA_SUCCESS) phys = 0;
  dlclose(h);
  return phys;
}

// This process's calls of a driver entry point so far, as the test double counts them; -1 when
// the driver is not the test double.
long long CallCount(const char* name) {
  const char* path = getenv("MISSILE_REAL_LIBCUDA");
  void* h = path != nullptr ? dlopen(path, RTLD_NOW | RTLD_NOLOAD) : nullptr;
  if (h == nullptr) return -1;
  using Fn = unsigned long long (*)(const char*);
  auto fn = reinterpret_cast<Fn>(dlsym(h, "fakecudaCallCount"));
  long long n = fn != nullptr ? static_cast<long long>(fn(name)) : -1;
  dlclose(h);
  return n;
}

long long Imports() { return CallCount("cuMemImportFromShareableHandle"); }

bool FillAndCheck(CUdeviceptr p, size_t bytes, unsigned char pattern) {
  if (cuMemsetD8_v2(p, pattern, bytes) != CUDA_SUCCESS) return false;
  std::vector<unsigned char> back(bytes);
  if (cuMemcpyDtoH_v2(back.data(), p, bytes) != CUDA_SUCCESS) return false;
  for (unsigned char c : back) {
    if (c != pattern) return false;
  }
  return true;
}

// The physical address of each 2 MiB of an allocation, comma-separated.
std::string PhysList(CUdeviceptr p, size_t bytes) {
  std::string phys;
  for (size_t off = 0; off < bytes; off += size_t{2} << 20) {
    phys += (phys.empty() ? "" : ",") + std::to_string(PhysAddr(p + off));
  }
  return phys;
}

// vmmc:<MiB>: compressible VMM memory, kept mapped until the process exits.
void CompressedVmm(size_t mib, unsigned char pattern) {
  const size_t bytes = mib << 20;
  CUmemAllocationProp prop{};
  prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
  prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
  prop.location.id = 0;
  prop.allocFlags.compressionType = CU_MEM_ALLOCATION_COMP_GENERIC;
  const long long before = Imports();
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr va = 0;
  CUmemAllocationProp got{};
  CUresult r = cuMemCreate(&h, bytes, &prop, 0);
  if (r == CUDA_SUCCESS) r = cuMemGetAllocationPropertiesFromHandle(&got, h);
  if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&va, bytes, 0, 0, 0);
  if (r == CUDA_SUCCESS) r = cuMemMap(va, bytes, 0, h, 0);
  CUmemAccessDesc access{};
  access.location = prop.location;
  access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
  if (r == CUDA_SUCCESS) r = cuMemSetAccess(va, bytes, &access, 1);
  if (r == CUDA_SUCCESS && !FillAndCheck(va, bytes, pattern)) r = CUDA_ERROR_UNKNOWN;
  if (r != CUDA_SUCCESS) {
    printf("vmmc %zu err %d\n", mib, r);
    return;
  }
  const long long after = Imports();
  printf("vmmc %zu ok compressed=%d imports=%lld\n", mib,
         got.allocFlags.compressionType != 0 ? 1 : 0, before < 0 ? -1 : after - before);
}

// capture:<MiB> and capturepool:<MiB>: a stream-ordered allocation recorded into a graph.
void CapturedAlloc(size_t mib, bool from_pool, CUdevice dev, unsigned char pattern) {
  const char* what = from_pool ? "capturepool" : "capture";
  const size_t bytes = mib << 20;
  const bool free_in_graph = mib % 2 == 0;
  CUstream s = nullptr;
  CUresult r = cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
  if (r == CUDA_SUCCESS) r = cuStreamBeginCapture_v2(s, CU_STREAM_CAPTURE_MODE_GLOBAL);
  if (r != CUDA_SUCCESS) {
    printf("%s %zu setup err %d\n", what, mib, r);
    return;
  }
  CUdeviceptr p = 0;
  CUmemoryPool pool = nullptr;
  if (from_pool) {
    r = cuDeviceGetDefaultMemPool(&pool, dev);
    if (r == CUDA_SUCCESS) r = cuMemAllocFromPoolAsync(&p, bytes, pool, s);
  } else {
    r = cuMemAllocAsync(&p, bytes, s);
  }
  if (r == CUDA_SUCCESS) r = cuMemsetD8Async(p, pattern, bytes, s);
  if (r == CUDA_SUCCESS && free_in_graph) r = cuMemFreeAsync(p, s);
  CUgraph graph = nullptr;
  CUresult end = cuStreamEndCapture(s, &graph);
  if (r == CUDA_SUCCESS) r = end;
  CUgraphExec exec = nullptr;
  if (r == CUDA_SUCCESS) r = cuGraphInstantiateWithFlags(&exec, graph, 0);
  if (r == CUDA_SUCCESS) r = cuGraphLaunch(exec, s);
  if (r == CUDA_SUCCESS) r = cuStreamSynchronize(s);
  bool ok = true;
  if (r == CUDA_SUCCESS && !free_in_graph) {
    std::vector<unsigned char> back(bytes);
    r = cuMemcpyDtoH_v2(back.data(), p, bytes);
    for (unsigned char c : back) ok = ok && c == pattern;
    if (r == CUDA_SUCCESS) r = cuMemFreeAsync(p, s);
    if (r == CUDA_SUCCESS) r = cuStreamSynchronize(s);
  }
  if (exec != nullptr) cuGraphExecDestroy(exec);
  if (graph != nullptr) cuGraphDestroy(graph);
  cuStreamDestroy_v2(s);
  if (r == CUDA_SUCCESS) {
    printf("%s %zu %s\n", what, mib, ok ? "ok" : "corrupt");
  } else {
    printf("%s %zu err %d\n", what, mib, r);
  }
}

}  // namespace

// long: the probe's step interpreter: one short branch per step verb, all sharing the context
// and the allocations made by earlier steps.
int main(int argc, char** argv) {
  setvbuf(stdout, nullptr, _IOLBF, 0);
  CUdevice dev;
  CUcontext ctx;
  if (cuInit(0) != CUDA_SUCCESS || cuDeviceGet(&dev, 0) != CUDA_SUCCESS ||
      cuDevicePrimaryCtxRetain(&ctx, dev) != CUDA_SUCCESS || cuCtxSetCurrent(ctx) != CUDA_SUCCESS) {
    printf("init failed\n");
    return 1;
  }
  const unsigned char pattern = static_cast<unsigned char>(getpid() % 251 + 1);
  for (int i = 1; i < argc; ++i) {
    std::string step = argv[i];
    std::string arg = step.find(':') != std::string::npos ? step.substr(step.find(':') + 1) : "";
    size_t mib = arg.empty() ? 0 : strtoull(arg.c_str(), nullptr, 10);
    if (step == "info") {
      size_t f = 0, t = 0, dt = 0;
      CUresult r1 = cuMemGetInfo_v2(&f, &t);
      CUresult r2 = cuDeviceTotalMem_v2(&dt, dev);
      printf("info free=%zu total=%zu devtotal=%zu rc=%d,%d\n", f, t, dt, r1, r2);
    } else if (step.rfind("alloc:", 0) == 0) {
      CUdeviceptr p = 0;
      size_t bytes = mib << 20;
      CUresult r = cuMemAlloc_v2(&p, bytes);
      if (r != CUDA_SUCCESS) {
        printf("alloc %zu err %d\n", mib, r);
        continue;
      }
      bool ok = FillAndCheck(p, bytes, pattern);
      held.push_back({p, bytes, pattern, ctx});
      const std::string phys = PhysList(p, bytes);
      printf("alloc %zu %s phys=%s\n", mib, ok ? "ok" : "corrupt", phys.c_str());
    } else if (step.rfind("zero:", 0) == 0) {
      CUdeviceptr p = 0;
      size_t bytes = mib << 20;
      CUresult r = cuMemAlloc_v2(&p, bytes);
      if (r != CUDA_SUCCESS) {
        printf("zero %zu err %d\n", mib, r);
        continue;
      }
      std::vector<unsigned char> before(bytes, 0xff);
      bool zero = cuMemcpyDtoH_v2(before.data(), p, bytes) == CUDA_SUCCESS;
      for (size_t k = 0; k < bytes && zero; ++k) zero = before[k] == 0;
      FillAndCheck(p, bytes, pattern);
      held.push_back({p, bytes, pattern, ctx});
      const std::string phys = PhysList(p, bytes);
      printf("zero %zu %s phys=%s\n", mib, zero ? "yes" : "no", phys.c_str());
    } else if (step.rfind("small:", 0) == 0) {
      size_t count = mib;
      CUresult r = CUDA_SUCCESS;
      for (size_t k = 0; k < count && r == CUDA_SUCCESS; ++k) {
        CUdeviceptr p = 0;
        r = cuMemAlloc_v2(&p, 4096);
        if (r == CUDA_SUCCESS) {
          if (!FillAndCheck(p, 4096, pattern)) r = CUDA_ERROR_UNKNOWN;
          held.push_back({p, 4096, pattern, ctx});
        }
      }
      if (r == CUDA_SUCCESS) {
        printf("small %zu ok\n", count);
      } else {
        printf("small %zu err %d\n", count, r);
      }
    } else if (step.rfind("many:", 0) == 0 || step.rfind("loop:", 0) == 0) {
      const bool loop = step[0] == 'l';
      const char* what = loop ? "loop" : "many";
      size_t colon = arg.find(':');
      size_t count =
          colon == std::string::npos ? 1 : strtoull(arg.c_str() + colon + 1, nullptr, 10);
      size_t bytes = mib << 20;
      long long before = Imports();
      CUresult r = CUDA_SUCCESS;
      bool ok = true;
      for (size_t k = 0; k < count && r == CUDA_SUCCESS; ++k) {
        CUdeviceptr p = 0;
        r = cuMemAlloc_v2(&p, bytes);
        if (r != CUDA_SUCCESS) break;
        ok = FillAndCheck(p, bytes, pattern) && ok;
        if (loop) {
          r = cuMemFree_v2(p);
        } else {
          held.push_back({p, bytes, pattern, ctx});
        }
      }
      long long after = Imports();
      if (r != CUDA_SUCCESS) {
        printf("%s %zu %zu err %d\n", what, mib, count, r);
      } else {
        printf("%s %zu %zu %s imports=%lld\n", what, mib, count, ok ? "ok" : "corrupt",
               before < 0 ? -1 : after - before);
      }
    } else if (step.rfind("vmm:", 0) == 0) {
      size_t bytes = mib << 20;
      CUmemAllocationProp prop{};
      prop.type = CU_MEM_ALLOCATION_TYPE_PINNED;
      prop.location.type = CU_MEM_LOCATION_TYPE_DEVICE;
      prop.location.id = 0;
      CUmemGenericAllocationHandle h = 0;
      CUdeviceptr va = 0;
      CUresult r = cuMemCreate(&h, bytes, &prop, 0);
      if (r == CUDA_SUCCESS) r = cuMemAddressReserve(&va, bytes, 0, 0, 0);
      if (r == CUDA_SUCCESS) r = cuMemMap(va, bytes, 0, h, 0);
      CUmemAccessDesc access{};
      access.location = prop.location;
      access.flags = CU_MEM_ACCESS_FLAGS_PROT_READWRITE;
      if (r == CUDA_SUCCESS) r = cuMemSetAccess(va, bytes, &access, 1);
      if (r == CUDA_SUCCESS && !FillAndCheck(va, bytes, pattern)) r = CUDA_ERROR_UNKNOWN;
      // Release before unmapping, as many programs do: the memory must stay until the unmap.
      if (h != 0) cuMemRelease(h);
      if (r == CUDA_SUCCESS && !FillAndCheck(va, bytes, pattern ^ 0xff)) r = CUDA_ERROR_UNKNOWN;
      if (va != 0) {
        cuMemUnmap(va, bytes);
        cuMemAddressFree(va, bytes);
      }
      if (r == CUDA_SUCCESS) {
        printf("vmm %zu ok\n", mib);
      } else {
        printf("vmm %zu err %d\n", mib, r);
      }
    } else if (step.rfind("vmmc:", 0) == 0) {
      CompressedVmm(mib, pattern);
    } else if (step.rfind("capture:", 0) == 0 || step.rfind("capturepool:", 0) == 0) {
      CapturedAlloc(mib, step[7] == 'p', dev, pattern);
    } else if (step.rfind("async:", 0) == 0) {
      size_t bytes = mib << 20;
      CUstream s;
      cuStreamCreate(&s, CU_STREAM_NON_BLOCKING);
      CUdeviceptr p = 0;
      CUresult r = cuMemAllocAsync(&p, bytes, s);
      if (r == CUDA_SUCCESS) r = cuMemsetD8Async(p, pattern, bytes, s);
      if (r == CUDA_SUCCESS) r = cuMemFreeAsync(p, s);
      if (r == CUDA_SUCCESS) r = cuStreamSynchronize(s);
      cuStreamDestroy_v2(s);
      if (r == CUDA_SUCCESS) {
        printf("async %zu ok\n", mib);
      } else {
        printf("async %zu err %d\n", mib, r);
      }
    } else if (step == "range") {
      if (held.empty()) {
        printf("range none\n");
        continue;
      }
      const Held& last = held.back();
      CUdeviceptr base = 0;
      size_t size = 0;
      CUresult r = cuMemGetAddressRange_v2(&base, &size, last.ptr + last.bytes / 2);
      printf("range base_ok=%d size=%zu rc=%d\n", base == last.ptr, size, r);
    } else if (step == "check") {
      bool ok = true;
      for (const Held& h : held) {
        std::vector<unsigned char> back(h.bytes);
        if (cuMemcpyDtoH_v2(back.data(), h.ptr, h.bytes) != CUDA_SUCCESS) ok = false;
        for (unsigned char c : back) ok = ok && c == h.pattern;
      }
      printf("check %s\n", ok ? "ok" : "corrupt");
    } else if (step == "freeall") {
      CUresult r = CUDA_SUCCESS;
      for (const Held& h : held) {
        CUresult f = cuMemFree_v2(h.ptr);
        if (f != CUDA_SUCCESS) r = f;
      }
      held.clear();
      if (r == CUDA_SUCCESS) {
        printf("freeall ok\n");
      } else {
        printf("freeall err %d\n", r);
      }
    } else if (step.rfind("await:", 0) == 0) {
      const std::string path = step.substr(6);
      printf("awaiting\n");
      int waited_ms = 0;
      while (access(path.c_str(), F_OK) != 0) {
        if (waited_ms >= 60000) {
          printf("await timeout\n");
          return 3;
        }
        usleep(10000);
        waited_ms += 10;
      }
    } else if (step.rfind("dev:", 0) == 0) {
      const int n = atoi(arg.c_str());
      CUresult r = cuDeviceGet(&dev, n);
      if (r == CUDA_SUCCESS) r = cuDevicePrimaryCtxRetain(&ctx, dev);
      if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
      if (r == CUDA_SUCCESS) {
        printf("dev %d ok\n", n);
      } else {
        printf("dev %d err %d\n", n, r);
      }
    } else if (step == "peer") {
      if (held.size() < 2) {
        printf("peer none\n");
        continue;
      }
      Held& src = held[held.size() - 2];
      Held& dst = held.back();
      const size_t bytes = std::min(src.bytes, dst.bytes);
      // A pattern the destination does not hold yet, so a copy that did nothing shows.
      src.pattern = static_cast<unsigned char>(~src.pattern);
      CUresult r = cuCtxSetCurrent(src.ctx);
      if (r == CUDA_SUCCESS) r = cuMemsetD8_v2(src.ptr, src.pattern, src.bytes);
      if (r == CUDA_SUCCESS) r = cuCtxSetCurrent(ctx);
      if (r == CUDA_SUCCESS) r = cuMemcpyPeer(dst.ptr, dst.ctx, src.ptr, src.ctx, bytes);
      if (bytes == dst.bytes) dst.pattern = src.pattern;
      if (r != CUDA_SUCCESS) {
        printf("peer %zu err %d\n", bytes, r);
        continue;
      }
      const size_t probe = std::min<size_t>(bytes, 4096);
      std::vector<unsigned char> head(probe), tail(probe);
      bool ok = cuMemcpyDtoH_v2(head.data(), dst.ptr, probe) == CUDA_SUCCESS &&
                cuMemcpyDtoH_v2(tail.data(), dst.ptr + bytes - probe, probe) == CUDA_SUCCESS;
      for (size_t k = 0; k < probe && ok; ++k) ok = head[k] == src.pattern && tail[k] == src.pattern;
      printf("peer %zu %s\n", bytes, ok ? "ok" : "corrupt");
    } else if (step == "hold") {
      printf("ready\n");
      char buf[64];
      while (read(0, buf, sizeof(buf)) > 0) {
      }
    } else {
      printf("unknown step %s\n", step.c_str());
      return 2;
    }
  }
  return 0;
}
