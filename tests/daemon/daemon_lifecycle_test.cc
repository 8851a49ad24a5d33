// Multi-process tests of missiled (see daemon_process_fixture.h). The daemon's life and the tenants' around it: no daemon, a killed daemon, a restarted daemon,
// systemd readiness and SIGTERM.
#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

TEST_F(DaemonTest, WithoutADaemonTheShimPassesThroughOrRefusesAsConfigured) {
  // No daemon started: the socket does not exist.
  ProcessResult pass = testing::Run({TENANT_PROBE, "alloc:4", "check"}, TenantEnv("be"));
  EXPECT_EQ(pass.exit_code, 0);
  EXPECT_NE(pass.out.find("alloc 4 ok"), std::string::npos) << pass.out;
  EXPECT_NE(pass.err.find("cannot reach missiled"), std::string::npos) << pass.err;
  auto env = TenantEnv("be");
  env["MISSILE_NO_DAEMON"] = "refuse";
  ProcessResult refuse = testing::Run({TENANT_PROBE, "alloc:4"}, env);
  EXPECT_NE(refuse.out.find("alloc 4 err 2"), std::string::npos) << refuse.out;
  EXPECT_NE(refuse.err.find("MISSILE_NO_DAEMON=refuse"), std::string::npos) << refuse.err;
}

// A daemon killed under running tenants: each keeps the memory it was served, and its later
// allocations go to the driver (passthrough, the default) or fail (refuse), as when there was no
// daemon at all. Frees of the memory served before go on working.
TEST_F(DaemonTest, TenantsOutliveAKilledDaemonAsConfigured) {
  StartDaemon("");
  auto refuse_env = TenantEnv("be", "refuser");
  refuse_env["MISSILE_NO_DAEMON"] = "refuse";
  Child pass, refuse;
  const std::string pass_log = dir_.path() + "/survivor.err";
  const std::string refuse_log = dir_.path() + "/refuser.err";
  ASSERT_TRUE(pass.Start({TENANT_PROBE, "alloc:16", "small:4", "hold", "alloc:16", "vmm:4",
                          "info", "check", "freeall", "alloc:8", "check"},
                         TenantEnv("ls", "survivor"), pass_log));
  ASSERT_TRUE(refuse.Start({TENANT_PROBE, "alloc:16", "hold", "alloc:16", "check", "freeall"},
                           refuse_env, refuse_log));
  ASSERT_EQ(pass.WaitForLine("ready"), "ready");
  ASSERT_EQ(refuse.WaitForLine("ready"), "ready");
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the shims see the session end
  pass.CloseStdin();
  refuse.CloseStdin();
  EXPECT_EQ(pass.Wait(30), 0) << pass.out() << testing::ReadFile(pass_log);
  EXPECT_EQ(refuse.Wait(30), 0) << refuse.out() << testing::ReadFile(refuse_log);
  const std::string p = pass.out(), r = refuse.out();
  // Before the kill: served by the daemon. After: by the driver, or refused.
  EXPECT_NE(p.find("alloc 16 ok"), std::string::npos) << p;
  EXPECT_EQ(p.find("alloc 16 err"), std::string::npos) << p;
  EXPECT_NE(p.find("vmm 4 ok"), std::string::npos) << p;
  EXPECT_NE(p.find("alloc 8 ok"), std::string::npos) << p;
  EXPECT_EQ(p.find("corrupt"), std::string::npos) << p;
  EXPECT_NE(p.find("check ok"), std::string::npos) << p;
  EXPECT_NE(p.find("freeall ok"), std::string::npos) << p;
  const std::string pass_err = testing::ReadFile(pass_log);
  EXPECT_NE(pass_err.find("new device allocations go to the driver directly"), std::string::npos)
      << pass_err;
  EXPECT_NE(r.find("alloc 16 err 2"), std::string::npos) << r;  // CUDA_ERROR_OUT_OF_MEMORY
  EXPECT_NE(r.find("check ok"), std::string::npos) << r;  // what it had is intact
  EXPECT_NE(r.find("freeall ok"), std::string::npos) << r;
  const std::string refuse_err = testing::ReadFile(refuse_log);
  EXPECT_NE(refuse_err.find("new device allocations fail"), std::string::npos) << refuse_err;
}

// A daemon restarted under a running tenant (killed, then started again, as systemd's
// Restart=on-failure does): until the new one is up the tenant's allocations go to the driver;
// then the tenant registers with it again, and its allocations are served within its quota
// again. Memory from the old daemon, from the driver and from the new daemon all stay intact.
TEST_F(DaemonTest, TenantRegistersAgainWithARestartedDaemon) {
  StartDaemon("");
  auto env = TenantEnv("ls", "phoenix");
  env["MISSILE_QUOTA"] = "256MiB";
  const std::string log = dir_.path() + "/phoenix.err";
  const std::string registered = dir_.path() + "/registered";
  const std::string counted = dir_.path() + "/counted";
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "alloc:16", "info", "hold", "alloc:8", "info",
                       "await:" + registered, "alloc:32", "info", "await:" + counted, "check",
                       "freeall"},
                      env, log));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  t.CloseStdin();  // alloc:8 at once: the shim may not have seen the session end yet
  ASSERT_EQ(t.WaitForLine("awaiting", 30), "awaiting") << t.out() << testing::ReadFile(log);
  unlink(socket_.c_str());  // the stale socket: StartDaemon waits for the new one
  StartDaemon("");
  // Registered, and the new session installed in the shim (it logs that after installing it).
  bool again = false;
  for (int i = 0; i < 1000 && !again; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    again = testing::ReadFile(log).find("registered again with a restarted missiled") !=
            std::string::npos;
  }
  ASSERT_TRUE(again) << "the tenant did not register with the restarted daemon\n"
                     << testing::ReadFile(log);
  EXPECT_EQ(Status().tenants(), 1);
  std::ofstream(registered) << "";
  ASSERT_EQ(t.WaitForLine("awaiting", 30), "awaiting") << t.out();
  // Only the allocation made after registering again is the new daemon's.
  EXPECT_EQ(LeasedWithin3s(32 * kMiB), 32 * kMiB);
  std::ofstream(counted) << "";
  EXPECT_EQ(t.Wait(30), 0) << t.out() << testing::ReadFile(log);
  const std::string out = t.out();
  EXPECT_EQ(out.find("err"), std::string::npos) << out;
  EXPECT_NE(out.find("check ok"), std::string::npos) << out;
  EXPECT_NE(out.find("freeall ok"), std::string::npos) << out;
  // cuMemGetInfo: the quota while served, the whole device in between.
  std::vector<double> totals;
  for (size_t at = out.find(" total="); at != std::string::npos; at = out.find(" total=", at + 1)) {
    totals.push_back(atof(out.c_str() + at + 7));
  }
  ASSERT_EQ(totals.size(), 3u) << out;
  EXPECT_EQ(totals[0], 256.0 * kMiB) << out;
  EXPECT_GT(totals[1], 256.0 * kMiB) << out;
  EXPECT_EQ(totals[2], 256.0 * kMiB) << out;
  const std::string err = testing::ReadFile(log);
  EXPECT_NE(err.find("registered again with a restarted missiled"), std::string::npos) << err;
  EXPECT_EQ(LeasedWithin3s(0), 0u);  // the tenant's exit returned the new daemon's blocks
}

// A tenant that makes no call at all after missiled restarts is back in its tenant list within
// a few seconds (its keepalive stream notices the restart), not at its next allocation.
TEST_F(DaemonTest, AnIdleTenantRegistersAgainWithARestartedDaemon) {
  StartDaemon("");
  const std::string log = dir_.path() + "/idle.err";
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "alloc:16", "hold", "freeall"}, TenantEnv("ls", "idle"), log));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  ASSERT_EQ(Status().tenants(), 1);
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  unlink(socket_.c_str());  // the stale socket: StartDaemon waits for the new one
  StartDaemon("");
  int tenants = 0;
  for (int i = 0; i < 100 && tenants != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    tenants = Status().tenants();
  }
  EXPECT_EQ(tenants, 1) << "the idle tenant did not register again within 10 s\n"
                        << testing::ReadFile(log);
  t.CloseStdin();
  EXPECT_EQ(t.Wait(30), 0) << t.out() << testing::ReadFile(log);
}

// A tenant started before missiled goes on without it, and registers once missiled starts: its
// later allocations are the daemon's.
TEST_F(DaemonTest, ATenantStartedBeforeTheDaemonRegistersOnceItStarts) {
  const std::string log = dir_.path() + "/early.err";
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "alloc:16", "hold", "alloc:8", "check", "freeall"},
                      TenantEnv("be", "early"), log));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  StartDaemon("");
  int tenants = 0;
  for (int i = 0; i < 100 && tenants != 1; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    tenants = Status().tenants();
  }
  ASSERT_EQ(tenants, 1) << "the tenant did not register within 10 s\n" << testing::ReadFile(log);
  EXPECT_EQ(Leased(), 0u);  // its first 16 MiB went to the driver
  t.CloseStdin();
  ASSERT_FALSE(t.WaitForLine("alloc 8 ok", 30).empty()) << t.out() << testing::ReadFile(log);
  EXPECT_EQ(LeasedWithin3s(8 * kMiB), 8 * kMiB);
  EXPECT_EQ(t.Wait(30), 0) << t.out() << testing::ReadFile(log);
  EXPECT_NE(testing::ReadFile(log).find("which was not reachable when the process started"),
            std::string::npos)
      << testing::ReadFile(log);
}

// A program that only copies comes back under the PCIe scheduler of a restarted daemon too.
TEST_F(DaemonTest, CopiesAreScheduledAgainByARestartedDaemon) {
  StartDaemon("");
  auto env = TenantEnv("ls", "copier");
  const std::string report = dir_.path() + "/copier.report";
  env["MISSILE_REPORT"] = report;
  Child t;
  // 4 MiB copies, one every 10 ms for about 6 s.
  ASSERT_TRUE(t.Start({COPY_PROBE, "lat", "4", "600", "10"}, env, dir_.path() + "/copier.err"));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  unlink(socket_.c_str());
  StartDaemon("");
  // The new daemon sees the tenant's copies.
  uint64_t h2d = 0;
  for (int i = 0; i < 300 && h2d == 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
    v1::ListTenantsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    if (!admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp).ok()) continue;
    for (const v1::TenantInfo& info : resp.tenants()) {
      for (const v1::PcieUse& use : info.pcie()) h2d += use.h2d_bytes();
    }
  }
  EXPECT_GT(h2d, 0u) << "no copy went through the restarted daemon's scheduler\n"
                     << testing::ReadFile(dir_.path() + "/copier.err");
  EXPECT_EQ(t.Wait(60), 0) << t.out();
  EXPECT_NE(t.out().find("data ok"), std::string::npos) << t.out();
}

// A daemon restarted between a tenant's sessions hands out other session ids, so nothing a shim
// sends in an ended session can name one of the new daemon's.
TEST_F(DaemonTest, ARestartedDaemonHandsOutOtherSessionIds) {
  StartDaemon("");
  auto session_of = [&](const std::string& name) {
    const std::string log = dir_.path() + "/" + name + ".err";
    auto env = TenantEnv("be", name);
    env["MISSILE_LOG_LEVEL"] = "info";
    Child c;
    EXPECT_TRUE(c.Start({TENANT_PROBE, "alloc:2"}, env, log));
    EXPECT_EQ(c.Wait(30), 0);
    const std::string err = testing::ReadFile(log);
    const size_t at = err.find("), session ");
    if (at == std::string::npos) return "none: " + err;
    return err.substr(at + 11, err.find('\n', at) - at - 11);
  };
  const std::string first = session_of("before");
  StopDaemon();
  StartDaemon("");
  const std::string second = session_of("after");
  EXPECT_EQ(first.find("none"), std::string::npos) << first;
  EXPECT_EQ(second.find("none"), std::string::npos) << second;
  EXPECT_NE(first, second);
}

TEST_F(DaemonTest, TellsSystemdItIsReadyAndStopsCleanlyOnSigterm) {
  std::string notify = dir_.path() + "/notify.sock";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, notify.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  setenv("NOTIFY_SOCKET", notify.c_str(), 1);
  StartDaemon();
  unsetenv("NOTIFY_SOCKET");
  timeval tv{5, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  char buf[256] = {};
  ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0);
  EXPECT_NE(std::string(buf).find("READY=1"), std::string::npos) << buf;
  StopDaemon();
  EXPECT_EQ(daemon_exit_, 0);
  n = recv(fd, buf, sizeof(buf) - 1, 0);
  ASSERT_GT(n, 0);
  buf[n] = 0;
  EXPECT_NE(std::string(buf).find("STOPPING=1"), std::string::npos) << buf;
  EXPECT_NE(access(socket_.c_str(), F_OK), 0) << "socket left behind";
  close(fd);
}

// Under a systemd watchdog (WATCHDOG_USEC), a healthy daemon pings after READY=1: its core,
// copy arbiter and pacing sampler loops all advance.
TEST_F(DaemonTest, PingsTheSystemdWatchdogWhileItsLoopsRun) {
  std::string notify = dir_.path() + "/notify.sock";
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  strncpy(addr.sun_path, notify.c_str(), sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  extra_env_["NOTIFY_SOCKET"] = notify;
  extra_env_["WATCHDOG_USEC"] = "1000000";  // a ping every 500 ms
  StartDaemon();
  timeval tv{10, 0};
  setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv));
  int pings = 0;
  std::string seen;
  for (int i = 0; i < 20 && pings < 3; ++i) {
    char buf[256] = {};
    ssize_t n = recv(fd, buf, sizeof(buf) - 1, 0);
    if (n <= 0) break;
    seen += std::string(buf) + "|";
    if (std::string(buf).find("WATCHDOG=1") != std::string::npos) ++pings;
  }
  EXPECT_EQ(pings, 3) << seen;
  EXPECT_NE(seen.find("READY=1"), std::string::npos) << seen;
  StopDaemon();
  EXPECT_EQ(daemon_exit_, 0);
  close(fd);
}

}  // namespace
}  // namespace missile::process_test
