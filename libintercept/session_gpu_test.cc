// SessionGpu in process: the SessionManager over a test session (the daemon: a memfd copy
// channel and the daemon's own pacing domain) and a RecordingDriver (the GPU). What is checked
// is that each (session, GPU) gets one object whose memory, gate and pacer are made once,
// however many threads ask first; that a new session gets new objects while the old ones stay
// usable; that a successor in the same daemon session adopts the old memory; and that the
// host-paced decision of a copy is the SessionGpu's.
#include "session_gpu.h"

#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/mutex.h"
#include "copy.h"
#include "gtest/gtest.h"
#include "missile/pacing/budget.h"
#include "pacing_domain.h"
#include "session_manager.h"
#include "spdlog/sinks/null_sink.h"
#include "testing/recording_driver.h"

namespace missile::shim {
namespace {

using daemon::PacingDomain;
using daemon::PacingSettings;
using ::missile::shim::testing::RecordingDriver;

constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr uint64_t kLsSession = 1;

// A BE tenant's daemon session: a copy channel per GPU as missiled makes one, and the pacing
// regions from the test's PacingDomain. Counts the opens.
class TestSession final : public SessionClient {
 public:
  TestSession(uint64_t id, std::string instance, PacingDomain* domain, int gpus)
      : id_(id), instance_(std::move(instance)), domain_(domain) {
    for (int i = 0; i < gpus; ++i) {
      gpus_.push_back(GpuLink{static_cast<uint32_t>(i), RecordingDriver::UuidOf(i),
                              256 * kMiB, 2 * kMiB, 1});
    }
  }
  ~TestSession() override {
    for (int fd : daemon_ends_) close(fd);
  }

  const std::vector<GpuLink>& gpus() const override { return gpus_; }
  uint64_t session_id() const override { return id_; }
  const std::string& instance() const override { return instance_; }
  absl::StatusOr<std::vector<BlockLease>> Allocate(uint32_t, bool, uint64_t) override {
    return absl::UnimplementedError("no memory in this test");
  }
  absl::Status Free(uint32_t, const std::vector<uint64_t>&) override { return absl::OkStatus(); }
  absl::StatusOr<TenantUsage> Usage(uint32_t) override {
    return absl::UnimplementedError("no memory in this test");
  }
  absl::StatusOr<std::pair<int, int>> OpenCopyChannel(uint32_t gpu) override {
    (void)gpu;
    copy_opens_.fetch_add(1);
    // As slow as a round trip to a busy daemon, so that concurrent first users pile up here.
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto memory = shm::ShmRegion::Create("session_gpu_test", copych::kRegionBytes);
    if (!memory.ok()) return memory.status();
    auto fd = memory->Dup();
    if (!fd.ok()) return fd.status();
    auto* region = static_cast<copych::Region*>(memory->data());
    region->magic = copych::kMagic;
    region->version = copych::kVersion;
    region->chunk_bytes.store(2 * kMiB);
    region->bypass_bytes = kMiB;
    int pair[2];
    if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) {
      close(*fd);
      return absl::InternalError("socketpair");
    }
    absl::MutexLock lock(&mu_);
    regions_.push_back(*std::move(memory));
    daemon_ends_.push_back(pair[0]);
    return std::make_pair(*fd, pair[1]);
  }
  absl::StatusOr<std::pair<int, int>> OpenPacing(uint32_t gpu) override {
    (void)gpu;
    pacing_opens_.fetch_add(1);
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
    auto fds = domain_->Join(id_, 200, TenantClass::kBestEffort, 1);
    if (!fds.ok()) return fds.status();
    return std::make_pair(fds->directory, fds->lanes);
  }
  absl::StatusOr<int> OpenPeerLanes(uint32_t gpu, uint32_t slot, uint64_t epoch) override {
    (void)gpu;
    return domain_->OpenPeerLanes(id_, slot, epoch);
  }
  bool connected() const override { return connected_.load(); }
  bool AwaitEnd(absl::Duration) const override { return !connected_.load(); }

  void End() { connected_.store(false); }
  int copy_opens() const { return copy_opens_.load(); }
  int pacing_opens() const { return pacing_opens_.load(); }

 private:
  const uint64_t id_;
  const std::string instance_;
  PacingDomain* const domain_;
  std::vector<GpuLink> gpus_;
  std::atomic<bool> connected_{true};
  std::atomic<int> copy_opens_{0};
  std::atomic<int> pacing_opens_{0};
  absl::Mutex mu_;
  std::vector<shm::ShmRegion> regions_ ABSL_GUARDED_BY(mu_);
  std::vector<int> daemon_ends_;  // written under mu_, closed at destruction
};

// Hands out the queued sessions in order (the first registration, then each one after).
class TestConnector final : public SessionConnector {
 public:
  void Queue(std::unique_ptr<TestSession> s) {
    absl::MutexLock lock(&mu_);
    queued_.push_back(std::move(s));
  }
  bool SocketExists(const std::string&) override { return true; }
  bool Listening(const std::string&) override {
    absl::MutexLock lock(&mu_);
    return !queued_.empty();
  }
  absl::StatusOr<std::unique_ptr<SessionClient>> Connect(const TenantIdentity&) override {
    absl::MutexLock lock(&mu_);
    if (queued_.empty()) return absl::UnavailableError("no session queued");
    std::unique_ptr<SessionClient> s = std::move(queued_.front());
    queued_.erase(queued_.begin());
    return s;
  }

 private:
  absl::Mutex mu_;
  std::vector<std::unique_ptr<TestSession>> queued_ ABSL_GUARDED_BY(mu_);
};

class SessionGpuTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto d = PacingDomain::Create(PacingSettings{});
    ASSERT_TRUE(d.ok()) << d.status();
    domain_ = std::move(*d);
    driver_.set_run_stream_writes(true);
  }
  void TearDown() override { sessions_.reset(); }

  TestSession* Queue(uint64_t id, const std::string& instance, int gpus = 1) {
    auto s = std::make_unique<TestSession>(id, instance, domain_.get(), gpus);
    TestSession* raw = s.get();
    connector_.Queue(std::move(s));
    return raw;
  }
  void Start() {
    sessions_ = std::make_unique<SessionManager>(config_, driver_.api(), &connector_, log_.get());
  }
  // Whether the manager serves `session` within 10 s (its reconnect thread looks every second).
  bool AwaitClient(TestSession* session) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (sessions_->Client() != session && std::chrono::steady_clock::now() < deadline) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return sessions_->Client() == session;
  }
  // An LS tenant joins the GPU's pacing domain (its page sealed, as its shim does).
  void JoinLs() {
    auto fds = domain_->Join(kLsSession, 100, TenantClass::kLatencySensitive, 1);
    ASSERT_TRUE(fds.ok());
    close(fds->directory);
    auto lanes = shm::ShmRegion::Attach(fds->lanes, sizeof(pacingreg::LanesPage),
                                        shm::Access::kReadWrite);
    ASSERT_TRUE(lanes.ok());
    ls_ = *std::move(lanes);
    pacingreg::InitLanes(static_cast<pacingreg::LanesPage*>(ls_.data()));
    ASSERT_TRUE(ls_.SealWrites().ok());
    domain_->PublishSealed();
  }

  RecordingDriver driver_;
  TestConnector connector_;
  Config config_;
  std::shared_ptr<spdlog::logger> log_ = std::make_shared<spdlog::logger>(
      "session_gpu_test", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::unique_ptr<PacingDomain> domain_;
  shm::ShmRegion ls_;
  std::unique_ptr<SessionManager> sessions_;
};

TEST_F(SessionGpuTest, OpenedOnceUnderConcurrentFirstUse) {
  TestSession* session = Queue(2, "one");
  Start();
  constexpr int kThreads = 8;
  std::atomic<int> ready{0};
  std::vector<SessionGpu*> gpus(kThreads);
  std::vector<CopyGate*> gates(kThreads);
  std::vector<Pacer*> pacers(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      ready.fetch_add(1);
      while (ready.load() < kThreads) std::this_thread::yield();
      gpus[i] = sessions_->CurrentGpu();
      if (gpus[i] == nullptr) return;
      // Half ask for the gate first, half for the pacer.
      if (i % 2 == 0) gates[i] = gpus[i]->Gate();
      pacers[i] = gpus[i]->pacer();
      if (i % 2 == 1) gates[i] = gpus[i]->Gate();
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_NE(gpus[0], nullptr);
  ASSERT_NE(gates[0], nullptr);
  ASSERT_NE(pacers[0], nullptr);
  for (int i = 1; i < kThreads; ++i) {
    EXPECT_EQ(gpus[i], gpus[0]);
    EXPECT_EQ(gates[i], gates[0]);
    EXPECT_EQ(pacers[i], pacers[0]);
  }
  EXPECT_EQ(gpus[0]->session(), session);
  EXPECT_EQ(gpus[0]->device(), 0);
  EXPECT_EQ(session->copy_opens(), 1);
  EXPECT_EQ(session->pacing_opens(), 1);
  // Asked again, by device: the same object, nothing opened again.
  EXPECT_EQ(sessions_->GpuOf(0), gpus[0]);
  EXPECT_EQ(sessions_->GpuOf(0)->Gate(), gates[0]);
  EXPECT_EQ(session->copy_opens(), 1);
}

TEST_F(SessionGpuTest, EachGpuHasItsOwnObject) {
  TestSession* session = Queue(2, "one", 2);
  Start();
  SessionGpu* first = sessions_->GpuOf(0);
  SessionGpu* second = sessions_->GpuOf(1);
  ASSERT_NE(first, nullptr);
  ASSERT_NE(second, nullptr);
  EXPECT_NE(first, second);
  EXPECT_EQ(second->device(), 1);
  EXPECT_NE(first->Gate(), second->Gate());
  EXPECT_EQ(session->copy_opens(), 2);
  driver_.set_current_device(1);
  EXPECT_EQ(sessions_->CurrentGpu(), second);
}

TEST_F(SessionGpuTest, ANewSessionGetsNewObjectsWhileTheOldStayValid) {
  TestSession* old_session = Queue(2, "one");
  Start();
  SessionGpu* old_gpu = sessions_->CurrentGpu();
  ASSERT_NE(old_gpu, nullptr);
  CopyGate* old_gate = old_gpu->Gate();
  Pacer* old_pacer = old_gpu->pacer();
  ASSERT_NE(old_gate, nullptr);
  ASSERT_NE(old_pacer, nullptr);

  // The daemon restarts: the old session ends, and the manager registers again (its thread
  // looks every second).
  old_session->End();
  TestSession* new_session = Queue(3, "two");
  EXPECT_EQ(old_gpu->Gate(), nullptr);  // an ended session schedules no copy
  ASSERT_TRUE(AwaitClient(new_session));

  SessionGpu* new_gpu = sessions_->CurrentGpu();
  ASSERT_NE(new_gpu, nullptr);
  EXPECT_NE(new_gpu, old_gpu);
  EXPECT_EQ(new_gpu->session(), new_session);
  CopyGate* new_gate = new_gpu->Gate();
  ASSERT_NE(new_gate, nullptr);
  EXPECT_NE(new_gate, old_gate);
  EXPECT_EQ(new_session->copy_opens(), 1);
  EXPECT_EQ(old_session->copy_opens(), 1);

  // The old object, its gate and its pacer are still there for threads inside them.
  EXPECT_EQ(old_gpu->session(), old_session);
  EXPECT_EQ(old_gpu->opened_pacer(), old_pacer);
  EXPECT_EQ(old_gpu->pacer(), old_pacer);
  EXPECT_FALSE(old_pacer->enabled());  // its session ended: it paces nothing
  EXPECT_FALSE(old_pacer->Paces());
  EXPECT_EQ(old_pacer->marked(), 0u);
  int seen = 0;
  sessions_->ForEachGpu([&](const SessionGpu& g) {
    EXPECT_EQ(&g, seen == 0 ? old_gpu : new_gpu);  // oldest first
    ++seen;
  });
  EXPECT_EQ(seen, 2);
}

TEST_F(SessionGpuTest, HostPacedCopiesIsTheSessionGpusDecision) {
  TestSession* session = Queue(2, "one");
  Start();
  SessionGpu* gpu = sessions_->CurrentGpu();
  ASSERT_NE(gpu, nullptr);
  // A BE alone on the GPU: nobody to protect, its copies wait on its stream.
  EXPECT_FALSE(gpu->HostPacedCopies());
  EXPECT_EQ(session->pacing_opens(), 1);  // asking opened the pacer
  domain_->PublishSealed();
  JoinLs();
  EXPECT_TRUE(gpu->HostPacedCopies());
  // The copy path gets the call's SessionGpu and its gate from the same object.
  CopyManager copies(driver_.api(), sessions_.get(), nullptr);
  WorkCall call(driver_.api(), gpu, nullptr, false);
  EXPECT_EQ(copies.GateForAsync(call, 4 * kMiB, 0, nullptr, false), gpu->Gate());
  EXPECT_TRUE(call.gpu()->HostPacedCopies());
  // The LS's budget at its last step lets the BE go as if no LS were there; back from it, the
  // copies are host-paced again.
  domain_->SetBeShareForTesting(kLsSession, pacing::kUnheldSharePpm, pacing::kMaxWindowScale);
  EXPECT_FALSE(gpu->HostPacedCopies());
  domain_->SetBeShareForTesting(kLsSession, pacing::kMaxSharePpm, pacing::kMaxWindowScale);
  EXPECT_TRUE(gpu->HostPacedCopies());
  // Once the session ends, nothing is host-paced (the pacer paces nothing).
  session->End();
  EXPECT_FALSE(gpu->HostPacedCopies());
  EXPECT_EQ(copies.GateForAsync(call, 4 * kMiB, 0, nullptr, false), nullptr);
  EXPECT_EQ(session->pacing_opens(), 1);
}

// The driver is asked once per call whether the call's stream is being captured.
std::atomic<int> g_capture_queries{0};
std::atomic<bool> g_capturing{false};
CUresult CUDAAPI CountingIsCapturing(CUstream, CUstreamCaptureStatus* status) {
  g_capture_queries.fetch_add(1);
  *status = g_capturing.load() ? CU_STREAM_CAPTURE_STATUS_ACTIVE : CU_STREAM_CAPTURE_STATUS_NONE;
  return CUDA_SUCCESS;
}

TEST_F(SessionGpuTest, CaptureStateIsAskedOncePerCall) {
  Queue(2, "one");
  Start();
  DriverApi api = driver_.api();
  api.StreamIsCapturing = &CountingIsCapturing;
  api.StreamIsCapturingPtsz = &CountingIsCapturing;
  SessionGpu* gpu = sessions_->CurrentGpu();
  CUstream stream = reinterpret_cast<CUstream>(0x10);
  g_capture_queries = 0;
  {
    WorkCall call(api, gpu, stream, false);
    EXPECT_FALSE(call.Capturing());
    CopyManager copies(api, sessions_.get(), nullptr);
    EXPECT_NE(copies.GateForAsync(call, 4 * kMiB, 0, stream, false), nullptr);
    EXPECT_FALSE(call.Capturing(stream, false));
    EXPECT_EQ(g_capture_queries.load(), 1);
    // Another stream (or flavour) is not the call's: asked each time.
    EXPECT_FALSE(call.Capturing(stream, true));
    EXPECT_EQ(g_capture_queries.load(), 2);
  }
  g_capturing = true;
  {
    WorkCall call(api, gpu, stream, false);
    CopyManager copies(api, sessions_.get(), nullptr);
    EXPECT_EQ(copies.GateForAsync(call, 4 * kMiB, 0, stream, false), nullptr);
    EXPECT_TRUE(call.Capturing());
    EXPECT_EQ(g_capture_queries.load(), 3);
  }
  g_capturing = false;
}

// The GPU's memory: made once however many threads allocate first, a failure not kept, none
// for an ended session, and an ended client's memory adopted by its successor in the same
// daemon session (the daemon kept the session through a stall), never by another session.
TEST_F(SessionGpuTest, MemoryIsMadeOnceAndAdoptedWithinItsDaemonSession) {
  TestSession* first = Queue(2, "one");
  Start();
  std::atomic<int> makes{0};
  auto memory_of = [&](SessionGpu* gpu) {
    return gpu->Memory([&](const GpuLink& link) -> absl::StatusOr<std::unique_ptr<GpuMemory>> {
      if (makes.fetch_add(1) == 0) return absl::InternalError("the first attempt fails");
      std::this_thread::sleep_for(std::chrono::milliseconds(20));  // let the threads pile up
      return GpuMemory::Create(gpu->session(), link, gpu->device(), makes.load(), config_,
                               driver_.api(), log_.get());
    });
  };
  SessionGpu* gpu = sessions_->CurrentGpu();
  ASSERT_NE(gpu, nullptr);
  EXPECT_EQ(memory_of(gpu).status().code(), absl::StatusCode::kInternal);
  EXPECT_EQ(gpu->memory(), nullptr);

  constexpr int kThreads = 8;
  std::vector<GpuMemory*> made(kThreads);
  std::vector<std::thread> threads;
  for (int i = 0; i < kThreads; ++i) {
    threads.emplace_back([&, i] {
      absl::StatusOr<GpuMemory*> m = memory_of(gpu);
      made[i] = m.ok() ? *m : nullptr;
    });
  }
  for (std::thread& t : threads) t.join();
  ASSERT_NE(made[0], nullptr);
  for (GpuMemory* m : made) EXPECT_EQ(m, made[0]);
  EXPECT_EQ(makes.load(), 2);
  EXPECT_EQ(gpu->memory(), made[0]);
  EXPECT_EQ(made[0]->session(), first);

  // The daemon kept the session through a stall: the shim registers into it again.
  first->End();
  EXPECT_EQ(memory_of(gpu).value(), made[0]);  // made before the end: still there
  TestSession* successor = Queue(2, "one", /*gpus=*/2);
  ASSERT_TRUE(AwaitClient(successor));
  SessionGpu* next = sessions_->CurrentGpu();
  ASSERT_NE(next, gpu);
  EXPECT_EQ(made[0]->adopted_by(), nullptr);  // not before the successor makes its own
  absl::StatusOr<GpuMemory*> next_memory = memory_of(next);
  ASSERT_TRUE(next_memory.ok()) << next_memory.status();
  EXPECT_EQ(made[0]->adopted_by(), successor);

  // An ended session's object makes no memory; a restarted daemon's session (another
  // instance) adopts nothing.
  SessionGpu* unused = sessions_->GpuOf(1);
  ASSERT_NE(unused, nullptr);
  successor->End();
  const int before = makes.load();
  EXPECT_EQ(memory_of(unused).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(unused->memory(), nullptr);
  EXPECT_EQ(makes.load(), before);
  TestSession* other = Queue(2, "two");
  ASSERT_TRUE(AwaitClient(other));
  ASSERT_TRUE(memory_of(sessions_->CurrentGpu()).ok());
  EXPECT_EQ((*next_memory)->adopted_by(), nullptr);
}

TEST_F(SessionGpuTest, NoSessionNoObject) {
  Start();  // nothing queued: the daemon does not answer
  EXPECT_EQ(sessions_->CurrentGpu(), nullptr);
  EXPECT_EQ(sessions_->GpuOf(0), nullptr);
  WorkCall call(driver_.api(), nullptr, nullptr, false);
  CopyManager copies(driver_.api(), sessions_.get(), nullptr);
  EXPECT_EQ(copies.GateFor(call, 4 * kMiB, 0), nullptr);
}

}  // namespace
}  // namespace missile::shim
