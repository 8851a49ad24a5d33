// Multi-process tests of BE pacing: the real daemon, the real shim in an LS and a BE tenant
// process (tests/programs/pace_probe), on the driver test double. The LS keeps work on the GPU
// for a known time (a memset queued behind a sleeping host function), and the test checks when
// the BE's work could run, comparing CLOCK_MONOTONIC moments the processes print.
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>
#include <utility>
#include <vector>

#include "daemon_process_fixture.h"
#include "gtest/gtest.h"
#include "subprocess.h"

namespace missile {
namespace {

using testing::Child;
using testing::TempDir;

constexpr double kMs = 1e6;  // nanoseconds

// The unsigned number after `key=` in `line`, or 0.
uint64_t Field(const std::string& line, const std::string& key) {
  size_t pos = line.find(key + "=");
  if (pos == std::string::npos) return 0;
  return std::strtoull(line.c_str() + pos + key.size() + 1, nullptr, 10);
}

uint64_t Now() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

class PacingTest : public process_test::DaemonTest {
 protected:
  PacingTest() {
    // Processes take the engine in time slices of 1 ms, as GPU contexts do.
    fake_settings_ = {{"FAKECUDA_PCIE_BYTES_PER_US", "2000"}, {"FAKECUDA_TIMESLICE_US", "1000"}};
    daemon_log_ = dir_.path() + "/missiled.log";
  }

  // [compute] keys for this test, on top of the defaults.
  void StartDaemon(const std::string& compute) {
    DaemonTest::StartDaemon("[pcie]\nbypass_below = \"4KiB\"\nchunk = \"1MiB\"\nbe_chunk = 0\n"
                            "[compute]\n" + compute + "\n");
  }

  std::map<std::string, std::string> TenantEnv(const std::string& cls,
                                               const std::string& name = "") const {
    return DaemonTest::TenantEnv(cls, name.empty() ? cls + "-probe" : name);
  }

  // Starts an LS request that stays on the GPU for `ms`; returns the moment it was marked.
  uint64_t StartLs(Child* ls, long ms, const std::string& wait = "sync") {
    EXPECT_TRUE(ls->Start({PACE_PROBE, "ls", std::to_string(ms), wait}, TenantEnv("ls")));
    const std::string marked = ls->WaitForLine("marked", 20);
    EXPECT_FALSE(marked.empty()) << ls->out();
    return Field(marked, "t");
  }

  // Starts a BE tenant and waits until it is set up (registered, memory allocated, `prior`
  // items run).
  void StartBe(Child* be, int copy_mib = 0, int prior = 0) {
    ASSERT_TRUE(be->Start({PACE_PROBE, "be", std::to_string(copy_mib), std::to_string(prior)},
                          TenantEnv("be")));
    ASSERT_FALSE(be->WaitForLine("ready", 20).empty()) << be->out();
  }

  // Lets the BE run its item and returns its result line.
  std::string RunBe(Child* be) {
    be->CloseStdin();
    std::string line = be->WaitForLine("be ", 30);
    EXPECT_EQ(be->Wait(10), 0) << be->out();
    EXPECT_EQ(Field(line, "ok"), 1u) << line;
    return line;
  }
};

// Also for an LS that polls for its work instead of waiting (its last item is written at its
// first poll, Pacer::BeforeQuery; until then the BE would wait for the 10 s stale bound).
TEST_F(PacingTest, BeWorkWaitsForTheBusyLsAndGoesRightAfter) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 10000\nls_idle_us = 1000");
  for (const std::string wait : {"sync", "stream-query", "event-query"}) {
    SCOPED_TRACE(wait);
    Child be, ls;
    StartBe(&be);
    StartLs(&ls, 400, wait);
    const std::string line = RunBe(&be);
    const std::string done = ls.WaitForLine("done", 10);
    ASSERT_FALSE(done.empty()) << ls.out();
    const uint64_t ls_done = Field(done, "t");
    const uint64_t be_end = Field(line, "t1");
    // The BE's memset could not finish before the LS's work did: it was held in the shim. The
    // LS prints `done` when its host thread wakes from its synchronize, which on a loaded machine
    // can come after the BE (released by the GPU's own completion write, 1 ms of hysteresis
    // later) has run: 50 ms of slack, against the 400 ms an unheld BE would finish early.
    EXPECT_GE(be_end + 50 * static_cast<uint64_t>(kMs), ls_done)
        << line << " / " << done << "\nBE: " << be.out();
    EXPECT_GE(static_cast<double>(be_end - Field(line, "t0")), 200 * kMs) << line;  // held
    // And it went soon after: the hysteresis is 1 ms, the rest is polling and process noise
    // (tens of ms on a loaded machine); what it must not wait for is the 10 s stale bound.
    EXPECT_LT(static_cast<double>(be_end) - static_cast<double>(ls_done), 1000 * kMs)
        << line << " / " << done;
    ls.CloseStdin();
    EXPECT_EQ(ls.Wait(10), 0);
  }
}

// The audit's attack: a tenant found its pacing region in /proc/self/fd and truncated it, and
// missiled and every tenant of the GPU died of SIGBUS; or it mapped it writable and rewrote the
// policy (max_hold 0, pacing 0) or another tenant's lanes. Here every pacing descriptor of both
// tenants is opened again through /proc, as the tenant itself could, and attacked: nothing
// changes size or takes a writable mapping, and pacing goes on.
TEST_F(PacingTest, NoTenantCanResizeOrRewriteThePacingRegions) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 10000\nls_idle_us = 1000");
  Child be, ls;
  StartBe(&be, 0, /*prior=*/2);
  StartLs(&ls, 1500);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // the BE maps the LS's page
  int attacked = 0;
  for (int pid : {be.pid(), ls.pid()}) {
    const std::string dir = "/proc/" + std::to_string(pid) + "/fd";
    for (int fd = 0; fd < 1024; ++fd) {
      const std::string path = dir + "/" + std::to_string(fd);
      char target[256] = {};
      if (readlink(path.c_str(), target, sizeof(target) - 1) <= 0) continue;
      if (std::string(target).rfind("/memfd:missile-pacing", 0) != 0) continue;
      SCOPED_TRACE(path + " -> " + target);
      ++attacked;
      const int again = open(path.c_str(), O_RDWR);
      ASSERT_GE(again, 0) << strerror(errno);
      EXPECT_NE(ftruncate(again, 0), 0) << "the region could be truncated";
      void* w = mmap(nullptr, 4096, PROT_READ | PROT_WRITE, MAP_SHARED, again, 0);
      EXPECT_EQ(w, MAP_FAILED) << "the region could be mapped writable";
      if (w != MAP_FAILED) munmap(w, 4096);
      close(again);
    }
  }
  // The directory and its own page in each tenant (the BE maps the LS's page at its next item).
  EXPECT_GE(attacked, 4);
  const std::string line = RunBe(&be);
  const std::string done = ls.WaitForLine("done", 10);
  ASSERT_FALSE(done.empty()) << ls.out();
  // As in the test above: the LS prints `done` when its host thread wakes, which on a loaded
  // machine can come after the BE, released by the GPU's completion write, has run.
  EXPECT_GE(Field(line, "t1") + 50 * static_cast<uint64_t>(kMs), Field(done, "t"))
      << "the BE was not held: " << line << " / " << done;
  EXPECT_EQ(ls.Wait(10), 0);
  std::ifstream stat("/proc/" + std::to_string(daemon_.pid()) + "/stat");
  std::string pid, comm, state;
  stat >> pid >> comm >> state;
  EXPECT_TRUE(state == "S" || state == "R") << "missiled died: state " << state;
}

TEST_F(PacingTest, BeIsNotHeldWithoutABusyLsOrWithPacingOff) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 10000");
  {
    Child be;
    StartBe(&be);
    const std::string line = RunBe(&be);
    EXPECT_LT(static_cast<double>(Field(line, "t1") - Field(line, "t0")), 200 * kMs) << line;
  }
  // The same with pacing off: a busy LS holds nothing.
  daemon_.Kill(SIGTERM);
  daemon_.Wait(10);
  StartDaemon("pacing = false\nmax_hold_ms = 0\nls_stale_ms = 10000");
  Child be, ls;
  StartBe(&be);
  const uint64_t marked = StartLs(&ls, 1500);
  const std::string line = RunBe(&be);
  EXPECT_LT(static_cast<double>(Field(line, "t1") - marked), 1000 * kMs) << line;
  ls.Wait(10);
}

TEST_F(PacingTest, AKilledLsReleasesTheBeWhenItsSessionEnds) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 600000");
  Child be, ls;
  StartBe(&be);
  StartLs(&ls, 60000);  // would hold the BE for a minute
  be.CloseStdin();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(be.out().find("be ") == std::string::npos) << "the BE was not held: " << be.out();
  const uint64_t killed = Now();
  ls.Kill(SIGKILL);
  const std::string line = be.WaitForLine("be ", 10);
  ASSERT_FALSE(line.empty()) << "the BE stayed held after the LS died: " << be.out();
  // The daemon sees the process exit (pidfd) and clears its slot.
  EXPECT_LT(static_cast<double>(Field(line, "t1") - killed), 2000 * kMs) << line;
  EXPECT_EQ(be.Wait(10), 0);
}

TEST_F(PacingTest, AStaleLsMarkHoldsTheBeNoLongerThanTheBound) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 300");
  Child be, ls;
  StartBe(&be);
  const uint64_t marked = StartLs(&ls, 5000);  // a hung LS request
  const std::string line = RunBe(&be);
  const double waited = static_cast<double>(Field(line, "t1") - marked);
  EXPECT_GE(waited, 250 * kMs) << line;
  EXPECT_LT(waited, 2500 * kMs) << line;
  ls.Kill(SIGKILL);
}

TEST_F(PacingTest, MaxHoldLetsTheBeThroughAnLsThatStaysBusy) {
  StartDaemon("max_hold_ms = 100\nls_stale_ms = 600000");
  Child be, ls;
  StartBe(&be);
  const uint64_t marked = StartLs(&ls, 5000);
  const std::string line = RunBe(&be);
  const double waited = static_cast<double>(Field(line, "t1") - marked);
  EXPECT_GE(static_cast<double>(Field(line, "t1") - Field(line, "t0")), 90 * kMs) << line;
  EXPECT_LT(waited, 2500 * kMs) << line;
  ls.Kill(SIGKILL);
}

TEST_F(PacingTest, MaxHoldCountsEarlierItemsWhoseCompletionWasNotReportedYet) {
  // A BE lane reports completion only every few items; items it ran before the LS got busy
  // must not count as in flight for ever, or max_hold would never let the BE through.
  StartDaemon("max_hold_ms = 100\nls_stale_ms = 600000");
  Child be, ls;
  StartBe(&be, 0, /*prior=*/2);
  StartLs(&ls, 5000);
  const std::string line = RunBe(&be);
  EXPECT_LT(static_cast<double>(Field(line, "t1") - Field(line, "t0")), 2000 * kMs) << line;
  ls.Kill(SIGKILL);
}

// Two BE tenants launching short kernels back to back on the test double's time-sliced engine
// get it 1:3 after missilectl gives them weights 1:3. (Counting a tenant's work as running
// until its predicted end, rather than until the GPU reports it done, gave 5.6:1 here and 22:1
// on the H200: the lighter tenant's kernels waited behind the other's time slices.)
TEST_F(PacingTest, TwoBeTenantsShareTheGpuByWeight) {
  StartDaemon("max_hold_ms = 0\nshare_slack_us = 2000");
  Child one, three;
  ASSERT_TRUE(one.Start({PACE_PROBE, "spin", "50", "5"}, TenantEnv("be", "be1")));
  ASSERT_TRUE(three.Start({PACE_PROBE, "spin", "50", "5"}, TenantEnv("be", "be3")));
  ASSERT_FALSE(one.WaitForLine("ready", 20).empty()) << one.out();
  ASSERT_FALSE(three.WaitForLine("ready", 20).empty()) << three.out();
  for (const auto& [name, weight] : {std::pair<std::string, std::string>{"be1", "1024"},
                                     {"be3", "3072"}}) {
    testing::ProcessResult r =
        testing::Run({MISSILECTL, "--socket", socket_, "set", "--name", name, "--weight", weight});
    ASSERT_EQ(r.exit_code, 0) << r.err;
  }
  one.CloseStdin();
  three.CloseStdin();
  const uint64_t k1 = Field(one.WaitForLine("spin", 30), "kernels");
  const uint64_t k3 = Field(three.WaitForLine("spin", 30), "kernels");
  ASSERT_GT(k1, 0u) << one.out();
  const double ratio = static_cast<double>(k3) / static_cast<double>(k1);
  std::printf("be1 %llu kernels, be3 %llu kernels: %.2f\n", static_cast<unsigned long long>(k1),
              static_cast<unsigned long long>(k3), ratio);
  // Without weights it is 1. The share is of accounted GPU time (1:3.00 here); kernel counts
  // follow it as far as each tenant's learned kernel duration is its own. While a tenant learned
  // from kernels that the other's, submitted after they started, delayed on the engine, it got
  // 1:3.8 to 1:4.7 (5 runs on a 2-core machine); learning only from kernels nobody submitted
  // beside gave 1:2.5 to 1:4.2, median 1:3.05 (15 runs). Later, 27 runs on the same kind of
  // machine gave 1:1.51 to 1:5.64 (the old bounds of 2.0 and 4.8 failed 4 of them, one in a
  // fresh-clone CI run), with the same spread before and after the budget's "released" change.
  // The bounds leave room for that; the 5 % target is the GPU benchmark's (pair d).
  EXPECT_GT(ratio, 1.35) << k1 << " vs " << k3;
  EXPECT_LT(ratio, 7.0) << k1 << " vs " << k3;
  EXPECT_EQ(one.Wait(10), 0);
  EXPECT_EQ(three.Wait(10), 0);
}

// A BE held again and again (an LS keeps getting busy, the window is one item) still runs its
// work in stream order across streams joined by events: every word checked.
TEST_F(PacingTest, HeldBeWorkKeepsStreamOrderAndEvents) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 10000\nwindow_items = 1");
  const std::string report = dir_.path() + "/report-order";
  auto env = TenantEnv("be");
  env["MISSILE_REPORT"] = report;
  Child be;
  ASSERT_TRUE(be.Start({PACE_PROBE, "order", "40"}, env));
  ASSERT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
  Child ls1, ls2;
  StartLs(&ls1, 150);
  be.CloseStdin();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  StartLs(&ls2, 150);  // busy again in the middle of the BE's work
  const std::string line = be.WaitForLine("order", 30);
  EXPECT_EQ(Field(line, "ok"), 1u) << be.out();
  EXPECT_EQ(be.Wait(10), 0);
  // It was held (by the LS and by its one-item window), and its work all went through the pacer.
  const std::string text = testing::ReadFile(report);
  EXPECT_NE(text.find("# pacing: "), std::string::npos) << text;
  EXPECT_EQ(text.find(" 0 held for"), std::string::npos) << text;
  std::printf("%s", text.substr(text.find("# pacing: ")).c_str());
  ls1.Wait(10);
  ls2.Wait(10);
}

// A BE tenant's CUDA graph goes to the GPU piece by piece, each piece held while the LS is busy,
// and its result is exact (launches alternate two streams, so their order matters); an LS
// tenant's graph is not split.
TEST_F(PacingTest, ABeGraphIsAdmittedPieceByPieceAndAnLsGraphWhole) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 10000");
  const std::string be_report = dir_.path() + "/report-graph-be";
  const std::string ls_report = dir_.path() + "/report-graph-ls";
  auto be_env = TenantEnv("be");
  be_env["MISSILE_REPORT"] = be_report;
  auto ls_env = TenantEnv("ls", "ls-graph");
  ls_env["MISSILE_REPORT"] = ls_report;
  Child be, ls_graph;
  ASSERT_TRUE(be.Start({PACE_PROBE, "graph", "20", "3"}, be_env));
  ASSERT_TRUE(ls_graph.Start({PACE_PROBE, "graph", "5", "2"}, ls_env));
  ASSERT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
  ASSERT_FALSE(ls_graph.WaitForLine("ready", 20).empty()) << ls_graph.out();
  Child ls;
  StartLs(&ls, 150);
  be.CloseStdin();
  const std::string line = be.WaitForLine("graph ", 30);
  EXPECT_EQ(Field(line, "ok"), 1u) << be.out();
  EXPECT_EQ(Field(line, "b0"), 60u) << line;
  EXPECT_EQ(be.Wait(10), 0);
  ls_graph.CloseStdin();
  EXPECT_EQ(Field(ls_graph.WaitForLine("graph ", 30), "ok"), 1u) << ls_graph.out();
  EXPECT_EQ(ls_graph.Wait(10), 0);
  ls.Wait(10);
  const std::string text = testing::ReadFile(be_report);
  // 20 kernels, at the 50 us guess for unmeasured work against the 100 us window: two per
  // piece (three launches are too few to learn and rebuild), every launch split.
  EXPECT_NE(text.find("# graphs: 1 graphs split (10 pieces built"), std::string::npos) << text;
  EXPECT_NE(text.find("3 launches, 30 piece launches"), std::string::npos) << text;
  EXPECT_EQ(text.find(" 0 held for"), std::string::npos) << text;  // held behind the LS
  const std::string ls_text = testing::ReadFile(ls_report);
  EXPECT_NE(ls_text.find("# graphs: 0 graphs split"), std::string::npos) << ls_text;
}

// missiled killed and restarted while a BE tenant is held behind a busy LS: the held BE goes
// once its session has ended (no daemon clears the dead region's marks; the LS bound here is
// far longer than the test), and its work is all done, in order.
TEST_F(PacingTest, ADaemonRestartNeitherDeadlocksNorLosesWork) {
  const std::string compute = "max_hold_ms = 0\nls_stale_ms = 600000";
  StartDaemon(compute);
  auto env = TenantEnv("be");
  const std::string report = dir_.path() + "/report-restart";
  env["MISSILE_REPORT"] = report;
  Child be, ls;
  ASSERT_TRUE(be.Start({PACE_PROBE, "order", "40"}, env));
  ASSERT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
  StartLs(&ls, 20000);  // busy on the GPU for 20 s
  be.CloseStdin();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  EXPECT_TRUE(be.WaitForLine("order", 0).empty()) << "the BE was not held: " << be.out();
  const uint64_t killed = Now();
  daemon_.Kill(SIGKILL);
  daemon_.Wait(10);
  StartDaemon(compute);
  const std::string line = be.WaitForLine("order", 30);
  const uint64_t done = Now();
  EXPECT_EQ(Field(line, "ok"), 1u) << be.out();
  // Released by the end of its session, not by the LS's 600 s bound or its 20 s request.
  EXPECT_LT(static_cast<double>(done - killed), 10000 * kMs) << line;
  EXPECT_EQ(be.Wait(10), 0) << be.out();
  ls.Kill(SIGKILL);
  ls.Wait(10);
}

TEST_F(PacingTest, BeCopiesAreHostPacedAndNeverWaitOnTheStream) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 10000");
  // An idle LS tenant on the GPU: a BE tenant alone there would not be paced.
  Child idle_ls;
  ASSERT_TRUE(idle_ls.Start({PACE_PROBE, "idle"}, TenantEnv("ls", "idle-ls")));
  ASSERT_FALSE(idle_ls.WaitForLine("ready", 20).empty()) << idle_ls.out();
  // The same 16 MiB copy (16 chunks of 1 MiB through the scheduler) by an LS and a BE tenant.
  for (const std::string cls : {"ls", "be"}) {
    SCOPED_TRACE(cls);
    const std::string report = dir_.path() + "/report-" + cls;
    auto env = TenantEnv(cls);
    env["MISSILE_REPORT"] = report;
    Child t;
    ASSERT_TRUE(t.Start({PACE_PROBE, "be", "16"}, env));
    ASSERT_FALSE(t.WaitForLine("ready", 20).empty()) << t.out();
    const std::string line = RunBe(&t);
    const std::string text = testing::ReadFile(report);
    EXPECT_NE(text.find("# 1 host-device copies went through the PCIe scheduler"),
              std::string::npos) << text;
    if (cls == "be") {
      EXPECT_EQ(Field(line, "waits"), 0u) << line;  // every chunk enqueued once granted
    } else {
      EXPECT_GT(Field(line, "waits"), 0u) << line;  // the GPU waits for the LS's later grants
    }
  }
  idle_ls.CloseStdin();
  EXPECT_EQ(idle_ls.Wait(10), 0) << idle_ls.out();
}

// With BE tenants only on the GPU, a BE copy keeps its gates on the stream (asynchronous, so
// the scheduler can share the link between BE tenants by weight): only an LS tenant on the GPU
// makes BE copies host-paced.
TEST_F(PacingTest, BeCopiesNextToBeTenantsOnlyKeepTheirGatesOnTheStream) {
  StartDaemon("max_hold_ms = 0\nls_stale_ms = 10000");
  Child other_be;
  ASSERT_TRUE(other_be.Start({PACE_PROBE, "idle"}, TenantEnv("be", "other-be")));
  ASSERT_FALSE(other_be.WaitForLine("ready", 20).empty()) << other_be.out();
  Child be;
  StartBe(&be, 16);
  const std::string line = RunBe(&be);
  EXPECT_GT(Field(line, "waits"), 0u) << line;
  other_be.CloseStdin();
  EXPECT_EQ(other_be.Wait(10), 0) << other_be.out();
}

// "# pacing: N work items marked, ..." of a shim's exit report; -1 without that line.
long long MarkedItems(const std::string& report) {
  const std::string key = "# pacing: ";
  const size_t pos = report.find(key);
  if (pos == std::string::npos) return -1;
  return std::strtoll(report.c_str() + pos + key.size(), nullptr, 10);
}

// A BE tenant alone on its GPU is not paced (no LS tenant to protect, no BE tenant to share
// with): none of its launches is marked or held, even with a window of one item; once an LS
// tenant has joined the GPU, the same BE work is paced again.
TEST_F(PacingTest, ABeAloneOnItsGpuIsNotPacedUntilAnLsTenantJoins) {
  StartDaemon("window_items = 1\nwindow_us = 0\nrefill_us = 0\nmax_hold_ms = 0");
  auto spin = [&](const std::string& tag) {
    const std::string report = dir_.path() + "/report-" + tag;
    auto env = TenantEnv("be", "spin-" + tag);
    env["MISSILE_REPORT"] = report;
    Child be;
    EXPECT_TRUE(be.Start({PACE_PROBE, "spin", "50", "1"}, env));
    EXPECT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
    be.CloseStdin();
    EXPECT_GT(Field(be.WaitForLine("spin", 30), "kernels"), 0u) << be.out();
    EXPECT_EQ(be.Wait(10), 0) << be.out();
    return testing::ReadFile(report);
  };
  const std::string alone = spin("alone");
  EXPECT_EQ(MarkedItems(alone), 0) << alone;

  Child idle_ls;
  ASSERT_TRUE(idle_ls.Start({PACE_PROBE, "idle"}, TenantEnv("ls", "idle-ls")));
  ASSERT_FALSE(idle_ls.WaitForLine("ready", 20).empty()) << idle_ls.out();
  const std::string beside_ls = spin("beside-ls");
  EXPECT_GT(MarkedItems(beside_ls), 0) << beside_ls;
  idle_ls.CloseStdin();
  EXPECT_EQ(idle_ls.Wait(10), 0) << idle_ls.out();
}


// The LS reserve of TPCs on MPS (libintercept/tpc_mask.h), against the test double's TPC masks
// (72 TPCs, 6 floorswept, live TPC k holding SMs k and k + 66). With an LS tenant on the GPU, a
// BE's kernels, launched one by one or in a graph (masked at its upload), leave the last 8 live
// TPCs free: SMs 58-65 and 124-131. Pacing is off: the mask alone is a mode of its own.
class ReserveTest : public PacingTest {
 protected:
  // Runs `pace_probe sms GRAPH` as a BE beside an idle LS tenant; returns its SMs and report.
  std::pair<std::set<uint32_t>, std::string> BeSms(bool graph,
                                                   std::map<std::string, std::string> extra) {
    Child ls, be;
    auto ls_env = TenantEnv("ls");
    auto be_env = TenantEnv("be");
    const std::string report = dir_.path() + "/report-sms-" + std::to_string(++runs_);
    be_env["MISSILE_REPORT"] = report;
    for (const auto& [k, v] : extra) ls_env[k] = be_env[k] = v;
    EXPECT_TRUE(ls.Start({PACE_PROBE, "idle"}, ls_env));
    EXPECT_FALSE(ls.WaitForLine("ready", 20).empty()) << ls.out();
    EXPECT_TRUE(be.Start({PACE_PROBE, "sms", graph ? "1" : "0"}, be_env));
    EXPECT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
    be.CloseStdin();
    const std::string line = be.WaitForLine("sms ", 30);
    EXPECT_EQ(be.Wait(10), 0) << be.out();
    ls.CloseStdin();
    EXPECT_EQ(ls.Wait(10), 0);
    std::set<uint32_t> sms;
    const size_t at = line.find("list=");
    EXPECT_NE(at, std::string::npos) << line << be.out();
    if (at == std::string::npos) return {sms, ""};
    std::stringstream list(line.substr(at + 5));
    for (std::string item; std::getline(list, item, ',');) sms.insert(std::stoul(item));
    return {sms, testing::ReadFile(report)};
  }
  int runs_ = 0;
};

TEST_F(ReserveTest, OnMpsABesKernelsLeaveTheReserveFree) {
  StartDaemon("pacing = false\nls_reserve_tpcs = 8");
  for (bool graph : {false, true}) {
    auto [sms, report] = BeSms(graph, {{"FAKECUDA_MPS", "1"}});
    EXPECT_EQ(sms.size(), 116u) << "graph " << graph << "\n" << report;
    for (uint32_t sm = 0; sm < 132; ++sm) {
      const bool reserved = (sm >= 58 && sm <= 65) || sm >= 124;
      EXPECT_EQ(sms.contains(sm), !reserved) << "SM " << sm << " graph " << graph;
    }
    EXPECT_NE(report.find("# reserve: GPU 0: 8 TPCs kept free for LS tenants, 66 live TPCs "
                          "(mask bits 0-2, 4-11, 13-24, 26-37, 39-50, 52-63, 65-71), "
                          "132 SMs"),
              std::string::npos)
        << report;
  }
}

// Where the reserve cannot work as verified, BE kernels run unmasked on every SM and the exit
// report says why: time-sliced tenants, a descriptor of another version, no callback table.
TEST_F(ReserveTest, WithoutMpsOrAVerifiedMechanismNothingIsMasked) {
  StartDaemon("pacing = false\nls_reserve_tpcs = 8");
  struct Case {
    std::map<std::string, std::string> env;
    const char* says;
  };
  for (const Case& c : std::vector<Case>{
           {{}, "time-sliced (not an MPS client)"},
           {{{"FAKECUDA_MPS", "1"}, {"FAKECUDA_LAUNCH_DESC_VERSION", "0x30"}},
            "unavailable: launch descriptor version 0x30 is not the one verified"},
           {{{"FAKECUDA_MPS", "1"}, {"FAKECUDA_LAUNCH_CALLBACK", "0"}},
            "unavailable: the driver has no launch callback table"}}) {
    auto [sms, report] = BeSms(false, c.env);
    EXPECT_EQ(sms.size(), 132u) << c.says;
    EXPECT_NE(report.find(std::string("# reserve: GPU 0: ") + c.says), std::string::npos)
        << report;
  }
}

// An LS latency budget with real processes: missiled's sampler times the LS tenant's requests
// from its lanes page, learns them alone in a quiet time, and, the test double's GPU running
// each process's kernels apart (BE work stretches no LS request), lets the BE share the LS's
// busy time; missilectl shows what it measured.
TEST_F(PacingTest, ABudgetIsMeasuredAndSpentBesideRealTenants) {
  // The LS synchronises each kernel before it launches the next: a host that wakes it more than
  // ls_idle_us late cuts its request into shorter periods (two fresh-clone CI runs learned an
  // alone duration of 0.59 and 0.76 ms). 1 ms still parts requests 3 ms apart.
  StartDaemon("ls_budget_pct = 200\nls_idle_us = 1000");
  Child be, ls;
  ASSERT_TRUE(be.Start({PACE_PROBE, "spin", "100", "30"}, TenantEnv("be")));
  ASSERT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
  be.CloseStdin();
  // Requests of 4 kernels of 500 us, 3 ms apart, for about 30 s, the LS an MPS client as the
  // test double's driver reports it (its alone durations are then its work alone on MPS).
  std::map<std::string, std::string> ls_env = TenantEnv("ls", "web");
  ls_env["FAKECUDA_MPS"] = "1";
  ASSERT_TRUE(ls.Start({PACE_PROBE, "requests", "6000", "4", "500", "3"}, ls_env));
  std::string json;  // the LS tenant's part of `missilectl --json tenants`
  const auto start = std::chrono::steady_clock::now();
  const auto until = start + std::chrono::seconds(25);
  while (std::chrono::steady_clock::now() < until) {
    const std::string all = testing::Run({MISSILECTL, "--socket", socket_, "--json", "tenants"}).out;
    const size_t web = all.find("\"name\":\"web\"");
    json = web == std::string::npos ? all : all.substr(web);
    if (json.find("\"budget\":\"BUDGET_SPENDING\"") != std::string::npos &&
        json.find("\"be_share\":0,") == std::string::npos) {
      break;
    }
    std::this_thread::sleep_for(std::chrono::milliseconds(200));
  }
  std::printf("spending after %.1f s\n", std::chrono::duration<double>(
                                              std::chrono::steady_clock::now() - start).count());
  EXPECT_NE(json.find("\"budget_pct\":200"), std::string::npos) << json;
  EXPECT_NE(json.find("\"budget\":\"BUDGET_SPENDING\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"be_share\":0,"), std::string::npos) << json;
  EXPECT_EQ(json.find("\"alone_periods\":\"0\""), std::string::npos) << json;
  EXPECT_EQ(json.find("\"alone_periods\":\"1\""), std::string::npos) << json;
  // What the stretch is made of: a request of four 500 us kernels, about 2 ms alone, or, where
  // the host cut it, at least one of them (the bounds are for a loaded machine).
  for (const char* key : {"\"alone_ms\":", "\"period_ms\":"}) {
    const size_t at = json.find(key);
    ASSERT_NE(at, std::string::npos) << key << " in " << json;
    const double ms = std::strtod(json.c_str() + at + std::strlen(key), nullptr);
    EXPECT_GE(ms, 0.45) << key;
    EXPECT_LT(ms, 50.0) << key;
  }
  const std::string text = testing::Run({MISSILECTL, "--socket", socket_, "tenants"}).out;
  EXPECT_NE(text.find("budget 200%: stretch"), std::string::npos) << text;
  EXPECT_NE(text.find(", last "), std::string::npos) << text;
  EXPECT_NE(text.find(" alone on MPS"), std::string::npos) << text;
  EXPECT_NE(json.find("\"mps_client\":true"), std::string::npos) << json;
  // The BE is no MPS client: its shim said so, not missiled of every tenant.
  const std::string all = testing::Run({MISSILECTL, "--socket", socket_, "--json", "tenants"}).out;
  const size_t be_at = all.find("\"name\":\"be-probe\"");
  ASSERT_NE(be_at, std::string::npos) << all;
  const size_t be_end = all.find("\"name\":", be_at + 1);  // npos: to the end
  const std::string be_json =
      all.substr(be_at, be_end == std::string::npos ? be_end : be_end - be_at);
  EXPECT_EQ(be_json.find("\"mps_client\":true"), std::string::npos) << all;
  ls.Kill(SIGTERM);
  be.Kill(SIGTERM);
  ls.Wait(10);
  be.Wait(10);
}

}  // namespace
}  // namespace missile
