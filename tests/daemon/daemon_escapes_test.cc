// Multi-process tests of missiled (see daemon_process_fixture.h). Allocation paths that used to
// pass to the driver outside the tenant's quota: compressible VMM memory, and stream-ordered
// allocations recorded into a CUDA graph by stream capture.
#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

size_t Count(const std::string& text, const std::string& what) {
  size_t n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// cuMemCreate with a compression type is served from the daemon's blocks, uncompressed, and
// charged: the second allocation does not fit the 16 MiB quota. The program is told that no
// compression was granted, as the driver tells it when it declines the hint.
TEST_F(DaemonTest, CompressibleVmmMemoryIsChargedToTheQuota) {
  StartDaemon("[classes.be]\ntenant_quota = \"16MiB\"\n");
  Child t;
  const std::string log = dir_.path() + "/tenant.err";
  auto env = TenantEnv("be", "squeezer");
  env["MISSILE_LOG_LEVEL"] = "info";  // the note is an info line
  ASSERT_TRUE(t.Start({TENANT_PROBE, "vmmc:8", "vmmc:16", "hold"}, env, log));
  ASSERT_EQ(t.WaitForLine("ready"), "ready") << t.out() << testing::ReadFile(log);
  const std::string out = t.out();
  EXPECT_NE(out.find("vmmc 8 ok compressed=0 imports=1"), std::string::npos) << out;
  EXPECT_NE(out.find("vmmc 16 err 2"), std::string::npos) << out;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_EQ(Leased(), 8 * kMiB);
  t.CloseStdin();
  EXPECT_EQ(t.Wait(), 0);
  EXPECT_EQ(LeasedWithin3s(0), 0u);
  const std::string err = testing::ReadFile(log);
  EXPECT_EQ(Count(err, "asked for compressible memory"), 1u) << err;
}

// A stream-ordered allocation while the stream is captured would be a graph memory node that
// the driver allocates at each launch, outside the quota. It is served at capture from the
// tenant's quota instead and kept while the process lives (the graph may run again at any
// time): the 64 MiB ones do not fit the 16 MiB quota, the 8 and 5 MiB ones do, work in the
// launched graph, and stay charged after the program freed them (in the graph and after it).
TEST_F(DaemonTest, StreamOrderedAllocationsDuringCaptureAreCharged) {
  StartDaemon("[classes.be]\ntenant_quota = \"16MiB\"\n");
  Child t;
  const std::string log = dir_.path() + "/tenant.err";
  ASSERT_TRUE(t.Start({TENANT_PROBE, "capture:64", "capturepool:64", "capture:8",
                       "capturepool:5", "hold", "capture:4", "info"},
                      TenantEnv("be", "grapher"), log));
  ASSERT_EQ(t.WaitForLine("ready"), "ready") << t.out() << testing::ReadFile(log);
  EXPECT_EQ(Leased(), 14 * kMiB);
  t.CloseStdin();
  EXPECT_EQ(t.Wait(), 0) << t.out() << testing::ReadFile(log);
  const std::string out = t.out();
  EXPECT_NE(out.find("capture 64 err 2"), std::string::npos) << out;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_NE(out.find("capturepool 64 err 2"), std::string::npos) << out;
  EXPECT_NE(out.find("capture 8 ok"), std::string::npos) << out;
  EXPECT_NE(out.find("capturepool 5 ok"), std::string::npos) << out;
  EXPECT_NE(out.find("capture 4 err 2"), std::string::npos) << out;  // 14 MiB still charged
  EXPECT_NE(out.find("info free=2097152 total=16777216"), std::string::npos) << out;
  EXPECT_EQ(LeasedWithin3s(0), 0u);
  const std::string err = testing::ReadFile(log);
  EXPECT_EQ(Count(err, "cuMemAllocAsync during stream capture: served from the tenant's quota"),
            1u)
      << err;
}

// Without a daemon (MISSILE_NO_DAEMON=passthrough) there is no quota to escape: capture works
// as without Missile.
TEST_F(DaemonTest, CapturedAllocationsPassThroughWithoutADaemon) {
  Child t;
  auto env = TenantEnv("be", "alone");
  env["MISSILE_SOCKET"] = dir_.path() + "/nobody.sock";
  ASSERT_TRUE(t.Start({TENANT_PROBE, "capture:4", "vmmc:4"}, env, dir_.path() + "/alone.err"));
  EXPECT_EQ(t.Wait(), 0) << t.out();
  EXPECT_NE(t.out().find("capture 4 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("vmmc 4 ok compressed=1 imports=0"), std::string::npos) << t.out();
}

}  // namespace
}  // namespace missile::process_test
