// The pacer in process, against the daemon's own pacing domain: the test is missiled (a
// PacingDomain), the GPU (a RecordingDriver), and the other tenants of the GPU, honest or not
// (their lanes pages, written directly). What is checked is what a BE tenant's shim does with
// what its peers write: an LS that is busy holds it (up to the policy's bounds), an LS that
// lies about the time, left the GPU, or never sealed its page does not.
#include "pacer.h"

#include <sys/mman.h>
#include <unistd.h>

#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pacer_test_support.h"
#include "pacing_domain.h"
#include "spdlog/sinks/null_sink.h"
#include "testing/recording_driver.h"

namespace missile::shim {
namespace {

using daemon::PacingDomain;
using daemon::PacingSettings;
using ::missile::shim::testing::RecordingDriver;

constexpr uint64_t kLsSession = 1;
constexpr uint64_t kBeSession = 2;
constexpr uint64_t kMs = 1'000'000;

class PacerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    PacingSettings s;
    s.max_hold_ns = 60 * kMs;  // an LS that stays busy holds a BE item this long, no longer
    s.ls_stale_ns = 10'000 * kMs;
    s.ls_idle_ns = 0;
    auto d = PacingDomain::Create(s);
    ASSERT_TRUE(d.ok()) << d.status();
    domain_ = std::move(*d);
    // The GPU is idle: a completion write lands when it is enqueued.
    driver_.set_run_stream_writes(true);
  }

  // Another tenant's page as its shim (or a liar) would write it, into `page`; sealed unless
  // `seal` is false, then published.
  void JoinPage(uint64_t session, uint32_t pid, TenantClass cls, bool seal, shm::ShmRegion* page) {
    auto fds = domain_->Join(session, pid, cls, 1);
    ASSERT_TRUE(fds.ok());
    close(fds->directory);
    auto lanes = shm::ShmRegion::Attach(fds->lanes, sizeof(pacingreg::LanesPage),
                                        shm::Access::kReadWrite);
    ASSERT_TRUE(lanes.ok());
    *page = *std::move(lanes);
    pacingreg::InitLanes(static_cast<pacingreg::LanesPage*>(page->data()));
    if (seal) {
      ASSERT_TRUE(page->SealWrites().ok());
    }
    domain_->PublishSealed();
  }
  // The LS tenant's page; sealed unless `seal` is false.
  void JoinLs(bool seal = true) {
    JoinPage(kLsSession, 100, TenantClass::kLatencySensitive, seal, &ls_);
  }
  pacingreg::LanesPage* ls() { return static_cast<pacingreg::LanesPage*>(ls_.data()); }
  void LsBusy(uint64_t last_submit_ns) {
    ls()->lanes_used.store(1);
    ls()->lanes[0].submitted.store(7);
    ls()->lanes[0].completed.store(6);
    ls()->last_submit_ns.store(last_submit_ns);
  }

  // A tenant's pacer, as its shim opens it (unpublished until PublishSealed).
  void OpenPacer(uint64_t session, int pid, TenantClass cls, std::unique_ptr<Pacer>* out) {
    auto p = testing::OpenPacerIn(domain_.get(), session, pid, cls, driver_, log_.get());
    ASSERT_TRUE(p.ok()) << p.status();
    *out = std::move(*p);
  }
  void OpenBe() {
    ASSERT_NO_FATAL_FAILURE(OpenPacer(kBeSession, 200, TenantClass::kBestEffort, &be_));
    domain_->PublishSealed();
  }

  // A new domain whose BE window holds 2 items (and room for any work), on a GPU that completes
  // nothing of the BE: the third item waits for the window unless a budget widens it. The
  // tenants join it afresh. False if it could not be made.
  bool RestartWithATwoItemWindow() {
    PacingSettings s;
    s.window_items = 2;
    s.window_ns = 1000 * kMs;
    s.unknown_ns = 1000;
    s.ls_idle_ns = 0;
    auto d = PacingDomain::Create(s);
    EXPECT_TRUE(d.ok()) << d.status();
    if (!d.ok()) return false;
    be_.reset();
    domain_ = std::move(*d);
    driver_.set_run_stream_writes(false);
    return true;
  }

  // A new domain whose window is 100 ms and whose guess for an item never seen is `unknown_ns`:
  // 50 ms (long enough that a loaded machine's delays do not make short items look long) makes
  // such an item long (reported by itself). The LS and the BE join it.
  void RestartWithLongUnseenItems(uint64_t unknown_ns = 50 * kMs) {
    PacingSettings s;
    s.window_ns = 100 * kMs;
    s.unknown_ns = unknown_ns;
    s.ls_idle_ns = 0;
    auto d = PacingDomain::Create(s);
    ASSERT_TRUE(d.ok()) << d.status();
    be_.reset();
    domain_ = std::move(*d);
    JoinLs();
    OpenBe();
  }
  // The values of the completion writes the BE enqueued since the driver's calls were cleared.
  std::vector<std::string> WrittenValues() { return testing::WrittenValues(driver_); }

  // Milliseconds one BE work item waited in Begin.
  double HeldMs() {
    const auto t0 = std::chrono::steady_clock::now();
    Pacer::Ticket t = be_->Begin(nullptr, false, 1);
    const auto t1 = std::chrono::steady_clock::now();
    be_->End(t, CUDA_SUCCESS);
    return std::chrono::duration<double, std::milli>(t1 - t0).count();
  }

  RecordingDriver driver_;
  std::shared_ptr<spdlog::logger> log_ =
      std::make_shared<spdlog::logger>("pacer_test", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::unique_ptr<PacingDomain> domain_;
  shm::ShmRegion ls_;
  std::unique_ptr<Pacer> be_;
};

TEST_F(PacerTest, ABusyLsHoldsTheBeUpToMaxHold) {
  JoinLs();
  OpenBe();
  ASSERT_TRUE(be_->Paces());
  ASSERT_TRUE(be_->best_effort());
  LsBusy(pacingreg::NowNs());
  const double held = HeldMs();
  EXPECT_GE(held, 50.0);
  EXPECT_LT(held, 5000.0);
  EXPECT_EQ(be_->held(), 1u);
  EXPECT_GT(be_->held_by_ns(pacing::Verdict::kWaitLs), 0u);
  // The hold is in the BE's own page, where the daemon reads it.
  EXPECT_GE(domain_->Stats(kBeSession)->held_ns, 50 * kMs);
  // Idle LS: no hold.
  ls()->lanes[0].completed.store(7);
  EXPECT_LT(HeldMs(), 50.0);
}

// The audit's lie: a submission time in the future counted as busy for as long as the liar
// liked (now < last), so a BE was held without bound.
TEST_F(PacerTest, AnLsMarkInTheFutureHoldsNobody) {
  JoinLs();
  OpenBe();
  LsBusy(UINT64_MAX);
  EXPECT_LT(HeldMs(), 50.0);
  LsBusy(pacingreg::NowNs() + 3'600'000 * kMs);  // an hour ahead
  EXPECT_LT(HeldMs(), 50.0);
  EXPECT_EQ(be_->held(), 0u);
}

// A page its tenant did not seal is not published: nobody can be told anything through it.
TEST_F(PacerTest, AnUnsealedLsPageIsNotRead) {
  JoinLs(/*seal=*/false);
  OpenBe();
  LsBusy(pacingreg::NowNs());
  EXPECT_LT(HeldMs(), 50.0);
  // Sealed late, it counts from then on.
  ASSERT_TRUE(ls_.SealWrites().ok());
  domain_->PublishSealed();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the refresh interval
  LsBusy(pacingreg::NowNs());
  EXPECT_GE(HeldMs(), 50.0);
}

// An LS whose session ended holds nobody, even though its process (here, the test) still has
// its page and keeps writing "busy" into it; an LS that joins later is seen.
TEST_F(PacerTest, AnLsThatLeftIsForgottenAndANewOneIsSeen) {
  JoinLs();
  OpenBe();
  LsBusy(pacingreg::NowNs());
  EXPECT_GE(HeldMs(), 50.0);
  domain_->Leave(kLsSession);
  LsBusy(pacingreg::NowNs());
  EXPECT_LT(HeldMs(), 50.0);
  // A new LS session in the same slot, with a page of its own.
  JoinLs();
  std::this_thread::sleep_for(std::chrono::milliseconds(2));  // past the refresh interval
  LsBusy(pacingreg::NowNs());
  EXPECT_GE(HeldMs(), 50.0);
}

// A BE item predicted to run a quarter of the window or more (here: one never seen, 50 ms of a
// 100 ms window: long enough that a loaded machine's delays do not make short items look long)
// is reported by itself: its lane's earlier items get their completion write before it is
// submitted, and it gets one right after. Short items share one every 4th.
TEST_F(PacerTest, ALongBeItemIsReportedByItself) {
  ASSERT_NO_FATAL_FAILURE(RestartWithLongUnseenItems());
  ASSERT_TRUE(be_->Paces());
  uint64_t seq = 0;  // the lane's items so far
  auto item = [&](uint64_t key) {
    Pacer::Ticket t = be_->Begin(nullptr, false, key);
    be_->End(t, CUDA_SUCCESS);
    ++seq;
  };
  // Until key 5 is learned: each item is timed by a synchronising call's return, which no
  // slow machine makes late (a check at the next launch is late by the launch's own time).
  for (int i = 0; i < 1000 && !be_->Learned(5).has_value(); ++i) {
    item(5);
    be_->BeforeSync();
    be_->AfterSync();
  }
  ASSERT_TRUE(be_->Learned(5).has_value());
  ASSERT_LT(*be_->Learned(5) * 4, be_->window_ns());
  be_->BeforeSync();  // every item so far written
  driver_.ClearCalls();
  for (int i = 0; i < 5; ++i) item(5);  // short: written once 4 have no write
  const std::vector<std::string> expected{std::to_string(seq - 1), std::to_string(seq),
                                          std::to_string(seq + 1)};
  item(9);  // never seen: the 5th short one is written before it, and it right after
  EXPECT_EQ(WrittenValues(), expected);
}

// "Long" is measured against the window in force: an item never seen (predicted 50 ms) is long
// against a 100 ms window, not against the 400 ms that an LS budget's scale of 4 makes of it,
// and nothing is long once the LS released the BE. Items that are not long get a completion
// write only once a quarter of the window's items in force have none (8 at a scale of 4).
TEST_F(PacerTest, AWidenedWindowHasFewerLongItems) {
  ASSERT_NO_FATAL_FAILURE(RestartWithLongUnseenItems());
  ls()->lanes_used.store(1);
  ls()->last_submit_ns.store(pacingreg::NowNs());  // on the GPU, idle
  uint64_t key = 100;  // each item never seen before
  auto writes_for_four_items = [&] {
    driver_.ClearCalls();
    for (int i = 0; i < 4; ++i) {
      Pacer::Ticket t = be_->Begin(nullptr, false, ++key);
      be_->End(t, CUDA_SUCCESS);
    }
    return WrittenValues().size();
  };
  EXPECT_EQ(writes_for_four_items(), 4u);  // each one long: written right after it
  domain_->SetBeShareForTesting(kLsSession, pacing::kMaxSharePpm, 4);
  EXPECT_EQ(writes_for_four_items(), 0u);
  domain_->SetBeShareForTesting(kLsSession, pacing::kUnheldSharePpm, pacing::kMaxWindowScale);
  EXPECT_EQ(writes_for_four_items(), 0u);
}

// A BE lane asks the GPU to report its items done (a stream write that costs the BE GPU time)
// every quarter of the window's items in force: every 4th at the default 8 items, every 32nd at
// x16, every 256th once released by the LS's budget.
TEST_F(PacerTest, AWidenedWindowWritesItsCompletionsLessOften) {
  ASSERT_NO_FATAL_FAILURE(RestartWithLongUnseenItems(/*unknown_ns=*/1000));  // none long
  ls()->lanes_used.store(1);
  ls()->last_submit_ns.store(pacingreg::NowNs());  // on the GPU, idle
  uint64_t key = 100;
  auto writes_for = [&](int items) {
    be_->BeforeSync();  // every lane written: each count starts afresh
    driver_.ClearCalls();
    for (int i = 0; i < items; ++i) {
      Pacer::Ticket t = be_->Begin(nullptr, false, ++key);
      be_->End(t, CUDA_SUCCESS);
    }
    return WrittenValues().size();
  };
  EXPECT_EQ(writes_for(512), 128u);
  domain_->SetBeShareForTesting(kLsSession, pacing::kMaxSharePpm, 16);
  EXPECT_EQ(writes_for(512), 16u);
  domain_->SetBeShareForTesting(kLsSession, pacing::kUnheldSharePpm, pacing::kMaxWindowScale);
  EXPECT_EQ(writes_for(512), 2u);
  // What a sync waits for is still reported.
  driver_.ClearCalls();
  be_->BeforeSync();
  EXPECT_EQ(WrittenValues().size(), 0u);  // 512 items, the last one written
  writes_for(3);
  driver_.ClearCalls();
  be_->BeforeSync();
  EXPECT_EQ(WrittenValues().size(), 1u);
}

// A thread's per-thread default stream has no handle in another thread (the per-thread handle
// is the caller's own): its thread writes each item's completion itself, and another thread's
// flush writes nothing on its own stream for it, where the write would not wait for its items.
TEST_F(PacerTest, PerThreadStreamsAreWrittenOnlyByTheirThread) {
  ASSERT_NO_FATAL_FAILURE(RestartWithLongUnseenItems(/*unknown_ns=*/1000));  // none long
  ls()->lanes_used.store(1);
  ls()->last_submit_ns.store(pacingreg::NowNs());
  std::mutex mu;
  std::condition_variable cv;
  int step = 0;
  auto wait_for = [&](int s) {
    std::unique_lock<std::mutex> lock(mu);
    cv.wait(lock, [&] { return step >= s; });
  };
  auto go = [&](int s) {
    {
      std::lock_guard<std::mutex> lock(mu);
      step = s;
    }
    cv.notify_all();
  };
  driver_.ClearCalls();
  std::thread other([&] {
    for (int i = 0; i < 2; ++i) {
      Pacer::Ticket t = be_->Begin(nullptr, /*ptsz=*/true, 7);
      be_->End(t, CUDA_SUCCESS);
    }
    go(1);
    wait_for(2);
  });
  wait_for(1);
  EXPECT_EQ(WrittenValues(), (std::vector<std::string>{"1", "2"}));  // each one, by its thread
  driver_.ClearCalls();
  be_->BeforeSync();
  EXPECT_TRUE(WrittenValues().empty());
  // An explicit stream's items wait for every 4th, or for a flush from any thread.
  std::thread explicit_stream([&] {
    Pacer::Ticket t = be_->Begin(reinterpret_cast<CUstream>(0x5000), false, 7);
    be_->End(t, CUDA_SUCCESS);
  });
  explicit_stream.join();
  EXPECT_TRUE(WrittenValues().empty());
  be_->BeforeSync();
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"1"});
  go(2);
  other.join();
}

// With more busy streams than lanes, two streams share a lane: the stream that takes it over
// gets the other one's unwritten items written on that other stream first (a write on its own
// would not wait for them).
TEST_F(PacerTest, ALaneTakenOverByAnotherStreamIsWrittenOnItsOldStreamFirst) {
  ASSERT_NO_FATAL_FAILURE(RestartWithLongUnseenItems(/*unknown_ns=*/1000));  // none long
  ls()->lanes_used.store(1);
  ls()->last_submit_ns.store(pacingreg::NowNs());
  driver_.set_run_stream_writes(false);  // nothing completes: every lane stays busy
  // Released by the LS's budget: no window fills and flushes every lane.
  domain_->SetBeShareForTesting(kLsSession, pacing::kUnheldSharePpm, pacing::kMaxWindowScale);
  driver_.ClearCalls();
  auto item = [&](uintptr_t s) {
    Pacer::Ticket t = be_->Begin(reinterpret_cast<CUstream>(s), false, 7);
    be_->End(t, CUDA_SUCCESS);
  };
  for (uint32_t i = 0; i < pacingreg::kLanes; ++i) item(0x1000 + i);
  EXPECT_TRUE(WrittenValues().empty());  // one item per lane: none written yet
  item(0x1000 + pacingreg::kLanes);
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"1"});
}

// Another BE tenant that submits work after one of this tenant's items started may have taken
// the GPU's time slice from it: the item's time is not its own and teaches nothing. The same
// item with the other tenant active but submitting nothing new is learned.
TEST_F(PacerTest, AnItemAnotherBeSubmittedBesideTeachesNothing) {
  constexpr uint64_t kPeer = 3;
  OpenBe();
  shm::ShmRegion page;
  JoinPage(kPeer, 300, TenantClass::kBestEffort, /*seal=*/true, &page);
  ASSERT_NE(page.data(), nullptr);
  auto* peer = static_cast<pacingreg::LanesPage*>(page.data());
  peer->lanes_used.store(1);  // nothing in flight: it never holds this one as running
  peer->active.store(1);
  uint64_t peer_gpu_ns = 1000 * kMs;  // always ahead: the share never holds this one
  auto item = [&](uint64_t key, bool peer_beside) {
    peer_gpu_ns += 10 * kMs;
    peer->gpu_ns.store(peer_gpu_ns);
    Pacer::Ticket t = be_->Begin(nullptr, false, key);
    if (peer_beside) peer->last_submit_ns.store(pacingreg::NowNs());
    be_->End(t, CUDA_SUCCESS);
    // Timed by a synchronising call's return: the sample is on time however slow the machine
    // (a check at the next launch, late by that launch's own time, may drop it either way).
    be_->BeforeSync();
    be_->AfterSync();
  };
  for (int i = 0; i < 300; ++i) item(7, /*peer_beside=*/true);
  EXPECT_FALSE(be_->Learned(7).has_value());
  for (int i = 0; i < 1000 && !be_->Learned(7).has_value(); ++i) item(7, false);
  EXPECT_TRUE(be_->Learned(7).has_value());
}

// An LS latency budget, the BE's side: while the LS is busy, the BE's items go as the LS's
// published share of its busy time allows, each taking its predicted duration (50 us, the
// policy's unknown_us: items in flight beside an LS teach the predictor nothing).
TEST_F(PacerTest, ABusyLsWithABudgetLetsTheBeUseItsShare) {
  JoinLs();
  OpenBe();
  auto items_in = [this](std::chrono::milliseconds span) {
    int n = 0;
    const auto end = std::chrono::steady_clock::now() + span;
    while (std::chrono::steady_clock::now() < end) {
      LsBusy(pacingreg::NowNs());
      Pacer::Ticket t = be_->Begin(nullptr, false, 1);
      be_->End(t, CUDA_SUCCESS);
      ++n;
    }
    return n;
  };
  // No share: the LS holds the BE (up to max_hold, 60 ms here: a few items in 200 ms).
  EXPECT_LE(items_in(std::chrono::milliseconds(200)), 5);
  // A quarter of the busy time: about 200 ms / 4 / 50 us = 1000 items, never much more (the
  // credit is capped at one window, 100 us); fewer when this thread is short of CPU.
  domain_->SetBeShareForTesting(kLsSession, 250'000);
  const int n = items_in(std::chrono::milliseconds(200));
  EXPECT_GE(n, 100);
  EXPECT_LE(n, 1100);
  EXPECT_GT(be_->held_by_ns(pacing::Verdict::kWaitLs), 0u);  // and waits between them
  // The budget's last step: the busy LS holds nothing.
  domain_->SetBeShareForTesting(kLsSession, pacing::kUnheldSharePpm);
  const uint64_t held_before = be_->held_by_ns(pacing::Verdict::kWaitLs);
  EXPECT_GT(items_in(std::chrono::milliseconds(50)), 100);
  EXPECT_EQ(be_->held_by_ns(pacing::Verdict::kWaitLs), held_before);
}

// Past its largest share, a budget widens the BE's in-flight window: with the LS's published
// scale at 4, four times the items go before the window holds one (the GPU completes none here).
TEST_F(PacerTest, AnLsBudgetsWindowScaleWidensTheBesWindow) {
  auto items_before_a_hold = [this](uint32_t scale) {
    if (!RestartWithATwoItemWindow()) return -1;
    JoinLs();
    OpenBe();
    ls()->lanes_used.store(1);
    ls()->last_submit_ns.store(pacingreg::NowNs());  // on the GPU, idle
    domain_->SetBeShareForTesting(kLsSession, 0, scale);
    for (int n = 0; n < 512; ++n) {
      // Held by the window until its oldest item has stalled (100 ms).
      if (HeldMs() > 50.0) return n;
    }
    return 512;
  };
  EXPECT_EQ(items_before_a_hold(1), 2);
  EXPECT_EQ(items_before_a_hold(4), 8);
  EXPECT_GT(be_->held_by_ns(pacing::Verdict::kWaitWindow), 0u);
  // A scale past the largest is the largest (128: 256 items).
  EXPECT_EQ(items_before_a_hold(1000), 256);
}

// Two LS tenants with different budgets: a BE obeys the strictest of those busy, so an LS whose
// budget lets the BE go (or one that marks itself busy all the time) cannot let it run beside
// another LS whose budget holds it, nor widen its window beyond the other's, busy or not.
TEST_F(PacerTest, TheStrictestBusyLsBudgetHoldsTheBe) {
  constexpr uint64_t kLaxSession = 3;
  JoinLs();
  shm::ShmRegion lax_page;
  JoinPage(kLaxSession, 300, TenantClass::kLatencySensitive, true, &lax_page);
  auto* lax = static_cast<pacingreg::LanesPage*>(lax_page.data());
  OpenBe();
  domain_->SetBeShareForTesting(kLaxSession, pacing::kUnheldSharePpm, pacing::kMaxWindowScale);
  domain_->SetBeShareForTesting(kLsSession, 0, 1);
  auto busy = [](pacingreg::LanesPage* page) {
    page->lanes_used.store(1);
    page->lanes[0].submitted.store(7);
    page->lanes[0].completed.store(6);
    page->last_submit_ns.store(pacingreg::NowNs());
  };
  auto idle = [](pacingreg::LanesPage* page) {
    page->lanes_used.store(1);
    page->lanes[0].completed.store(page->lanes[0].submitted.load());
    page->last_submit_ns.store(pacingreg::NowNs() - 5 * kMs);
  };
  // The lax LS busy alone: its last step lets the BE go.
  busy(lax);
  idle(ls());
  EXPECT_LT(HeldMs(), 20.0);
  EXPECT_EQ(be_->held_by_ns(pacing::Verdict::kWaitLs), 0u);
  // Both busy: the strict one's share (none) holds it, up to max_hold.
  busy(lax);
  busy(ls());
  EXPECT_GE(HeldMs(), 50.0);
  EXPECT_GT(be_->held_by_ns(pacing::Verdict::kWaitLs), 0u);
  // The strict one busy alone holds it just the same.
  idle(lax);
  busy(ls());
  EXPECT_GE(HeldMs(), 50.0);

  // The window bounds what an LS that becomes busy finds ahead of it: the strict LS's scale
  // keeps it at 2 items (a window of 2 items, with room for any work, on a GPU that completes
  // nothing of the BE) even while it is idle and the lax one is busy at the widest window.
  auto items_before_a_hold = [&](uint32_t strict_share) {
    if (!RestartWithATwoItemWindow()) return -1;
    JoinLs();
    JoinPage(kLaxSession, 300, TenantClass::kLatencySensitive, true, &lax_page);
    lax = static_cast<pacingreg::LanesPage*>(lax_page.data());
    OpenBe();
    domain_->SetBeShareForTesting(kLaxSession, pacing::kUnheldSharePpm, pacing::kMaxWindowScale);
    const uint32_t strict_scale =
        strict_share == pacing::kUnheldSharePpm ? pacing::kMaxWindowScale : 1;
    domain_->SetBeShareForTesting(kLsSession, strict_share, strict_scale);
    for (int n = 0; n < 512; ++n) {
      busy(lax);
      idle(ls());
      if (HeldMs() > 50.0) return n;  // held by the window until its oldest item stalls
    }
    return 512;
  };
  EXPECT_EQ(items_before_a_hold(0), 2);
  EXPECT_FALSE(be_->ReleasedByLs());
  // Once both have taken their last step, nothing paces the BE: no window at all.
  EXPECT_EQ(items_before_a_hold(pacing::kUnheldSharePpm), 512);
  EXPECT_TRUE(be_->ReleasedByLs());
  EXPECT_EQ(be_->held_by_ns(pacing::Verdict::kWaitWindow), 0u);
}

// Released means every LS tenant: one that leaves its last step (over its budget, the
// controller steps back) puts the window back at once, and a BE with no LS tenant beside it
// is released by nobody.
TEST_F(PacerTest, OneLsBackFromItsLastStepPutsTheWindowBack) {
  ASSERT_TRUE(RestartWithATwoItemWindow());
  OpenBe();
  EXPECT_FALSE(be_->ReleasedByLs());
  JoinLs();
  ls()->lanes_used.store(1);
  ls()->last_submit_ns.store(pacingreg::NowNs());  // on the GPU, idle
  domain_->SetBeShareForTesting(kLsSession, pacing::kUnheldSharePpm, pacing::kMaxWindowScale);
  ASSERT_TRUE(be_->ReleasedByLs());
  for (int n = 0; n < 300; ++n) ASSERT_LT(HeldMs(), 50.0) << n;
  // Back to the widest window: 300 items in flight are past its 256, so the next one waits.
  domain_->SetBeShareForTesting(kLsSession, pacing::kMaxSharePpm, pacing::kMaxWindowScale);
  EXPECT_FALSE(be_->ReleasedByLs());
  EXPECT_GE(HeldMs(), 50.0);
  EXPECT_GT(be_->held_by_ns(pacing::Verdict::kWaitWindow), 0u);
}

// While missiled relearns the LS tenants' alone durations, nothing of the BE goes, LS idle or
// not; a quiet time too far ahead (a stale or wrong word) is not obeyed.
TEST_F(PacerTest, AQuietTimeHoldsTheBeEvenWithTheLsIdle) {
  JoinLs();
  OpenBe();
  ls()->lanes_used.store(1);
  ls()->last_submit_ns.store(pacingreg::NowNs());  // an LS on the GPU, idle
  EXPECT_LT(HeldMs(), 20.0);
  domain_->SetQuietUntilForTesting(pacingreg::NowNs() + 30 * kMs);
  EXPECT_GE(HeldMs(), 25.0);
  domain_->SetQuietUntilForTesting(pacingreg::NowNs() + 100'000 * kMs);
  EXPECT_LT(HeldMs(), 20.0);
}

// An LS tenant paces (marks every item) beside a BE tenant, and the GPU's one BE tenant too,
// except while missiled lets the LS rest ([compute] ls_rest_ms): nobody measures then. Beside a
// second BE tenant both are tracked (their weighted share). A rest too far ahead is not one.
TEST_F(PacerTest, AnLsMarksNothingWhileMissiledLetsItRest) {
  std::unique_ptr<Pacer> ls, be2;
  ASSERT_NO_FATAL_FAILURE(OpenPacer(4, 400, TenantClass::kLatencySensitive, &ls));
  OpenBe();  // publishes the LS's page too
  EXPECT_TRUE(ls->Paces() && be_->Paces());
  domain_->SetRestUntilForTesting(pacingreg::NowNs() + 10'000 * kMs);
  EXPECT_FALSE(ls->Paces() || be_->Paces());
  ASSERT_NO_FATAL_FAILURE(OpenPacer(5, 500, TenantClass::kBestEffort, &be2));
  domain_->PublishSealed();
  EXPECT_TRUE(be_->Paces() && be2->Paces() && !ls->Paces());
  domain_->Leave(5);
  EXPECT_FALSE(be_->Paces());
  domain_->SetRestUntilForTesting(pacingreg::NowNs() - 1);
  EXPECT_TRUE(ls->Paces() && be_->Paces());
  domain_->SetRestUntilForTesting(pacingreg::NowNs() + 100'000 * kMs);
  EXPECT_TRUE(ls->Paces() && be_->Paces());
}

TEST_F(PacerTest, TheBeCannotWriteTheDirectoryAndItsOwnPageIsSealed) {
  JoinLs();
  OpenBe();
  // Every pacing descriptor the BE holds: none can be mapped writable or resized.
  int found = 0;
  for (int fd = 0; fd < 1024; ++fd) {
    char target[256] = {};
    const std::string path = "/proc/self/fd/" + std::to_string(fd);
    if (readlink(path.c_str(), target, sizeof(target) - 1) <= 0) continue;
    if (std::string(target).rfind("/memfd:missile-pacing", 0) != 0) continue;
    ++found;
    EXPECT_EQ(mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0), MAP_FAILED)
        << target;
    EXPECT_NE(ftruncate(fd, 0), 0) << target;
  }
  // Held in this process: the daemon's directory and pages, the test's LS page, and the BE's
  // directory, own page and copy of the LS page.
  EXPECT_GE(found, 6);
}

}  // namespace
}  // namespace missile::shim
