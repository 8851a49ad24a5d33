// The copy arbiter against a tenant played by the test itself: it maps the channel region the
// arbiter hands out and writes requests and gate words the way the shim and the GPU would.
#include "copy_arbiter.h"

#include <sys/mman.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <functional>
#include <memory>
#include <thread>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using copych::kHostToDevice;
using copych::kDeviceToHost;
constexpr uint64_t kMiB = uint64_t{1} << 20;
constexpr TenantClass kLs = TenantClass::kLatencySensitive;
constexpr TenantClass kBe = TenantClass::kBestEffort;

// Polls `cond` for up to `ms` milliseconds.
bool Eventually(const std::function<bool()>& cond, int ms = 2000) {
  auto end = std::chrono::steady_clock::now() + std::chrono::milliseconds(ms);
  while (std::chrono::steady_clock::now() < end) {
    if (cond()) return true;
    std::this_thread::sleep_for(std::chrono::microseconds(200));
  }
  return cond();
}

class Tenant {
 public:
  Tenant(CopyArbiter& arbiter, uint64_t session, TenantClass cls, uint32_t weight = 1024) {
    auto fds = arbiter.OpenChannel(session, cls, weight);
    EXPECT_TRUE(fds.ok()) << fds.status();
    if (!fds.ok()) return;
    memfd_ = fds->first;
    bell_ = fds->second;
    void* p = mmap(nullptr, copych::kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd_, 0);
    EXPECT_NE(p, MAP_FAILED);
    region_ = static_cast<copych::Region*>(p);
  }
  ~Tenant() {
    if (region_ != nullptr) munmap(region_, copych::kRegionBytes);
    if (memfd_ >= 0) close(memfd_);
    if (bell_ >= 0) close(bell_);
  }
  copych::Region& region() { return *region_; }
  copych::Gates& gates() { return region_->ring[kHostToDevice].gates; }
  uint64_t Chunk() { return region_->chunk_bytes.load(); }
  // Posts a request whose chunks use gates first, first + 1, ..., cut as the region says now
  // (or into `chunk` bytes).
  void Post(uint64_t bytes, uint32_t first, bool arrived, uint64_t chunk = 0) {
    copych::Ring& r = region_->ring[kHostToDevice];
    if (chunk == 0) chunk = Chunk();
    uint64_t chunks = (bytes + chunk - 1) / chunk;
    for (uint64_t k = 0; k < chunks; ++k) {
      r.gates.go[copych::GateOf(first, k)] = 0;
      r.gates.done[copych::GateOf(first, k)] = 0;
    }
    // A first gate out of range (a malformed request) has no arrived word to write.
    if (first < copych::kGates) r.gates.arrived[first] = arrived ? 1 : 0;
    r.requests[head_ % copych::kGates] = {bytes, chunk, first, flags_};
    flags_ = 0;
    r.request_head.store(++head_, std::memory_order_release);
    uint64_t one = 1;
    if (bell_ >= 0) (void)!write(bell_, &one, sizeof(one));
  }
  bool Lent() { return region_->ring[kHostToDevice].head_start.load() == 1; }
  // As the shim posts a copy that starts at once: takes the grant lent ahead, if any, opens the
  // first gate itself and marks the request. False (nothing posted) without one.
  bool PostStarted(uint64_t bytes, uint32_t first) {
    if (region_->ring[kHostToDevice].head_start.exchange(0) != 1) return false;
    PostMarked(bytes, first);
    return true;
  }
  // The mark alone, lent grant or not (a lying tenant).
  void PostMarked(uint64_t bytes, uint32_t first) {
    flags_ = copych::kRequestStarted;
    Post(bytes, first, /*arrived=*/true);
    gates().go[first] = 1;
  }
  bool Go(uint32_t gate) { return gates().go[gate].load() != 0; }
  int memfd() const { return memfd_; }
  int bell() const { return bell_; }
  void CloseBell() {
    close(bell_);
    bell_ = -1;
  }

 private:
  int memfd_ = -1;
  int bell_ = -1;
  copych::Region* region_ = nullptr;
  uint64_t head_ = 0;
  uint32_t flags_ = 0;  // of the next request
};

CopyArbiter::Options OneInFlight(uint64_t be_chunk = 0) {
  CopyArbiter::Options o;
  o.scheduler.chunk_bytes = 2 * kMiB;
  o.scheduler.be_chunk_bytes = be_chunk;
  o.scheduler.max_inflight_chunks_total = 1;
  o.scheduler.max_inflight_chunks_per_tenant = 1;
  return o;
}

TEST(CopyArbiterTest, GrantsChunkByChunkAndCountsFinishedGates) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok()) << arbiter.status();
  Tenant t(**arbiter, 1, kBe);
  EXPECT_EQ(t.Chunk(), 2 * kMiB);
  t.Post(5 * kMiB, 10, /*arrived=*/true);  // chunks at gates 10, 11, 12
  ASSERT_TRUE(Eventually([&] { return t.Go(10); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(t.Go(11)) << "one chunk in flight at most";
  t.gates().done[10] = copych::kDoneCopied;  // the GPU finished chunk 0
  ASSERT_TRUE(Eventually([&] { return t.gates().done[10].load() == copych::kDoneCounted; }));
  ASSERT_TRUE(Eventually([&] { return t.Go(11); }));
  t.gates().done[11] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return t.Go(12); }));
  t.gates().done[12] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return t.gates().done[12].load() == copych::kDoneCounted; }));
  std::vector<PcieUse> use = (*arbiter)->Usage();
  ASSERT_EQ(use.size(), 1u);
  EXPECT_EQ(use[0].bytes[kHostToDevice], 5 * kMiB);
  // One request: one wait for its first grant, in some bucket; none the other way.
  uint64_t waits = 0;
  for (uint64_t n : use[0].waits[kHostToDevice].counts) waits += n;
  EXPECT_EQ(waits, 1u);
  for (uint64_t n : use[0].waits[kDeviceToHost].counts) EXPECT_EQ(n, 0u);
}

TEST(CopyArbiterTest, GrantWaitsFallInTheirBuckets) {
  GrantWaits w;
  w.Observe(0);
  w.Observe(kGrantWaitBoundsNs[0]);      // a bound belongs to its bucket (le)
  w.Observe(kGrantWaitBoundsNs[0] + 1);  // the next one
  w.Observe(uint64_t{10} * 1'000'000'000);  // above every bound: the last bucket
  EXPECT_EQ(w.counts[0], 2u);
  EXPECT_EQ(w.counts[1], 1u);
  EXPECT_EQ(w.counts[kGrantWaitBuckets - 1], 1u);
  EXPECT_EQ(w.sum_ns, 2 * kGrantWaitBoundsNs[0] + 1 + uint64_t{10} * 1'000'000'000);
}

// Without its thread the arbiter moves only when asked (the fuzzer of the shared region relies
// on it); each pass does what a pass of the thread does, and a malformed request still drops
// the channel.
TEST(CopyArbiterTest, WithoutItsThreadEachPassIsAskedFor) {
  CopyArbiter::Options o = OneInFlight();
  o.start_thread = false;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status();
  Tenant t(**arbiter, 1, kBe);
  t.Post(3 * kMiB, 7, /*arrived=*/true);  // chunks at gates 7 and 8
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(t.Go(7)) << "no pass was asked for";
  (*arbiter)->PollOnce();
  EXPECT_TRUE(t.Go(7));
  EXPECT_FALSE(t.Go(8)) << "one chunk in flight at most";
  t.gates().done[7] = copych::kDoneCopied;
  (*arbiter)->PollOnce();
  EXPECT_EQ(t.gates().done[7].load(), copych::kDoneCounted);
  EXPECT_TRUE(t.Go(8));

  t.Post(0, 20, /*arrived=*/false);  // a copy of no bytes
  (*arbiter)->PollOnce();
  EXPECT_EQ(t.region().closed.load(), 1u);
}

// A request is queued only once it has arrived at the head of its stream; until then it holds
// nothing, and another tenant's copy goes first.
TEST(CopyArbiterTest, RequestWaitsForItsArrivalAndHoldsNothingMeanwhile) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok());
  Tenant waiting(**arbiter, 1, kBe);
  Tenant other(**arbiter, 2, kBe);
  waiting.Post(2 * kMiB, 0, /*arrived=*/false);
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(waiting.Go(0));
  other.Post(2 * kMiB, 0, /*arrived=*/true);
  ASSERT_TRUE(Eventually([&] { return other.Go(0); })) << "the unarrived request held the link";
  other.gates().done[0] = copych::kDoneCopied;
  waiting.gates().arrived[0] = 1;  // the stream reached the copy
  ASSERT_TRUE(Eventually([&] { return waiting.Go(0); }));
}

// LS chunks go first; a BE tenant's chunks use the BE chunk size, which its region announces.
TEST(CopyArbiterTest, LsFirstAndBestEffortChunkSize) {
  auto arbiter = CopyArbiter::Create(OneInFlight(/*be_chunk=*/8 * kMiB));
  ASSERT_TRUE(arbiter.ok());
  Tenant be(**arbiter, 1, kBe);
  Tenant ls(**arbiter, 2, kLs);
  EXPECT_EQ(be.Chunk(), 8 * kMiB);
  EXPECT_EQ(ls.Chunk(), 2 * kMiB);
  be.Post(16 * kMiB, 0, true);  // two chunks at gates 0 and 1
  ASSERT_TRUE(Eventually([&] { return be.Go(0); }));
  ls.Post(4 * kMiB, 0, true);
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  be.gates().done[0] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return ls.Go(0); }));
  EXPECT_FALSE(be.Go(1)) << "a BE chunk went before a pending LS chunk";
  ls.gates().done[0] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return ls.Go(1); }));
  ls.gates().done[1] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return be.Go(1); }));
}

// While an LS tenant copies, a BE tenant is told to cut its copies into the small chunk, and
// after ls_quiet_ns without LS copies into the large one again; a request keeps the size it
// was posted with, so its gates still line up with its chunks.
TEST(CopyArbiterTest, BestEffortChunksShrinkWhileLsCopiesAndGrowBackAfter) {
  CopyArbiter::Options o = OneInFlight(/*be_chunk=*/8 * kMiB);
  o.ls_quiet_ns = 200'000'000;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok());
  Tenant be(**arbiter, 1, kBe);
  Tenant ls(**arbiter, 2, kLs);
  EXPECT_EQ(be.Chunk(), 8 * kMiB) << "no LS tenant has copied yet";
  be.Post(16 * kMiB, 0, true);  // 8 MiB chunks at gates 0 and 1
  ASSERT_TRUE(Eventually([&] { return be.Go(0); }));
  const auto ls_posted = std::chrono::steady_clock::now();
  ls.Post(2 * kMiB, 0, true);
  ASSERT_TRUE(Eventually([&] { return be.Chunk() == 2 * kMiB; }));
  be.Post(4 * kMiB, 2, true);  // posted at the small size: 2 MiB chunks at gates 2 and 3
  be.gates().done[0] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return ls.Go(0); }));
  ls.gates().done[0] = copych::kDoneCopied;
  for (uint32_t gate = 1; gate < 4; ++gate) {
    ASSERT_TRUE(Eventually([&] { return be.Go(gate); })) << "gate " << gate;
    EXPECT_FALSE(be.Go(gate + 1)) << "one chunk in flight at most";
    be.gates().done[gate] = copych::kDoneCopied;
  }
  ASSERT_TRUE(Eventually([&] { return be.gates().done[3].load() == copych::kDoneCounted; }));
  std::vector<PcieUse> use = (*arbiter)->Usage();
  auto be_use = std::find_if(use.begin(), use.end(), [](const PcieUse& u) { return u.session == 1; });
  ASSERT_NE(be_use, use.end()) << "the BE session has no usage entry";
  EXPECT_EQ(be_use->bytes[kHostToDevice], 20 * kMiB);
  ASSERT_TRUE(Eventually([&] { return be.Chunk() == 8 * kMiB; }, 3000));
  EXPECT_GE(std::chrono::steady_clock::now() - ls_posted, std::chrono::milliseconds(200))
      << "grew back before ls_quiet_ns had passed";
  EXPECT_EQ(ls.Chunk(), 2 * kMiB) << "an LS tenant always copies in the small chunk";
}

// A chunk size the daemon never offered drops the channel (its gates would not line up).
TEST(CopyArbiterTest, UnofferedChunkSizeClosesTheChannel) {
  auto arbiter = CopyArbiter::Create(OneInFlight(/*be_chunk=*/8 * kMiB));
  ASSERT_TRUE(arbiter.ok());
  Tenant odd(**arbiter, 1, kBe);
  Tenant good(**arbiter, 2, kBe);
  odd.Post(12 * kMiB, 0, true, /*chunk=*/3 * kMiB);
  ASSERT_TRUE(Eventually([&] { return odd.region().closed.load() != 0; }));
  good.Post(16 * kMiB, 0, true, /*chunk=*/2 * kMiB);  // the small size is always accepted
  EXPECT_TRUE(Eventually([&] { return good.Go(0); }));
  EXPECT_EQ(good.region().closed.load(), 0u);
}

// The large size is for BE tenants while no LS tenant copies: an LS tenant, or a BE tenant
// that keeps using it once it is offered the small one, loses its channel after the grace time.
TEST(CopyArbiterTest, LargeChunksOnlyWhileOffered) {
  CopyArbiter::Options o = OneInFlight(/*be_chunk=*/8 * kMiB);
  o.large_chunk_grace_ns = 100'000'000;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok());
  Tenant ls_big(**arbiter, 1, kLs);
  ls_big.Post(8 * kMiB, 0, true, /*chunk=*/8 * kMiB);
  ASSERT_TRUE(Eventually([&] { return ls_big.region().closed.load() != 0; }))
      << "an LS tenant was never offered the large size";
  Tenant be(**arbiter, 2, kBe);
  Tenant ls(**arbiter, 3, kLs);
  ls.Post(2 * kMiB, 0, true);
  ASSERT_TRUE(Eventually([&] { return ls.Go(0); }));
  ls.gates().done[0] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return be.Chunk() == 2 * kMiB; }));
  be.Post(8 * kMiB, 0, true, /*chunk=*/8 * kMiB);  // within the grace time: accepted
  ASSERT_TRUE(Eventually([&] { return be.Go(0); }));
  be.gates().done[0] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return be.gates().done[0].load() == copych::kDoneCounted; }));
  EXPECT_EQ(be.region().closed.load(), 0u);
  // Past the grace time, with the LS tenant's last copy within ls_quiet_ns: still offered 2 MiB.
  std::this_thread::sleep_for(std::chrono::milliseconds(150));
  EXPECT_EQ(be.Chunk(), 2 * kMiB);
  be.Post(8 * kMiB, 1, true, /*chunk=*/8 * kMiB);
  ASSERT_TRUE(Eventually([&] { return be.region().closed.load() != 0; }));
  EXPECT_EQ(ls.region().closed.load(), 0u);
}

// While the GPU's LS tenants rest, BE tenants are offered the rest size, unless an LS tenant
// copies; once the rest is over, that size is refused after the grace time like the BE size.
TEST(CopyArbiterTest, BestEffortChunksTakeTheRestSizeWhileTheLsRests) {
  CopyArbiter::Options o = OneInFlight(/*be_chunk=*/8 * kMiB);
  o.scheduler.be_rest_chunk_bytes = 32 * kMiB;
  o.large_chunk_grace_ns = 100'000'000;
  o.ls_quiet_ns = 1'000'000'000;  // long enough for a loaded machine's steps below
  auto resting = std::make_shared<std::atomic<bool>>(false);
  o.ls_resting = resting;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok());
  Tenant be(**arbiter, 1, kBe);
  Tenant ls(**arbiter, 2, kLs);
  EXPECT_EQ(be.Chunk(), 8 * kMiB) << "no rest yet";
  resting->store(true);
  ASSERT_TRUE(Eventually([&] { return be.Chunk() == 32 * kMiB; }));
  EXPECT_EQ(ls.Chunk(), 2 * kMiB) << "an LS tenant always copies in the small chunk";
  be.Post(64 * kMiB, 0, true);  // 32 MiB chunks at gates 0 and 1
  for (uint32_t gate = 0; gate < 2; ++gate) {
    ASSERT_TRUE(Eventually([&] { return be.Go(gate); })) << "gate " << gate;
    be.gates().done[gate] = copych::kDoneCopied;
  }
  ASSERT_TRUE(Eventually([&] { return be.gates().done[1].load() == copych::kDoneCounted; }));
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the grace time
  be.Post(8 * kMiB, 2, true, /*chunk=*/8 * kMiB);  // the BE size, as posted before the rest
  ASSERT_TRUE(Eventually([&] { return be.Go(2); })) << "the BE size stays accepted in a rest";
  be.gates().done[2] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return be.gates().done[2].load() == copych::kDoneCounted; }));
  EXPECT_EQ(be.region().closed.load(), 0u);
  ls.Post(2 * kMiB, 0, true);
  // An LS tenant copies during the rest: the BE size, not the small one.
  ASSERT_TRUE(Eventually([&] { return be.Chunk() == 8 * kMiB; })) << "an LS tenant copies";
  ASSERT_TRUE(Eventually([&] { return ls.Go(0); }));
  ls.gates().done[0] = copych::kDoneCopied;
  be.Post(8 * kMiB, 3, true, /*chunk=*/8 * kMiB);
  ASSERT_TRUE(Eventually([&] { return be.Go(3); }));
  be.gates().done[3] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return be.gates().done[3].load() == copych::kDoneCounted; }));
  // Out of the rest with the LS still copying: the small size at once.
  resting->store(false);
  ASSERT_TRUE(Eventually([&] { return be.Chunk() == 2 * kMiB; })) << "the LS copies, no rest";
  ASSERT_TRUE(Eventually([&] { return be.Chunk() == 8 * kMiB; }, 6000)) << "back after ls_quiet_ns";
  std::this_thread::sleep_for(std::chrono::milliseconds(150));  // past the grace time
  be.Post(32 * kMiB, 4, true, /*chunk=*/32 * kMiB);
  ASSERT_TRUE(Eventually([&] { return be.region().closed.load() != 0; }));
  EXPECT_EQ(ls.region().closed.load(), 0u);
}

// A malformed request (a gate out of range, a size of 0) drops that tenant's channel only.
TEST(CopyArbiterTest, MalformedRequestClosesOnlyThatChannel) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok());
  Tenant bad(**arbiter, 1, kBe);
  Tenant good(**arbiter, 2, kBe);
  bad.Post(2 * kMiB, copych::kGates, true);
  ASSERT_TRUE(Eventually([&] { return bad.region().closed.load() != 0; }));
  Tenant zero(**arbiter, 3, kBe);
  zero.Post(0, 0, true);
  ASSERT_TRUE(Eventually([&] { return zero.region().closed.load() != 0; }));
  EXPECT_EQ(good.region().closed.load(), 0u);
  good.Post(2 * kMiB, 5, true);
  EXPECT_TRUE(Eventually([&] { return good.Go(5); }));
}

// A closed session frees its in-flight slot at once; the arbiter going away closes every
// channel, so tenants stop waiting for grants.
TEST(CopyArbiterTest, ClosingFreesTheLinkAndShutdownClosesEveryChannel) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok());
  auto* gone = new Tenant(**arbiter, 1, kBe);
  Tenant next(**arbiter, 2, kBe);
  gone->Post(2 * kMiB, 0, true);
  ASSERT_TRUE(Eventually([&] { return gone->Go(0); }));
  next.Post(2 * kMiB, 0, true);
  (*arbiter)->CloseChannel(1);  // its chunk never finishes
  delete gone;
  ASSERT_TRUE(Eventually([&] { return next.Go(0); }));
  arbiter->reset();
  EXPECT_NE(next.region().closed.load(), 0u);
}

// A chunk not finished 500 ms after its grant stops counting against the in-flight limit; its
// gate is still watched, and counted when the chunk finally finishes.
TEST(CopyArbiterTest, StuckChunkIsWrittenOffAndItsGateStillReturns) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok());
  Tenant t(**arbiter, 1, kBe);
  t.Post(4 * kMiB, 0, true);
  ASSERT_TRUE(Eventually([&] { return t.Go(0); }));
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_FALSE(t.Go(1));
  ASSERT_TRUE(Eventually([&] { return t.Go(1); }, 2000)) << "the stuck chunk was not written off";
  t.gates().done[0] = copych::kDoneCopied;  // late
  EXPECT_TRUE(Eventually([&] { return t.gates().done[0].load() == copych::kDoneCounted; }));
}

// The region cannot be resized by the tenant: a shrunk file would fault the daemon's next read.
TEST(CopyArbiterTest, RegionIsSealedAtItsSize) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok());
  Tenant t(**arbiter, 1, kBe);
  EXPECT_NE(ftruncate(t.memfd(), 0), 0);
  EXPECT_NE(ftruncate(t.memfd(), 2 * copych::kRegionBytes), 0);
  t.Post(2 * kMiB, 0, true);
  EXPECT_TRUE(Eventually([&] { return t.Go(0); }));
}

// Gates come back one chunk at a time: a tenant that reuses the counted first gate of a request
// whose second chunk is still in flight, and so has every gate taken, is within its rights.
TEST(CopyArbiterTest, GatesAreCountedBackChunkByChunk) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok());
  Tenant t(**arbiter, 1, kBe);
  t.Post(4 * kMiB, 0, true);  // gates 0 and 1
  ASSERT_TRUE(Eventually([&] { return t.Go(0); }));
  t.gates().done[0] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return t.gates().done[0].load() == copych::kDoneCounted; }));
  ASSERT_TRUE(Eventually([&] { return t.Go(1); }));  // chunk 1 in flight, never finished here
  for (uint32_t gate = 2; gate < copych::kGates; ++gate) t.Post(kMiB, gate, false);
  t.Post(kMiB, 0, false);  // gate 0 again: 4096 gates taken, none twice
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  EXPECT_EQ(t.region().closed.load(), 0u) << "a tenant within its gates was dropped";
}

// Each tenant rings its own doorbell, a socket pair whose other end only the daemon holds: one that
// makes its end blocking and fills it, or closes it, neither blocks the daemon nor silences
// another tenant's doorbell.
TEST(CopyArbiterTest, DoorbellsAreSeparatePerTenant) {
  auto arbiter = CopyArbiter::Create(OneInFlight());
  ASSERT_TRUE(arbiter.ok());
  Tenant rude(**arbiter, 1, kBe);
  Tenant quiet(**arbiter, 2, kBe);
  ASSERT_NE(rude.bell(), quiet.bell());
  // Fill the rude tenant's doorbell without blocking this test, then close it.
  char junk[4096] = {};
  while (write(rude.bell(), junk, sizeof(junk)) > 0) {
  }
  rude.CloseBell();
  std::this_thread::sleep_for(std::chrono::milliseconds(30));  // let the arbiter fall asleep
  quiet.Post(2 * kMiB, 0, true);
  EXPECT_TRUE(Eventually([&] { return quiet.Go(0); }, 1000));
}

// The head start (copy_channel.h): with nothing in flight or pending, the arbiter lends a grant
// ahead; a copy posted on it has its first chunk counted as granted, in the slot kept for it.
TEST(CopyArbiterTest, AnIdleLinkLendsAGrantAheadAndItsChunkHoldsTheSlot) {
  CopyArbiter::Options o = OneInFlight();
  o.start_thread = false;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status();
  Tenant t(**arbiter, 1, kBe);
  EXPECT_FALSE(t.Lent());
  (*arbiter)->PollOnce();
  ASSERT_TRUE(t.Lent());
  ASSERT_TRUE(t.PostStarted(5 * kMiB, 10));  // chunks at gates 10, 11, 12; 10 open
  (*arbiter)->PollOnce();
  EXPECT_FALSE(t.Go(11)) << "its first chunk holds the one slot";
  EXPECT_FALSE(t.Lent()) << "nothing is lent while a chunk is in flight";
  t.gates().done[10] = copych::kDoneCopied;
  (*arbiter)->PollOnce();
  EXPECT_EQ(t.gates().done[10].load(), copych::kDoneCounted);
  EXPECT_TRUE(t.Go(11));
  t.gates().done[11] = copych::kDoneCopied;
  (*arbiter)->PollOnce();
  t.gates().done[12] = copych::kDoneCopied;
  (*arbiter)->PollOnce();
  EXPECT_EQ(t.gates().done[12].load(), copych::kDoneCounted);
  EXPECT_TRUE(t.Lent()) << "idle again: lent again";
  std::vector<PcieUse> use = (*arbiter)->Usage();
  ASSERT_EQ(use.size(), 1u);
  EXPECT_EQ(use[0].bytes[kHostToDevice], 5 * kMiB);
  EXPECT_EQ(use[0].waits[kHostToDevice].counts[0], 1u) << "no wait for its first grant";
}

TEST(CopyArbiterTest, ALentGrantIsTakenBackBeforeAnotherIsGranted) {
  CopyArbiter::Options o = OneInFlight();
  o.start_thread = false;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status();
  Tenant be(**arbiter, 1, kBe);
  Tenant ls(**arbiter, 2, kLs);
  (*arbiter)->PollOnce();
  EXPECT_TRUE(ls.Lent()) << "one slot: LS tenants first";
  EXPECT_FALSE(be.Lent());
  be.Post(2 * kMiB, 0, /*arrived=*/true);
  (*arbiter)->PollOnce();
  EXPECT_FALSE(ls.Lent()) << "taken back";
  EXPECT_TRUE(be.Go(0));
  EXPECT_FALSE(ls.PostStarted(2 * kMiB, 0)) << "nothing to take any more";
}

TEST(CopyArbiterTest, AGrantTakenJustBeforeItWasTakenBackKeepsItsSlotUntilItsRequest) {
  CopyArbiter::Options o = OneInFlight();
  o.start_thread = false;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status();
  Tenant a(**arbiter, 1, kBe);
  Tenant b(**arbiter, 2, kBe);
  (*arbiter)->PollOnce();
  ASSERT_TRUE(a.Lent());
  // `a` takes it; its request is not posted yet when `b`'s copy arrives.
  ASSERT_EQ(a.region().ring[kHostToDevice].head_start.exchange(0), 1u);
  b.Post(2 * kMiB, 0, /*arrived=*/true);
  (*arbiter)->PollOnce();
  EXPECT_FALSE(b.Go(0)) << "a's chunk may be on the link: its slot is kept";
  a.PostMarked(2 * kMiB, 5);
  (*arbiter)->PollOnce();
  EXPECT_FALSE(b.Go(0)) << "a's chunk is in flight";
  EXPECT_EQ(a.region().closed.load(), 0u) << "a's mark was good";
  a.gates().done[5] = copych::kDoneCopied;
  (*arbiter)->PollOnce();
  EXPECT_TRUE(b.Go(0));
}

TEST(CopyArbiterTest, AMarkWithoutATakenGrantDropsTheChannel) {
  CopyArbiter::Options o = OneInFlight();
  o.start_thread = false;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status();
  Tenant never(**arbiter, 1, kBe);
  never.PostMarked(2 * kMiB, 0);  // nothing was lent yet
  (*arbiter)->PollOnce();
  EXPECT_EQ(never.region().closed.load(), 1u);

  Tenant untaken(**arbiter, 2, kBe);
  (*arbiter)->PollOnce();
  ASSERT_TRUE(untaken.Lent());
  untaken.PostMarked(2 * kMiB, 0);  // lent, but the word still says so: not taken
  (*arbiter)->PollOnce();
  EXPECT_EQ(untaken.region().closed.load(), 1u);

  Tenant twice(**arbiter, 3, kBe);
  (*arbiter)->PollOnce();
  ASSERT_TRUE(twice.PostStarted(2 * kMiB, 0));
  twice.PostMarked(2 * kMiB, 1);  // one lent grant, two marked requests
  (*arbiter)->PollOnce();
  EXPECT_EQ(twice.region().closed.load(), 1u);

  Tenant odd(**arbiter, 4, kBe);
  (*arbiter)->PollOnce();
  ASSERT_TRUE(odd.Lent());
  ASSERT_EQ(odd.region().ring[kHostToDevice].head_start.exchange(0), 1u);
  odd.region().ring[kHostToDevice].requests[0] = {2 * kMiB, 2 * kMiB, 0, 6};  // unknown flags
  odd.region().ring[kHostToDevice].request_head.store(1);
  (*arbiter)->PollOnce();
  EXPECT_EQ(odd.region().closed.load(), 1u);
}

TEST(CopyArbiterTest, AGrantTakenAndNeverUsedIsWrittenOffAndNotLentAgain) {
  CopyArbiter::Options o = OneInFlight();
  o.scheduler.max_inflight_chunks_total = 2;
  auto arbiter = CopyArbiter::Create(o);
  ASSERT_TRUE(arbiter.ok()) << arbiter.status();
  Tenant hog(**arbiter, 1, kBe);
  Tenant other(**arbiter, 2, kBe);
  ASSERT_TRUE(Eventually([&] { return hog.Lent() && other.Lent(); }));
  ASSERT_EQ(hog.region().ring[kHostToDevice].head_start.exchange(0), 1u);
  // `other` copies: its lent grant is taken back, `hog`'s found taken keeps one slot, and
  // `other` goes in the other.
  other.Post(2 * kMiB, 0, /*arrived=*/true);
  ASSERT_TRUE(Eventually([&] { return other.Go(0); }));
  other.gates().done[0] = copych::kDoneCopied;
  ASSERT_TRUE(Eventually([&] { return other.gates().done[0].load() == copych::kDoneCounted; }));
  // Idle again, but nothing is lent while `hog`'s taken grant may still bring its copy.
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  EXPECT_FALSE(other.Lent());
  // Its grant's timeout (500 ms) writes it off: `other` is lent again, `hog` never.
  ASSERT_TRUE(Eventually([&] { return other.Lent(); }, 3000));
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  EXPECT_FALSE(hog.Lent()) << "it kept one and never used it";
}

}  // namespace
}  // namespace missile::daemon
