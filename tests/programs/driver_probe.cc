// driver_probe: an ordinary CUDA driver API program, used to check that libmissile.so sees its
// calls and leaves its results unchanged. The same workload runs whichever way the program
// reaches the driver, chosen by the first argument:
//   direct    calls linked against libcuda.so.1 (binding at load time)
//   dlsym     dlopen("libcuda.so.1") + dlsym(handle, "<exported name>")
//   getproc   dlsym(handle, "cuGetProcAddress") (CUDA 11.3 ABI), asking for CUDA 11.3 ABIs
//   getproc2  dlsym(handle, "cuGetProcAddress_v2") (CUDA 12 ABI), asking for CUDA 13.0 ABIs
//             with the per-thread default stream flag (the _ptds/_ptsz variants), as cudart does
//   threads   8 threads make their first driver call at the same moment
//   missing   calls an entry point the driver under test may lack (cuArray3DCreate_v2)
// It prints "key value" lines that depend only on the results, so a run under the shim can be
// compared with a plain run byte for byte. Exit status 0 when every step succeeded.
#include <cuda.h>
#include <cudaTypedefs.h>
#include <dlfcn.h>

#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>
#include <vector>

namespace {

struct Api {
  PFN_cuInit_v2000 init;
  PFN_cuDeviceGet_v2000 device_get;
  PFN_cuDevicePrimaryCtxRetain_v7000 primary_ctx_retain;
  PFN_cuCtxSetCurrent_v4000 ctx_set_current;
  PFN_cuMemGetInfo_v3020 mem_get_info;
  PFN_cuDeviceTotalMem_v3020 device_total_mem;
  PFN_cuMemAlloc_v3020 mem_alloc;
  PFN_cuMemFree_v3020 mem_free;
  PFN_cuMemsetD8_v3020 memset_d8;
  PFN_cuMemcpyHtoD_v3020 htod;
  PFN_cuMemcpyDtoH_v3020 dtoh;
  PFN_cuMemcpyDtoD_v3020 dtod;
  PFN_cuMemcpyHtoDAsync_v3020 htod_async;
  PFN_cuMemcpyDtoHAsync_v3020 dtoh_async;
  PFN_cuMemAllocHost_v3020 mem_alloc_host;
  PFN_cuMemFreeHost_v2000 mem_free_host;
  PFN_cuStreamCreate_v2000 stream_create;
  PFN_cuStreamSynchronize_v2000 stream_sync;
  PFN_cuStreamDestroy_v4000 stream_destroy;
};

int failures = 0;

void Check(const char* what, CUresult r) {
  if (r != CUDA_SUCCESS) {
    printf("error %s %d\n", what, static_cast<int>(r));
    ++failures;
  }
}

template <typename T>
bool Load(void* handle, const char* name, T* out) {
  *out = reinterpret_cast<T>(dlsym(handle, name));
  if (*out == nullptr) printf("error dlsym %s\n", name);
  return *out != nullptr;
}

Api DirectApi() {
  return Api{&cuInit, &cuDeviceGet, &cuDevicePrimaryCtxRetain, &cuCtxSetCurrent,
             &cuMemGetInfo_v2, &cuDeviceTotalMem_v2, &cuMemAlloc_v2, &cuMemFree_v2,
             &cuMemsetD8_v2, &cuMemcpyHtoD_v2, &cuMemcpyDtoH_v2, &cuMemcpyDtoD_v2,
             &cuMemcpyHtoDAsync_v2, &cuMemcpyDtoHAsync_v2, &cuMemAllocHost_v2, &cuMemFreeHost,
             &cuStreamCreate, &cuStreamSynchronize, &cuStreamDestroy_v2};
}

bool DlsymApi(void* h, Api* api) {
  bool ok = true;
  ok &= Load(h, "cuInit", &api->init);
  ok &= Load(h, "cuDeviceGet", &api->device_get);
  ok &= Load(h, "cuDevicePrimaryCtxRetain", &api->primary_ctx_retain);
  ok &= Load(h, "cuCtxSetCurrent", &api->ctx_set_current);
  ok &= Load(h, "cuMemGetInfo_v2", &api->mem_get_info);
  ok &= Load(h, "cuDeviceTotalMem_v2", &api->device_total_mem);
  ok &= Load(h, "cuMemAlloc_v2", &api->mem_alloc);
  ok &= Load(h, "cuMemFree_v2", &api->mem_free);
  ok &= Load(h, "cuMemsetD8_v2", &api->memset_d8);
  ok &= Load(h, "cuMemcpyHtoD_v2", &api->htod);
  ok &= Load(h, "cuMemcpyDtoH_v2", &api->dtoh);
  ok &= Load(h, "cuMemcpyDtoD_v2", &api->dtod);
  ok &= Load(h, "cuMemcpyHtoDAsync_v2", &api->htod_async);
  ok &= Load(h, "cuMemcpyDtoHAsync_v2", &api->dtoh_async);
  ok &= Load(h, "cuMemAllocHost_v2", &api->mem_alloc_host);
  ok &= Load(h, "cuMemFreeHost", &api->mem_free_host);
  ok &= Load(h, "cuStreamCreate", &api->stream_create);
  ok &= Load(h, "cuStreamSynchronize", &api->stream_sync);
  ok &= Load(h, "cuStreamDestroy_v2", &api->stream_destroy);
  return ok;
}

// Fills `api` through a cuGetProcAddress-shaped lookup `get(symbol, &fn)`.
template <typename Get>
bool ProcApi(Get get, Api* api) {
  bool ok = true;
  auto load = [&](const char* name, auto* out) {
    void* fn = nullptr;
    CUresult r = get(name, &fn);
    if (r != CUDA_SUCCESS || fn == nullptr) {
      printf("error getproc %s %d\n", name, static_cast<int>(r));
      ok = false;
    }
    *out = reinterpret_cast<std::remove_pointer_t<decltype(out)>>(fn);
  };
  load("cuInit", &api->init);
  load("cuDeviceGet", &api->device_get);
  load("cuDevicePrimaryCtxRetain", &api->primary_ctx_retain);
  load("cuCtxSetCurrent", &api->ctx_set_current);
  load("cuMemGetInfo", &api->mem_get_info);
  load("cuDeviceTotalMem", &api->device_total_mem);
  load("cuMemAlloc", &api->mem_alloc);
  load("cuMemFree", &api->mem_free);
  load("cuMemsetD8", &api->memset_d8);
  load("cuMemcpyHtoD", &api->htod);
  load("cuMemcpyDtoH", &api->dtoh);
  load("cuMemcpyDtoD", &api->dtod);
  load("cuMemcpyHtoDAsync", &api->htod_async);
  load("cuMemcpyDtoHAsync", &api->dtoh_async);
  load("cuMemAllocHost", &api->mem_alloc_host);
  load("cuMemFreeHost", &api->mem_free_host);
  load("cuStreamCreate", &api->stream_create);
  load("cuStreamSynchronize", &api->stream_sync);
  load("cuStreamDestroy", &api->stream_destroy);
  return ok;
}

uint64_t Fnv1a(const unsigned char* p, size_t n) {
  uint64_t h = 1469598103934665603ull;
  for (size_t i = 0; i < n; ++i) h = (h ^ p[i]) * 1099511628211ull;
  return h;
}

// The workload: the same driver calls whatever the resolution path.
void Workload(const Api& api) {
  Check("cuInit", api.init(0));
  CUdevice dev;
  Check("cuDeviceGet", api.device_get(&dev, 0));
  CUcontext ctx;
  Check("cuDevicePrimaryCtxRetain", api.primary_ctx_retain(&ctx, dev));
  Check("cuCtxSetCurrent", api.ctx_set_current(ctx));
  size_t free_bytes = 0, total_bytes = 0, device_total = 0;
  Check("cuMemGetInfo", api.mem_get_info(&free_bytes, &total_bytes));
  Check("cuDeviceTotalMem", api.device_total_mem(&device_total, dev));
  printf("memory free_le_total %d total_matches_device %d\n", free_bytes <= total_bytes,
         total_bytes == device_total);

  constexpr size_t kBytes = 3 << 20;
  std::vector<unsigned char> host(kBytes), back(kBytes, 0);
  for (size_t i = 0; i < kBytes; ++i) host[i] = static_cast<unsigned char>((i * 7919) >> 3);
  CUdeviceptr a = 0, b = 0;
  Check("cuMemAlloc a", api.mem_alloc(&a, kBytes));
  Check("cuMemAlloc b", api.mem_alloc(&b, kBytes));
  Check("cuMemsetD8", api.memset_d8(b, 0x5a, kBytes));
  Check("cuMemcpyHtoD", api.htod(a, host.data(), kBytes));
  Check("cuMemcpyDtoD", api.dtod(b, a, kBytes / 2));
  Check("cuMemcpyDtoH", api.dtoh(back.data(), b, kBytes));
  printf("sync checksum %016llx\n", static_cast<unsigned long long>(Fnv1a(back.data(), kBytes)));

  void* pinned = nullptr;
  Check("cuMemAllocHost", api.mem_alloc_host(&pinned, kBytes));
  CUstream stream;
  Check("cuStreamCreate", api.stream_create(&stream, CU_STREAM_NON_BLOCKING));
  if (pinned != nullptr) {
    memcpy(pinned, host.data(), kBytes);
    Check("cuMemcpyHtoDAsync", api.htod_async(b, pinned, kBytes, stream));
    memset(back.data(), 0, kBytes);
    Check("cuMemcpyDtoHAsync", api.dtoh_async(back.data(), b, kBytes, stream));
    Check("cuStreamSynchronize", api.stream_sync(stream));
    printf("async checksum %016llx matches_input %d\n",
           static_cast<unsigned long long>(Fnv1a(back.data(), kBytes)), back == host);
    Check("cuMemFreeHost", api.mem_free_host(pinned));
  }
  Check("cuStreamDestroy", api.stream_destroy(stream));
  Check("cuMemFree a", api.mem_free(a));
  Check("cuMemFree b", api.mem_free(b));
}

int RunThreads() {
  // First driver calls race: the shim must resolve the driver exactly once, for all of them.
  constexpr int kThreads = 8;
  std::vector<std::thread> threads;
  std::vector<CUresult> results(kThreads, CUDA_ERROR_UNKNOWN);
  std::vector<size_t> totals(kThreads, 0);
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([t, &results, &totals] {
      CUdevice dev;
      results[t] = cuInit(0);
      if (results[t] == CUDA_SUCCESS) results[t] = cuDeviceGet(&dev, 0);
      if (results[t] == CUDA_SUCCESS) results[t] = cuDeviceTotalMem_v2(&totals[t], dev);
    });
  }
  for (auto& th : threads) th.join();
  int ok = 0;
  for (int t = 0; t < kThreads; ++t) ok += results[t] == CUDA_SUCCESS && totals[t] == totals[0];
  printf("threads ok %d of %d\n", ok, kThreads);
  return ok == kThreads ? 0 : 1;
}

}  // namespace

int main(int argc, char** argv) {
  std::string mode = argc > 1 ? argv[1] : "direct";
  Api api{};
  if (mode == "direct") {
    api = DirectApi();
  } else if (mode == "threads") {
    return RunThreads();
  } else if (mode == "missing") {
    CUresult init = cuInit(0);
    CUarray array = nullptr;
    CUDA_ARRAY3D_DESCRIPTOR desc{};
    desc.Width = 16;
    desc.Height = 16;
    desc.Depth = 4;
    desc.Format = CU_AD_FORMAT_UNSIGNED_INT8;
    desc.NumChannels = 1;
    CUresult r = cuArray3DCreate_v2(&array, &desc);
    printf("missing init %d result %d\n", static_cast<int>(init), static_cast<int>(r));
    return 0;
  } else {
    void* h = dlopen("libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
    if (h == nullptr) {
      printf("error dlopen %s\n", dlerror());
      return 2;
    }
    bool ok = false;
    if (mode == "dlsym") {
      ok = DlsymApi(h, &api);
    } else if (mode == "getproc") {
      auto get = reinterpret_cast<PFN_cuGetProcAddress_v11030>(dlsym(h, "cuGetProcAddress"));
      ok = get != nullptr && ProcApi([get](const char* s, void** fn) {
             return get(s, fn, 11030, CU_GET_PROC_ADDRESS_DEFAULT);
           }, &api);
    } else if (mode == "getproc2") {
      auto get = reinterpret_cast<PFN_cuGetProcAddress_v12000>(dlsym(h, "cuGetProcAddress_v2"));
      ok = get != nullptr && ProcApi([get](const char* s, void** fn) {
             CUdriverProcAddressQueryResult found;
             return get(s, fn, 13000, CU_GET_PROC_ADDRESS_PER_THREAD_DEFAULT_STREAM, &found);
           }, &api);
    } else {
      printf("error unknown mode %s\n", mode.c_str());
      return 2;
    }
    if (!ok) return 2;
  }
  Workload(api);
  printf("failures %d\n", failures);
  return failures == 0 ? 0 : 1;
}
