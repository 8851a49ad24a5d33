// Streams, events, host functions and stream memory operations.

#include <atomic>
#include <mutex>
#include <thread>
#include <vector>

#include "test_util.h"

namespace fakecuda_test {
namespace {

class StreamTest : public ::testing::Test {
 protected:
  void SetUp() override { InitPrimary(); }
};

struct Log {
  std::mutex mu;
  std::vector<int> order;
  void Add(int v) {
    std::lock_guard<std::mutex> lock(mu);
    order.push_back(v);
  }
  std::vector<int> Get() {
    std::lock_guard<std::mutex> lock(mu);
    return order;
  }
};

struct Step {
  Log* log;
  int value;
  int sleep_ms;
};

void CUDA_CB RunStep(void* arg) {
  auto* step = static_cast<Step*>(arg);
  if (step->sleep_ms > 0) std::this_thread::sleep_for(std::chrono::milliseconds(step->sleep_ms));
  step->log->Add(step->value);
}

TEST_F(StreamTest, RunsItsWorkInOrderAndAsynchronously) {
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, CU_STREAM_NON_BLOCKING));
  Log log;
  std::vector<Step> steps;
  steps.reserve(20);
  for (int i = 0; i < 20; ++i) steps.push_back({&log, i, i == 0 ? 100 : 0});
  const double t0 = NowMs();
  for (Step& step : steps) CU_ASSERT(cuLaunchHostFunc(s, RunStep, &step));
  EXPECT_LT(NowMs() - t0, 80);  // queued, not run: the first step alone sleeps 100 ms
  EXPECT_EQ(cuStreamQuery(s), CUDA_ERROR_NOT_READY);
  CU_ASSERT(cuStreamSynchronize(s));
  CU_EXPECT(cuStreamQuery(s));
  std::vector<int> expected(20);
  for (int i = 0; i < 20; ++i) expected[i] = i;
  EXPECT_EQ(log.order, expected);
  CU_ASSERT(cuStreamDestroy(s));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuStreamQuery(s));
}

TEST_F(StreamTest, StreamsOverlapAndEventsOrderThem) {
  CUstream a = nullptr;
  CUstream b = nullptr;
  CU_ASSERT(cuStreamCreateWithPriority(&a, 0, -1));
  CU_ASSERT(cuStreamCreate(&b, 0));
  CUevent e = nullptr;
  CU_ASSERT(cuEventCreate(&e, 0));
  CU_EXPECT(cuEventQuery(e));  // never recorded: complete
  Log log;
  Step slow{&log, 1, 150};
  Step after_event{&log, 2, 0};
  Step independent{&log, 3, 0};
  CU_ASSERT(cuLaunchHostFunc(a, RunStep, &slow));
  CU_ASSERT(cuEventRecord(e, a));
  EXPECT_EQ(cuEventQuery(e), CUDA_ERROR_NOT_READY);
  CU_ASSERT(cuStreamWaitEvent(b, e, 0));
  CU_ASSERT(cuLaunchHostFunc(b, RunStep, &after_event));
  CUstream c = nullptr;
  CU_ASSERT(cuStreamCreate(&c, 0));
  CU_ASSERT(cuLaunchHostFunc(c, RunStep, &independent));
  CU_ASSERT(cuStreamSynchronize(c));
  CU_ASSERT(cuEventSynchronize(e));
  CU_ASSERT(cuStreamSynchronize(b));
  // c overlapped with a's slow step; b waited for it.
  EXPECT_EQ(log.order, (std::vector<int>{3, 1, 2}));
  for (CUstream s : {a, b, c}) CU_ASSERT(cuStreamDestroy(s));
  CU_ASSERT(cuEventDestroy(e));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuEventQuery(e));
}

TEST_F(StreamTest, ElapsedTimeBetweenEvents) {
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  CUevent start = nullptr;
  CUevent stop = nullptr;
  CUevent untimed = nullptr;
  CU_ASSERT(cuEventCreate(&start, 0));
  CU_ASSERT(cuEventCreate(&stop, CU_EVENT_BLOCKING_SYNC));
  CU_ASSERT(cuEventCreate(&untimed, CU_EVENT_DISABLE_TIMING));
  float ms = 0;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, start, stop));  // unrecorded
  Log log;
  Step sleep{&log, 0, 50};
  CU_ASSERT(cuEventRecord(start, s));
  CU_ASSERT(cuLaunchHostFunc(s, RunStep, &sleep));
  CU_ASSERT(cuEventRecord(stop, s));
  CU_ASSERT(cuEventRecord(untimed, s));
  CU_ASSERT(cuEventSynchronize(stop));
  CU_ASSERT(cuEventElapsedTime(&ms, start, stop));
  EXPECT_GE(ms, 49.0f);
  EXPECT_LT(ms, 2000.0f);
  CU_ASSERT(cuEventElapsedTime_v2(&ms, start, stop));
  EXPECT_GE(ms, 49.0f);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuEventElapsedTime(&ms, start, untimed));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuEventElapsedTime(nullptr, start, stop));
  for (CUevent e : {start, stop, untimed}) CU_ASSERT(cuEventDestroy(e));
  CU_ASSERT(cuStreamDestroy(s));
}

TEST_F(StreamTest, CallbacksGetTheirStreamAndData) {
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  struct Seen {
    CUstream stream = nullptr;
    CUresult status = CUDA_ERROR_UNKNOWN;
  } seen;
  CU_ASSERT(cuStreamAddCallback(
      s,
      [](CUstream stream, CUresult status, void* data) {
        auto* out = static_cast<Seen*>(data);
        out->stream = stream;
        out->status = status;
      },
      &seen, 0));
  CU_ASSERT(cuStreamSynchronize(s));
  EXPECT_EQ(seen.stream, s);
  EXPECT_EQ(seen.status, CUDA_SUCCESS);
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuStreamAddCallback(s, nullptr, nullptr, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuLaunchHostFunc(s, nullptr, nullptr));
  CU_ASSERT(cuStreamDestroy(s));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_HANDLE, cuStreamDestroy(s));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuStreamCreate(&s, 0x10));
}

TEST_F(StreamTest, WaitValueBlocksUntilWriteValue) {
  CUdeviceptr flag = 0;
  CU_ASSERT(cuMemAlloc(&flag, 64));
  CU_ASSERT(cuMemsetD32(flag, 0, 16));
  CUstream waiter = nullptr;
  CUstream writer = nullptr;
  CU_ASSERT(cuStreamCreate(&waiter, CU_STREAM_NON_BLOCKING));
  CU_ASSERT(cuStreamCreate(&writer, CU_STREAM_NON_BLOCKING));
  Log log;
  Step after_wait{&log, 2, 0};
  Step before_write{&log, 1, 100};
  CU_ASSERT(cuStreamWaitValue32(waiter, flag, 5, CU_STREAM_WAIT_VALUE_GEQ));
  CU_ASSERT(cuLaunchHostFunc(waiter, RunStep, &after_wait));
  CU_ASSERT(cuLaunchHostFunc(writer, RunStep, &before_write));
  CU_ASSERT(cuStreamWriteValue32(writer, flag, 7, 0));
  CU_ASSERT(cuStreamSynchronize(waiter));
  EXPECT_EQ(log.order, (std::vector<int>{1, 2}));
  // EQ / AND / NOR and the 64-bit forms, already satisfied.
  CU_ASSERT(cuStreamWaitValue32(waiter, flag, 7, CU_STREAM_WAIT_VALUE_EQ));
  CU_ASSERT(cuStreamWaitValue32(waiter, flag, 2, CU_STREAM_WAIT_VALUE_AND));
  CU_ASSERT(cuStreamWaitValue32(waiter, flag, 0, CU_STREAM_WAIT_VALUE_NOR));
  CU_ASSERT(cuStreamWriteValue64(writer, flag + 8, 1ull << 40, 0));
  CU_ASSERT(cuStreamWaitValue64(waiter, flag + 8, 1ull << 40, CU_STREAM_WAIT_VALUE_EQ));
  CU_ASSERT(cuStreamSynchronize(waiter));
  // Addresses the fake did not hand out are refused.
  int local = 0;
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE,
                cuStreamWriteValue32(writer, reinterpret_cast<CUdeviceptr>(&local), 1, 0));
  CU_EXPECT_ERR(CUDA_ERROR_INVALID_VALUE, cuStreamWaitValue32(waiter, flag + 2, 1, 0));
  CU_ASSERT(cuStreamDestroy(waiter));
  CU_ASSERT(cuStreamDestroy(writer));
  CU_ASSERT(cuMemFree(flag));
}

TEST_F(StreamTest, PerThreadDefaultStreamsAreIndependentLegacyIsShared) {
  std::atomic<bool> release{false};
  auto blocker = [](void* arg) {
    auto* flag = static_cast<std::atomic<bool>*>(arg);
    while (!flag->load()) std::this_thread::sleep_for(std::chrono::milliseconds(1));
  };
  CUcontext ctx = nullptr;
  CU_ASSERT(cuCtxGetCurrent(&ctx));
  // This thread's per-thread stream is blocked...
  CU_ASSERT(cuLaunchHostFunc_ptsz(nullptr, blocker, &release));
  EXPECT_EQ(cuStreamQuery_ptsz(nullptr), CUDA_ERROR_NOT_READY);
  EXPECT_EQ(cuStreamQuery(CU_STREAM_PER_THREAD), CUDA_ERROR_NOT_READY);
  // ...another thread's is not, while the legacy stream is one for the context.
  CU_ASSERT(cuLaunchHostFunc(CU_STREAM_LEGACY, blocker, &release));
  std::thread([&] {
    CU_EXPECT(cuCtxSetCurrent(ctx));
    CU_EXPECT(cuStreamQuery_ptsz(nullptr));
    CU_EXPECT(cuStreamSynchronize_ptsz(nullptr));
    EXPECT_EQ(cuStreamQuery(nullptr), CUDA_ERROR_NOT_READY);  // the shared legacy stream
  }).join();
  release = true;
  CU_ASSERT(cuStreamSynchronize_ptsz(nullptr));
  CU_ASSERT(cuStreamSynchronize(nullptr));
}

TEST_F(StreamTest, DestroyReturnsAtOnceAndTheWorkStillRuns) {
  CUstream s = nullptr;
  CU_ASSERT(cuStreamCreate(&s, 0));
  Log log;
  Step step{&log, 9, 100};
  CU_ASSERT(cuLaunchHostFunc(s, RunStep, &step));
  const double t0 = NowMs();
  CU_ASSERT(cuStreamDestroy(s));
  EXPECT_LT(NowMs() - t0, 80);
  CU_ASSERT(cuCtxSynchronize());  // destroyed streams are no longer the context's to wait for
  for (int i = 0; i < 200 && log.Get().empty(); ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(log.Get(), std::vector<int>{9});
}

}  // namespace
}  // namespace fakecuda_test
