// Modules, built-in kernels and launches: data effects, stream order, durations, events, errors.
// Timing assertions have wide margins (CI machines are busy).

#include <thread>

#include "kernel_util.h"

namespace fakecuda_test {
namespace {

class KernelTest : public ::testing::Test {
 protected:
  void SetUp() override {
    InitPrimary();
    CU_ASSERT(kernels_.Load());
    CU_ASSERT(cuMemAlloc(&log_, 4096));
    CU_ASSERT(cuMemsetD32(log_, 0, 1024));
  }
  void TearDown() override {
    CU_EXPECT(cuCtxSynchronize());
    CU_EXPECT(cuMemFree(log_));
    CU_EXPECT(cuModuleUnload(kernels_.module));
  }

  Kernels kernels_;
  CUdeviceptr log_ = 0;
};

TEST_F(KernelTest, ModulesTakeOnlyTheFakeImageAndKnowTheBuiltInKernels) {
  CUmodule m = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, "\177ELF"));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_IMAGE, cuModuleLoadData(&m, "fakecuda-modul"));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuModuleLoadData(&m, nullptr));
  CU_ASSERT(cuModuleLoadData(&m, "fakecuda-module v1\n"));
  CUfunction f = nullptr;
  CU_EXPECT_ERR(CUDA_ERROR_NOT_FOUND, cuModuleGetFunction(&f, m, "fakecuda_nothing"));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuModuleGetFunction(&f, m, nullptr));
  CU_ASSERT(cuModuleGetFunction(&f, m, "fakecuda_spin"));
  CUfunction again = nullptr;
  CU_ASSERT(cuModuleGetFunction(&again, m, "fakecuda_spin"));
  EXPECT_EQ(f, again);
  EXPECT_NE(f, kernels_.spin);  // each module has its own functions
  CU_ASSERT(cuModuleUnload(m));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuModuleGetFunction(&again, m, "fakecuda_spin"));
  uint64_t ns = 0;
  void* params[] = {&ns};
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, LaunchWith(f, nullptr, params));
}

TEST_F(KernelTest, BuiltInKernelsApplyTheirEffects) {
  constexpr uint64_t kCount = 1000;
  CUdeviceptr a = 0;
  CUdeviceptr b = 0;
  CU_ASSERT(cuMemAlloc(&a, kCount * 4));
  CU_ASSERT(cuMemAlloc(&b, kCount * 4));
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(Fill(kernels_, s, a, 5, kCount));
  CU_ASSERT(Fill(kernels_, s, b, 0xffffffffu, kCount - 1));  // the last word stays as it was
  CU_ASSERT(cuMemsetD32Async(b + (kCount - 1) * 4, 40, 1, s));
  CU_ASSERT(Add(kernels_, s, a, b, kCount));  // 5 + 0xffffffff wraps to 4
  CU_ASSERT(Spin(kernels_, s, 0));
  for (uint32_t v : {7u, 8u, 9u}) CU_ASSERT(Append(kernels_, s, log_, v));
  CU_ASSERT(cuStreamSynchronize(s));
  std::vector<uint32_t> expected(kCount, 4);
  expected.back() = 45;
  EXPECT_EQ(Words(a, kCount), expected);
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{7, 8, 9}));
  // Pinned host memory is memory a kernel may use; a count of 0 touches nothing.
  void* host = nullptr;
  CU_ASSERT(cuMemAllocHost(&host, 64));
  const auto host_ptr = reinterpret_cast<CUdeviceptr>(host);
  CU_ASSERT(Fill(kernels_, s, host_ptr, 3, 16));
  CU_ASSERT(Fill(kernels_, s, host_ptr, 9, 0));
  CU_ASSERT(cuStreamSynchronize(s));
  EXPECT_EQ(Words(host_ptr, 16), std::vector<uint32_t>(16, 3));
  CU_ASSERT(cuMemFreeHost(host));
  CU_ASSERT(cuStreamDestroy(s));
  CU_ASSERT(cuMemFree(a));
  CU_ASSERT(cuMemFree(b));
}

TEST_F(KernelTest, OneStreamRunsLaunchesAndOtherOperationsInIssueOrder) {
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  const uint64_t run_before = fakecudaKernelsRun(0);
  // A slow first kernel: if anything overtook it, the log would show it.
  CU_ASSERT(Append(kernels_, s, log_, 0, 30 * kMs));
  for (uint32_t i = 1; i < 20; ++i) CU_ASSERT(Append(kernels_, s, log_, i));
  CU_ASSERT(cuStreamWriteValue32(s, log_ + 4 * 21, 1234, 0));  // after the 20 entries
  CU_ASSERT(Append(kernels_, s, log_, 99));  // overwrites the written word: entry 21
  CU_ASSERT(cuStreamSynchronize(s));
  std::vector<uint32_t> expected;
  for (uint32_t i = 0; i < 20; ++i) expected.push_back(i);
  expected.push_back(99);
  EXPECT_EQ(LogEntries(log_), expected);
  EXPECT_EQ(fakecudaKernelsRun(0) - run_before, 21u);
  CU_ASSERT(cuStreamDestroy(s));
}

TEST_F(KernelTest, KernelsOfTwoStreamsTakeTurnsOnTheEngine) {
  CUstream a = nullptr;
  CUstream b = nullptr;
  CU_ASSERT(cuStreamCreate(&a, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(cuStreamCreate(&b, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(Append(kernels_, a, log_, 1, 150 * kMs));
  CU_ASSERT(Append(kernels_, a, log_, 3));
  // Once a's first kernel holds the engine, b's kernel goes next, before a's second one.
  uint64_t busy = 0;
  for (int i = 0; i < 2000; ++i) {
    busy = fakecudaEngineBusyUntilNs(0);
    if (busy > NowNs() + 50 * kMs) break;
    usleep(500);
  }
  const uint64_t issued = NowNs();
  ASSERT_GT(busy, issued + 50 * kMs) << "the first kernel never reserved the engine";
  CU_ASSERT(Append(kernels_, b, log_, 2, 10 * kMs));
  CU_ASSERT(cuStreamSynchronize(b));
  const uint64_t b_done = NowNs();
  EXPECT_GE(b_done, busy + 10 * kMs) << "b's kernel ran while a's held the engine";
  CU_ASSERT(cuStreamSynchronize(a));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 2, 3}));
  for (CUstream s : {a, b}) CU_ASSERT(cuStreamDestroy(s));
}

TEST_F(KernelTest, AKernelHoldsItsStreamForItsDurationAndEventsTimeIt) {
  CUstream s = nullptr;
  CUstream other = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  CU_ASSERT(cuStreamCreate(&other, 0));
  CUevent start = nullptr;
  CUevent stop = nullptr;
  CU_ASSERT(cuEventCreate(&start, 0));
  CU_ASSERT(cuEventCreate(&stop, 0));
  const double t0 = NowMs();
  CU_ASSERT(cuEventRecord(start, s));
  CU_ASSERT(Spin(kernels_, s, 150 * kMs));
  CU_ASSERT(cuEventRecord(stop, s));
  EXPECT_LT(NowMs() - t0, 100) << "the launch did not return at once";
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuEventQuery(stop), CUDA_ERROR_NOT_READY);
  // Another stream that waits for the event runs its kernel after the spin.
  CU_ASSERT(cuStreamWaitEvent(other, stop, 0));
  CU_ASSERT(Append(kernels_, other, log_, 5));
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(reinterpret_cast<const uint32_t*>(log_)[0], 0u);
  CU_ASSERT(cuEventSynchronize(stop));
  EXPECT_GE(NowMs() - t0, 149);
  CU_EXPECT(cuStreamQuery(s));
  float ms = 0;
  CU_ASSERT(cuEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 149.0f);
  EXPECT_LT(ms, 1000.0f);
  CU_ASSERT(cuStreamSynchronize(other));
  EXPECT_EQ(LogEntries(log_), std::vector<uint32_t>{5});
  for (CUevent e : {start, stop}) CU_ASSERT(cuEventDestroy(e));
  for (CUstream st : {s, other}) CU_ASSERT(cuStreamDestroy(st));
}

TEST_F(KernelTest, EveryLaunchEntryPointQueuesOnItsStream) {
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  uint64_t ns = 0;
  uint32_t value = 1;
  void* params[] = {&log_, &value, &ns};
  CU_ASSERT(cuLaunchKernel(kernels_.append, 1, 1, 1, 1, 1, 1, 0, s, params, nullptr));
  value = 2;
  CU_ASSERT(cuLaunchCooperativeKernel(kernels_.append, 2, 2, 1, 16, 16, 1, 0, s, params));
  value = 3;
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = 128;
  config.blockDimY = config.blockDimZ = 1;
  config.sharedMemBytes = 1024;
  config.hStream = s;
  CUlaunchAttribute attr{};
  attr.id = CU_LAUNCH_ATTRIBUTE_PRIORITY;
  attr.value.priority = 1;
  config.attrs = &attr;
  config.numAttrs = 1;  // attributes are ignored
  CU_ASSERT(cuLaunchKernelEx(&config, kernels_.append, params, nullptr));
  // An empty `extra` list is no extra argument.
  void* empty_extra[] = {CU_LAUNCH_PARAM_END};
  value = 4;
  CU_ASSERT(cuLaunchKernel(kernels_.append, 1, 1, 1, 1, 1, 1, 0, s, params, empty_extra));
  CU_ASSERT(cuStreamSynchronize(s));
  // The per-thread variants put stream 0 on this thread's default stream: blocked here by a
  // host function, while the legacy stream is free.
  std::atomic<bool> release{false};
  CU_ASSERT(cuLaunchHostFunc_ptsz(
      nullptr,
      [](void* arg) {
        while (!static_cast<std::atomic<bool>*>(arg)->load()) usleep(1000);
      },
      &release));
  value = 6;
  CU_ASSERT(cuLaunchKernel_ptsz(kernels_.append, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  value = 7;
  config.hStream = nullptr;
  CU_ASSERT(cuLaunchKernelEx_ptsz(&config, kernels_.append, params, nullptr));
  value = 8;
  CU_ASSERT(cuLaunchCooperativeKernel_ptsz(kernels_.append, 1, 1, 1, 1, 1, 1, 0, nullptr, params));
  value = 5;
  CU_ASSERT(cuLaunchKernel(kernels_.append, 1, 1, 1, 1, 1, 1, 0, nullptr, params, nullptr));
  CU_ASSERT(cuStreamSynchronize(nullptr));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 2, 3, 4, 5}));
  release = true;
  CU_ASSERT(cuStreamSynchronize_ptsz(nullptr));
  EXPECT_EQ(LogEntries(log_), (std::vector<uint32_t>{1, 2, 3, 4, 5, 6, 7, 8}));
  CU_ASSERT(cuStreamDestroy(s));
}

TEST_F(KernelTest, BadLaunchesAreRefusedAndRunNothing) {
  const uint64_t run_before = fakecudaKernelsRun(0);
  uint64_t ns = 0;
  uint32_t value = 1;
  void* spin_params[] = {&ns};
  void* append_params[] = {&log_, &value, &ns};
  CUfunction spin = kernels_.spin;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE,
                cuLaunchKernel(nullptr, 1, 1, 1, 1, 1, 1, 0, nullptr, spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE,
                cuLaunchKernel(reinterpret_cast<CUfunction>(&ns), 1, 1, 1, 1, 1, 1, 0, nullptr,
                               spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(spin, 0, 1, 1, 1, 1, 1, 0, nullptr, spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(spin, 1, 1, 0, 1, 1, 1, 0, nullptr, spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(spin, 1, 1, 1, 0, 1, 1, 0, nullptr, spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(spin, 1, 1, 1, 1, 1, 0, 0, nullptr, spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(spin, 1, 1, 1, 64, 32, 1, 0, nullptr, spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchCooperativeKernel(spin, 1, 0, 1, 1, 1, 1, 0, nullptr, spin_params));
  CUlaunchConfig config{};
  config.gridDimX = config.gridDimY = config.gridDimZ = 1;
  config.blockDimX = config.blockDimY = 1;  // blockDimZ 0
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(&config, spin, spin_params, nullptr));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuLaunchKernelEx(nullptr, spin, spin_params, nullptr));
  config.blockDimZ = 1;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE,
                cuLaunchKernelEx(&config, nullptr, spin_params, nullptr));
  // The CU_LAUNCH_PARAM_* form of the arguments is not supported.
  size_t size = sizeof(ns);
  void* extra[] = {CU_LAUNCH_PARAM_BUFFER_POINTER, &ns, CU_LAUNCH_PARAM_BUFFER_SIZE, &size,
                   CU_LAUNCH_PARAM_END};
  CU_EXPECT_ERR(CUDA_ERROR_NOT_SUPPORTED,
                cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, extra));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, spin_params, extra));
  // Missing arguments, memory the fake did not hand out, misaligned memory.
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuLaunchKernel(spin, 1, 1, 1, 1, 1, 1, 0, nullptr, nullptr, nullptr));
  uint32_t local[4] = {};
  CUdeviceptr bad = reinterpret_cast<CUdeviceptr>(local);
  void* bad_params[] = {&bad, &value, &ns};
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, LaunchWith(kernels_.append, nullptr, bad_params));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, Fill(kernels_, nullptr, log_ + 2, 1, 1));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, Fill(kernels_, nullptr, log_, 1, 1ull << 40));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, Fill(kernels_, nullptr, log_, 1, ~0ull));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, Add(kernels_, nullptr, log_, bad, 4));
  // An unknown stream.
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE,
                LaunchWith(kernels_.append, reinterpret_cast<CUstream>(&ns), append_params));
  CU_ASSERT(cuCtxSynchronize());
  EXPECT_EQ(fakecudaKernelsRun(0), run_before);
  EXPECT_EQ(reinterpret_cast<const uint32_t*>(log_)[0], 0u);
  EXPECT_EQ(local[0], 0u);
}

TEST_F(KernelTest, AnAppendPastTheEndOfTheLogWritesNothing) {
  // A log that ends where its mapping ends, inside a larger reservation.
  const CUmemAllocationProp prop = DeviceProp(0, /*exportable=*/false);
  CUmemGenericAllocationHandle h = 0;
  CUdeviceptr va = 0;
  const CUmemAccessDesc rw = ReadWrite();
  CU_ASSERT(cuMemCreate(&h, kTwoMiB, &prop, 0));
  CU_ASSERT(cuMemAddressReserve(&va, 2 * kTwoMiB, 0, 0, 0));
  CU_ASSERT(cuMemMap(va, kTwoMiB, 0, h, 0));
  CU_ASSERT(cuMemSetAccess(va, kTwoMiB, &rw, 1));
  constexpr uint32_t kWords = kTwoMiB / 4;
  auto* words = reinterpret_cast<uint32_t*>(va);
  words[0] = kWords - 2;  // room for one more entry
  for (uint32_t v : {1u, 2u}) CU_ASSERT(Append(kernels_, nullptr, va, v));
  CU_ASSERT(cuStreamSynchronize(nullptr));
  EXPECT_EQ(words[0], kWords - 1);
  EXPECT_EQ(words[kWords - 1], 1u);
  CU_ASSERT(cuMemUnmap(va, kTwoMiB));
  CU_ASSERT(cuMemAddressFree(va, 2 * kTwoMiB));
  CU_ASSERT(cuMemRelease(h));
}

TEST_F(KernelTest, UnloadingTheModuleOrDestroyingTheContextEndsItsFunctions) {
  CUcontext ctx = nullptr;
  CU_ASSERT(cuCtxCreate(&ctx, nullptr, 0, 0));
  CUmodule m = nullptr;
  CU_ASSERT(cuModuleLoadData(&m, "fakecuda-module"));
  CUfunction f = nullptr;
  CU_ASSERT(cuModuleGetFunction(&f, m, "fakecuda_spin"));
  CU_ASSERT(cuCtxDestroy(ctx));
  CUcontext primary = nullptr;
  CU_ASSERT(cuDevicePrimaryCtxRetain(&primary, 0));
  CU_ASSERT(cuCtxSetCurrent(primary));
  uint64_t ns = 0;
  void* params[] = {&ns};
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, LaunchWith(f, nullptr, params));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuModuleUnload(m));
  CU_ASSERT(cuDevicePrimaryCtxRelease(0));
}

}  // namespace
}  // namespace fakecuda_test
