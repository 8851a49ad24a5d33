// The copy gate in process: the test plays missiled over a memfd copy channel (it reads the
// request ring and opens gates) and the GPU through a RecordingDriver.
#include "copy_gate.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <string>
#include <chrono>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "gtest/gtest.h"
#include "spdlog/sinks/null_sink.h"
#include "testing/recording_driver.h"

namespace missile::shim {
namespace {

using ::missile::shim::testing::RecordingDriver;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kChunk = 2 * kMiB;

class CopyGateTest : public ::testing::Test {
 protected:
  void SetUp() override {
    // As the daemon makes it: sized for good (the gate refuses a region that could shrink).
    auto memory = shm::ShmRegion::Create("copy_gate_test", copych::kRegionBytes);
    ASSERT_TRUE(memory.ok()) << memory.status();
    memory_ = *std::move(memory);
    auto memfd = memory_.Dup();
    ASSERT_TRUE(memfd.ok());
    region_ = static_cast<copych::Region*>(memory_.data());
    region_->magic = copych::kMagic;
    region_->version = copych::kVersion;
    region_->chunk_bytes.store(kChunk);
    region_->bypass_bytes = kMiB;
    int pair[2];
    ASSERT_EQ(socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair), 0);
    daemon_end_ = pair[0];
    auto gate = CopyGate::Open(*memfd, pair[1], driver_.api(), log_.get(),
                               [this] { return alive_.load(); });
    ASSERT_TRUE(gate.ok()) << gate.status();
    gate_ = std::move(*gate);
  }
  void TearDown() override {
    gate_.reset();
    if (daemon_end_ >= 0) close(daemon_end_);
  }

  copych::Ring& ring() { return region_->ring[copych::kHostToDevice]; }
  // Waits for request `n` (0-based) of host-to-device copies and returns it.
  copych::RequestEntry AwaitRequest(uint64_t n) {
    while (ring().request_head.load(std::memory_order_acquire) <= n) std::this_thread::yield();
    return ring().requests[n % copych::kGates];
  }
  // The daemon's side of one chunk: wait for the arrival, open the gate, wait for the copy,
  // count it.
  void Grant(const copych::RequestEntry& req, uint64_t k) {
    while (ring().gates.arrived[req.first].load(std::memory_order_acquire) == 0) {
      std::this_thread::yield();
    }
    uint32_t gate = copych::GateOf(req.first, k);
    ring().gates.go[gate].store(1, std::memory_order_release);
    copych::FutexWakeAll(&ring().gates.go[gate]);
    while (ring().gates.done[gate].load(std::memory_order_acquire) != copych::kDoneCopied) {
      std::this_thread::yield();
    }
    ring().gates.done[gate].store(copych::kDoneCounted, std::memory_order_release);
  }

  // A copy chunk function that records what it copied and whether its gate was open.
  struct Copies {
    absl::Mutex mu;
    std::vector<std::pair<uint64_t, uint64_t>> done ABSL_GUARDED_BY(mu);
    std::atomic<int> before_grant{0};
    size_t size() {
      absl::MutexLock lock(&mu);
      return done.size();
    }
  };
  CopyGate::Chunk Recorder(Copies* copies) {
    return [this, copies](uint64_t off, uint64_t len) {
      // The request is the newest one posted; its chunk for `off` must have been granted.
      uint64_t head = ring().request_head.load(std::memory_order_acquire);
      if (head > 0 && !gate_->abandoned()) {
        const copych::RequestEntry& req = ring().requests[(head - 1) % copych::kGates];
        uint32_t gate = copych::GateOf(req.first, off / req.chunk_bytes);
        if (ring().gates.go[gate].load(std::memory_order_acquire) == 0) ++copies->before_grant;
      }
      absl::MutexLock lock(&copies->mu);
      copies->done.emplace_back(off, len);
      return CUDA_SUCCESS;
    };
  }

  RecordingDriver driver_;
  std::shared_ptr<spdlog::logger> log_ = std::make_shared<spdlog::logger>(
      "copy_gate_test", std::make_shared<spdlog::sinks::null_sink_mt>());
  shm::ShmRegion memory_;
  copych::Region* region_ = nullptr;  // in memory_
  int daemon_end_ = -1;
  std::atomic<bool> alive_{true};
  std::unique_ptr<CopyGate> gate_;
};

TEST_F(CopyGateTest, OpenRegistersTheRegionAndReadsTheDaemonsWords) {
  EXPECT_EQ(gate_->bypass_bytes(), kMiB);
  EXPECT_EQ(gate_->chunk_bytes(), kChunk);
  EXPECT_EQ(driver_.Count("cuMemHostRegister"), 1);
  region_->chunk_bytes.store(12345);  // not a sane size: the size it opened with
  EXPECT_EQ(gate_->chunk_bytes(), kChunk);
}

TEST_F(CopyGateTest, SyncCopyRunsEachChunkAfterItsGrant) {
  Copies copies;
  std::thread daemon([&] {
    copych::RequestEntry req = AwaitRequest(0);
    EXPECT_EQ(req.bytes, 5 * kMiB);
    EXPECT_EQ(req.chunk_bytes, kChunk);
    for (uint64_t k = 0; k < 3; ++k) Grant(req, k);
  });
  EXPECT_EQ(gate_->RunSync(copych::kHostToDevice, 5 * kMiB, CU_STREAM_LEGACY, false,
                           Recorder(&copies)),
            CUDA_SUCCESS);
  daemon.join();
  absl::MutexLock lock(&copies.mu);
  EXPECT_EQ(copies.done, (std::vector<std::pair<uint64_t, uint64_t>>{
                             {0, kChunk}, {kChunk, kChunk}, {2 * kChunk, kMiB}}));
  EXPECT_EQ(copies.before_grant.load(), 0);
  // An idle stream: the thread itself marked the request arrived, no stream write.
  EXPECT_EQ(driver_.Count("cuStreamWriteValue32"), 0);
}

TEST_F(CopyGateTest, NoChunkRunsBeforeTheDaemonGrantsIt) {
  Copies copies;
  std::thread copier([&] {
    gate_->RunSync(copych::kHostToDevice, 3 * kChunk, CU_STREAM_LEGACY, false,
                   Recorder(&copies));
  });
  copych::RequestEntry req = AwaitRequest(0);
  Grant(req, 0);
  std::this_thread::sleep_for(std::chrono::milliseconds(30));
  EXPECT_EQ(copies.size(), 1u);  // the second chunk waits for its gate
  Grant(req, 1);
  Grant(req, 2);
  copier.join();
  EXPECT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies.before_grant.load(), 0);
}

TEST_F(CopyGateTest, BusyStreamHasTheGpuReportTheArrival) {
  driver_.set_stream_query(CUDA_ERROR_NOT_READY);
  Copies copies;
  std::thread copier([&] {
    gate_->RunSync(copych::kHostToDevice, kChunk, CU_STREAM_LEGACY, false, Recorder(&copies));
  });
  copych::RequestEntry req = AwaitRequest(0);
  while (driver_.Count("cuStreamWriteValue32") == 0) std::this_thread::yield();
  EXPECT_EQ(ring().gates.arrived[req.first].load(), 0u);  // not the thread's to say
  // The write targets the arrived word as the GPU sees the gate's registered mapping.
  uintptr_t base = 0;
  for (const std::string& c : driver_.calls()) {
    if (c.rfind("cuMemHostRegister ", 0) == 0) base = std::stoul(c.substr(18), nullptr, 16);
  }
  const uintptr_t offset = reinterpret_cast<uintptr_t>(&ring().gates.arrived[req.first]) -
                           reinterpret_cast<uintptr_t>(region_);
  char want[64];
  snprintf(want, sizeof(want), "cuStreamWriteValue32 %#lx 1",
           static_cast<unsigned long>(base + offset));
  EXPECT_EQ(driver_.calls().back(), want);
  ring().gates.arrived[req.first].store(1);  // the GPU ran the write
  Grant(req, 0);
  copier.join();
  EXPECT_EQ(copies.size(), 1u);
}

TEST_F(CopyGateTest, ClosedChannelLetsWaitingCopiesGoUnscheduled) {
  Copies copies;
  std::thread copier([&] {
    gate_->RunSync(copych::kHostToDevice, 2 * kChunk, CU_STREAM_LEGACY, false,
                   Recorder(&copies));
  });
  AwaitRequest(0);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(copies.size(), 0u);
  region_->closed.store(1);
  copych::FutexWakeAll(&region_->closed);
  copier.join();
  EXPECT_TRUE(gate_->abandoned());
  EXPECT_EQ(copies.size(), 2u);
  // Later copies go in one piece, without a request.
  EXPECT_EQ(gate_->RunSync(copych::kHostToDevice, 3 * kChunk, CU_STREAM_LEGACY, false,
                           Recorder(&copies)),
            CUDA_SUCCESS);
  EXPECT_EQ(ring().request_head.load(), 1u);
  absl::MutexLock lock(&copies.mu);
  EXPECT_EQ(copies.done.back(), std::make_pair(uint64_t{0}, 3 * kChunk));
}

TEST_F(CopyGateTest, DeadDaemonOpensTheGate) {
  Copies copies;
  std::thread copier([&] {
    gate_->RunSync(copych::kHostToDevice, kChunk, CU_STREAM_LEGACY, false, Recorder(&copies));
  });
  AwaitRequest(0);
  alive_.store(false);  // the watcher polls it every 20 ms
  copier.join();
  EXPECT_TRUE(gate_->abandoned());
  EXPECT_EQ(copies.size(), 1u);
}

// A grant the daemon lent ahead (copy_channel.h, head_start): a copy that starts at once takes
// it and runs its first chunk without waiting for the daemon.
TEST_F(CopyGateTest, AnIdleCopyTakesTheLentGrantForItsFirstChunk) {
  ring().head_start.store(1);
  Copies copies;
  std::thread copier([&] {
    gate_->RunSync(copych::kHostToDevice, 3 * kChunk, CU_STREAM_LEGACY, false,
                   Recorder(&copies));
  });
  copych::RequestEntry req = AwaitRequest(0);
  EXPECT_EQ(req.flags, copych::kRequestStarted);
  EXPECT_EQ(ring().head_start.load(), 0u) << "taken";
  // Chunk 0 runs with nobody granting it; chunk 1 waits for its gate.
  while (ring().gates.done[req.first].load(std::memory_order_acquire) != copych::kDoneCopied) {
    std::this_thread::yield();
  }
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_EQ(copies.size(), 1u);
  Grant(req, 1);
  Grant(req, 2);
  copier.join();
  EXPECT_EQ(copies.size(), 3u);
  EXPECT_EQ(copies.before_grant.load(), 0) << "its first gate was open before it ran";

  // The next copy finds nothing lent: it waits for its grant as usual.
  std::thread second([&] {
    gate_->RunSync(copych::kHostToDevice, kChunk, CU_STREAM_LEGACY, false, Recorder(&copies));
  });
  copych::RequestEntry next = AwaitRequest(1);
  EXPECT_EQ(next.flags, 0u);
  Grant(next, 0);
  second.join();
}

TEST_F(CopyGateTest, ACopyBehindOtherWorkLeavesTheLentGrant) {
  ring().head_start.store(1);
  driver_.set_stream_query(CUDA_ERROR_NOT_READY);
  Copies copies;
  std::thread copier([&] {
    gate_->RunSync(copych::kHostToDevice, kChunk, CU_STREAM_LEGACY, false, Recorder(&copies));
  });
  copych::RequestEntry req = AwaitRequest(0);
  EXPECT_EQ(req.flags, 0u);
  EXPECT_EQ(ring().head_start.load(), 1u) << "it would hold the slot while its stream is busy";
  while (driver_.Count("cuStreamWriteValue32") == 0) std::this_thread::yield();
  ring().gates.arrived[req.first].store(1);  // the GPU ran the arrival write
  Grant(req, 0);
  copier.join();
}

TEST_F(CopyGateTest, AnAsyncCopyOnTheLentGrantEnqueuesNoWaitForItsFirstChunk) {
  ring().head_start.store(1);
  auto copy = [](uint64_t, uint64_t, CUstream) { return CUDA_SUCCESS; };
  ASSERT_EQ(gate_->EnqueueAsync(copych::kHostToDevice, 3 * kChunk, CU_STREAM_LEGACY, false, copy,
                                /*host_paced=*/false),
            CUDA_SUCCESS);
  EXPECT_EQ(AwaitRequest(0).flags, copych::kRequestStarted);
  EXPECT_EQ(driver_.Count("cuStreamWaitValue32"), 2) << "chunks 1 and 2 wait on the stream";
  EXPECT_EQ(driver_.Count("cuStreamWriteValue32"), 3) << "each chunk reports itself done";
}

}  // namespace
}  // namespace missile::shim
