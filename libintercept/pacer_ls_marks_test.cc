// Which items an LS tenant's shim writes the completion of (Pacer::LsMarkEvery), in process
// against the daemon's own pacing domain, beside a BE tenant, on a GPU that runs nothing (each
// write stays pending, so what was written shows only in the driver's calls).
#include <chrono>
#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "pacer.h"
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

class LsMarksTest : public ::testing::Test {
 protected:
  // A domain where the LS counts as busy `idle_ns` after its last work, with the LS's pacer and
  // a BE tenant.
  void Start(uint64_t idle_ns) {
    PacingSettings s;
    s.ls_idle_ns = idle_ns;
    s.ls_stale_ns = 10'000 * kMs;
    auto d = PacingDomain::Create(s);
    ASSERT_TRUE(d.ok()) << d.status();
    ls_pacer_.reset();
    be_.reset();
    domain_ = std::move(*d);
    driver_.set_run_stream_writes(false);
    ASSERT_NO_FATAL_FAILURE(OpenPacer(kLsSession, 100, TenantClass::kLatencySensitive, &ls_pacer_));
    ASSERT_NO_FATAL_FAILURE(OpenPacer(kBeSession, 200, TenantClass::kBestEffort, &be_));
    domain_->PublishSealed();
    ASSERT_TRUE(ls_pacer_->Paces());
    driver_.ClearCalls();
  }
  void LsItem(uintptr_t stream, bool ptsz = false, bool host_waits = false) {
    Pacer::Ticket t = ls_pacer_->Begin(reinterpret_cast<CUstream>(stream), ptsz, 7, host_waits);
    ls_pacer_->End(t, CUDA_SUCCESS);
  }
  // A tenant's pacer, as its shim opens it.
  void OpenPacer(uint64_t session, int pid, TenantClass cls, std::unique_ptr<Pacer>* out) {
    auto p = testing::OpenPacerIn(domain_.get(), session, pid, cls, driver_, log_.get());
    ASSERT_TRUE(p.ok()) << p.status();
    *out = std::move(*p);
  }
  // The values of the completion writes enqueued since the driver's calls were cleared.
  std::vector<std::string> WrittenValues() { return testing::WrittenValues(driver_); }

  RecordingDriver driver_;
  std::shared_ptr<spdlog::logger> log_ =
      std::make_shared<spdlog::logger>("pacer_test", std::make_shared<spdlog::sinks::null_sink_mt>());
  std::unique_ptr<PacingDomain> domain_;
  std::unique_ptr<Pacer> be_;
  std::unique_ptr<Pacer> ls_pacer_;
};

// A write is a driver call on the program's thread at every item it follows: an LS writes after
// every kLsMarkEvery-th item and after the last one before the program waits (a synchronising
// call or a synchronous item), which is all the BE tenants and missiled need to see its work end.
TEST_F(LsMarksTest, AnLsWritesBeforeItWaitsAndEveryFewItems) {
  ASSERT_NO_FATAL_FAILURE(Start(/*idle_ns=*/10'000 * kMs));
  for (int i = 0; i < 100; ++i) LsItem(0x5000);
  EXPECT_EQ(WrittenValues(), (std::vector<std::string>{"32", "64", "96"}));
  driver_.ClearCalls();
  ls_pacer_->BeforeSync();  // the program synchronises: its last items are written
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"100"});
  driver_.ClearCalls();
  ls_pacer_->BeforeSync();  // nothing new: nothing to write
  EXPECT_TRUE(WrittenValues().empty());
  LsItem(0x5000);
  LsItem(0x5000, false, /*host_waits=*/true);  // a synchronous copy: the program waited for it
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"102"});
  // A per-thread default stream: after every item (only its thread can write on it, and the
  // thread may end without synchronising).
  driver_.ClearCalls();
  LsItem(0, /*ptsz=*/true);
  LsItem(0, /*ptsz=*/true);
  EXPECT_EQ(WrittenValues(), (std::vector<std::string>{"1", "2"}));
  EXPECT_FALSE(ls_pacer_->marks_every_ls_item());
}

// An LS that polls for its work (cuStreamQuery, cuEventQuery) instead of waiting has its last
// items written at its first poll after them; the polls after that write nothing.
TEST_F(LsMarksTest, AnLsThatPollsHasItsItemsWrittenAtTheFirstPoll) {
  ASSERT_NO_FATAL_FAILURE(Start(/*idle_ns=*/10'000 * kMs));
  EXPECT_FALSE(Pacer::AnyLsUnwritten());
  for (int i = 0; i < 5; ++i) LsItem(0x5000);
  LsItem(0x6000);
  EXPECT_TRUE(WrittenValues().empty());
  EXPECT_TRUE(Pacer::AnyLsUnwritten());  // the hook looks further only now
  ls_pacer_->BeforeQuery();
  EXPECT_EQ(WrittenValues(), (std::vector<std::string>{"5", "1"}));
  EXPECT_FALSE(Pacer::AnyLsUnwritten());
  driver_.ClearCalls();
  for (int i = 0; i < 3; ++i) ls_pacer_->BeforeQuery();
  EXPECT_TRUE(WrittenValues().empty());
  LsItem(0x5000);
  ls_pacer_->BeforeQuery();
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"6"});
  // A wait in between leaves the poll nothing to write.
  driver_.ClearCalls();
  LsItem(0x5000);
  ls_pacer_->BeforeSync();
  EXPECT_FALSE(Pacer::AnyLsUnwritten());
  ls_pacer_->BeforeQuery();
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"7"});
  // A pacer that goes with items unwritten leaves no count behind.
  LsItem(0x5000);
  EXPECT_TRUE(Pacer::AnyLsUnwritten());
  ls_pacer_.reset();
  EXPECT_FALSE(Pacer::AnyLsUnwritten());
}

// MISSILE_LS_MARKS=every (an LS that waits in ways the shim cannot see): after every item.
TEST_F(LsMarksTest, AnLsToldToMarkEveryItemDoes) {
  ASSERT_NO_FATAL_FAILURE(Start(/*idle_ns=*/10'000 * kMs));
  ls_pacer_->MarkEveryLsItem();
  for (int i = 0; i < 3; ++i) LsItem(0x5000);
  EXPECT_EQ(WrittenValues(), (std::vector<std::string>{"1", "2", "3"}));
}

// An LS that let its unwritten items go idle longer than missiled waits to end a busy period
// (it waits by polling, or on another process) looked busy to the BE tenants all that time: its
// next item writes those first, and every item is written for a while (10 s outside the test).
TEST_F(LsMarksTest, AnLsWhoseWorkWentIdleUnseenWritesEveryItemForAWhile) {
  ASSERT_NO_FATAL_FAILURE(Start(/*idle_ns=*/2 * kMs));
  ls_pacer_->SetEveryItemAfterIdleForTesting(200 * kMs);
  LsItem(0x5000);
  LsItem(0x5000);
  EXPECT_TRUE(WrittenValues().empty());
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  LsItem(0x5000);
  EXPECT_EQ(WrittenValues(), (std::vector<std::string>{"2", "3"}));
  EXPECT_TRUE(ls_pacer_->marks_every_ls_item());
  LsItem(0x6000);
  EXPECT_EQ(WrittenValues(), (std::vector<std::string>{"2", "3", "1"}));
  std::this_thread::sleep_for(std::chrono::milliseconds(250));
  EXPECT_FALSE(ls_pacer_->marks_every_ls_item());
  driver_.ClearCalls();
  LsItem(0x5000);  // its lane was written: no sign of an unseen idle
  EXPECT_TRUE(WrittenValues().empty());
  // A lane written before the gap is no sign of it: a program that synchronised is left alone.
  ASSERT_NO_FATAL_FAILURE(Start(/*idle_ns=*/2 * kMs));
  LsItem(0x5000);
  ls_pacer_->BeforeSync();
  std::this_thread::sleep_for(std::chrono::milliseconds(10));
  LsItem(0x5000);
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"1"});
  EXPECT_FALSE(ls_pacer_->marks_every_ls_item());
}

// A thread that synchronises while another thread is between Begin and End on a lane: that
// lane's write comes at the other thread's End, not at its next kLsMarkEvery-th item.
TEST_F(LsMarksTest, ASyncWhileAnotherThreadHoldsALaneGetsItWrittenAtItsEnd) {
  ASSERT_NO_FATAL_FAILURE(Start(/*idle_ns=*/10'000 * kMs));
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
  std::thread launcher([&] {
    Pacer::Ticket t = ls_pacer_->Begin(reinterpret_cast<CUstream>(0x5000), false, 7);
    go(1);
    wait_for(2);
    ls_pacer_->End(t, CUDA_SUCCESS);
  });
  wait_for(1);
  ls_pacer_->BeforeSync();  // the lane is held: nothing written here
  EXPECT_TRUE(WrittenValues().empty());
  go(2);
  launcher.join();
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"1"});
  // Served once: the next item waits for its cadence again.
  LsItem(0x5000);
  EXPECT_EQ(WrittenValues(), std::vector<std::string>{"1"});
}

}  // namespace
}  // namespace missile::shim
