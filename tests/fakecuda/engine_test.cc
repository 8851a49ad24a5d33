// The compute engine shared by processes: kernels of two processes on one device take turns.
// Each side runs in a forked child with its own fake driver on a shared FAKECUDA_SHM; the
// assertions are about sums and ratios of durations, with wide margins (CI machines are busy).

#include "kernel_util.h"

namespace fakecuda_test {
namespace {

struct Pipe {
  Pipe() { EXPECT_EQ(0, pipe(fds)); }
  ~Pipe() {
    close(fds[0]);
    close(fds[1]);
  }
  int fds[2] = {-1, -1};
  int r() const { return fds[0]; }
  int w() const { return fds[1]; }
};

// Sets up the child's driver on `shm` with FAKECUDA_ENGINE=`engine` and FAKECUDA_TIMESLICE_US=
// `slice_us`; a stream and the kernels.
bool ChildSetup(const std::string& shm, const char* engine, Kernels* kernels, CUstream* stream,
                const char* slice_us = "0") {
  setenv("FAKECUDA_SHM", shm.c_str(), 1);
  setenv("FAKECUDA_ENGINE", engine, 1);
  setenv("FAKECUDA_TIMESLICE_US", slice_us, 1);
  InitPrimary();
  return !::testing::Test::HasFailure() && kernels->Load() == CUDA_SUCCESS &&
         cuStreamCreate(stream, CU_STREAM_NON_BLOCKING) == CUDA_SUCCESS;
}

// Two processes each queue `n` kernels of `ms` ms at the same moment; returns the time each took
// from the start signal to its last kernel's completion, in ms (~0 on a failure in a child).
std::pair<uint64_t, uint64_t> RunTwoQueues(const char* engine, int n, uint64_t ms) {
  const ShmGuard shm(UniqueShmName("engine"));
  Pipe ready;
  Pipe go;
  Pipe results;
  pid_t children[2];
  for (pid_t& child : children) {
    child = ForkChild([&] {
      Kernels kernels;
      CUstream s = nullptr;
      if (!ChildSetup(shm.name, engine, &kernels, &s)) return 1;
      const uint64_t run_before = fakecudaKernelsRun(0);
      WriteU64(ready.w(), 1);
      const uint64_t start = ReadU64(go.r());
      for (int i = 0; i < n; ++i) {
        if (Spin(kernels, s, ms * kMs) != CUDA_SUCCESS) return 2;
      }
      if (cuStreamSynchronize(s) != CUDA_SUCCESS) return 3;
      if (fakecudaKernelsRun(0) - run_before != static_cast<uint64_t>(n)) return 4;
      WriteU64(results.w(), (NowNs() - start) / kMs);
      return 0;
    });
  }
  ReadU64(ready.r());
  ReadU64(ready.r());
  const uint64_t start = NowNs();
  WriteU64(go.w(), start);
  WriteU64(go.w(), start);
  std::pair<uint64_t, uint64_t> took{0, 0};
  for (pid_t child : children) {
    const int status = WaitChild(child);
    EXPECT_TRUE(ExitedOk(status)) << status;
  }
  // Both children wrote their result before exiting (pipe writes of 8 bytes are atomic).
  took.first = ReadU64(results.r());
  took.second = ReadU64(results.r());
  return took;
}

TEST(EngineTest, TwoProcessesContendingForTheEngineTakeTheSumOfTheirDurations) {
  // 2 x 10 kernels of 20 ms: 400 ms of engine time; each process alone needs 200 ms.
  const auto [a, b] = RunTwoQueues("1", 10, 20);
  EXPECT_GE(std::max(a, b), 360u) << a << " ms and " << b << " ms";
  // They interleave: neither finished its 200 ms of work much before the other.
  EXPECT_GE(std::min(a, b), 300u) << a << " ms and " << b << " ms";
  EXPECT_LT(std::max(a, b), 1500u);
}

TEST(EngineTest, WithTheEngineModelOffProcessesDoNotShare) {
  const auto [a, b] = RunTwoQueues("0", 10, 20);
  EXPECT_GE(std::min(a, b), 195u) << a << " ms and " << b << " ms";  // kernels keep their time
  EXPECT_LT(std::max(a, b), 330u) << a << " ms and " << b << " ms";
}

// A process queues `queue` kernels of 10 ms at once; another then runs 10 kernels of 10 ms,
// each waited for before the next, and returns how long they took in ms (0 on a failure).
uint64_t OneAtATimeBesideAQueue(const char* slice_us, int queue) {
  const ShmGuard shm(UniqueShmName("engine-ls"));
  Pipe queued;
  Pipe result;
  const pid_t be = ForkChild([&] {
    Kernels kernels;
    CUstream s = nullptr;
    if (!ChildSetup(shm.name, "1", &kernels, &s, slice_us)) return 1;
    for (int i = 0; i < queue; ++i) {
      if (Spin(kernels, s, 10 * kMs) != CUDA_SUCCESS) return 2;
    }
    WriteU64(queued.w(), 1);
    return cuStreamSynchronize(s) == CUDA_SUCCESS ? 0 : 3;
  });
  // The latency-sensitive side: 10 kernels of 10 ms, each waited for before the next.
  const int status = RunInChild([&] {
    Kernels kernels;
    CUstream s = nullptr;
    if (!ChildSetup(shm.name, "1", &kernels, &s, slice_us)) return 1;
    ReadU64(queued.r());
    // Wait until the other process's first kernel holds the engine.
    uint64_t busy = 0;
    for (int i = 0; i < 2000 && busy <= NowNs(); ++i) {
      busy = fakecudaEngineBusyUntilNs(0);
      usleep(500);
    }
    const uint64_t start = NowNs();
    EXPECT_GT(busy, start) << "the other process never reserved the engine";
    for (int i = 0; i < 10; ++i) {
      CU_EXPECT(Spin(kernels, s, 10 * kMs));
      CU_EXPECT(cuStreamSynchronize(s));
    }
    WriteU64(result.w(), (NowNs() - start) / kMs);
    return 0;
  });
  EXPECT_TRUE(ExitedOk(status)) << status;
  EXPECT_TRUE(ExitedOk(WaitChild(be)));
  return ExitedOk(status) ? ReadU64(result.r()) : 0;
}

TEST(EngineTest, ALongQueueOfAnotherProcessHalvesTheRateOfOneKernelAtATime) {
  // 60 kernels queued (600 ms). Alone the 10 kernels take 100 ms; each waits for the other
  // process's current one: about 200 ms, and far less than the other's whole queue.
  const uint64_t took_ms = OneAtATimeBesideAQueue("0", 60);
  EXPECT_GE(took_ms, 170u);
  EXPECT_LT(took_ms, 450u);
}

TEST(EngineTest, UnderTimeSlicesAQueueHoldsTheEngineForASlicePerKernelOfTheOther) {
  // Slices of 40 ms and 150 kernels queued (1.5 s): each of the 10 kernels, launched after the
  // previous one finished (the process ran dry, so the queue took the engine back), waits for
  // the rest of the queue's slice: about 10 x (40 + 10) ms, against 200 ms in turns per kernel.
  const uint64_t took_ms = OneAtATimeBesideAQueue("40000", 150);
  EXPECT_GE(took_ms, 380u);
  EXPECT_LT(took_ms, 1300u);
}

}  // namespace
}  // namespace fakecuda_test
