// Multi-process tests of the daemon's pacing administration: the real missiled on the driver
// test double (tests/fakecuda), changed and read with the real missilectl, and tenants whose
// shims record their paced GPU work for `missilectl tenants`.
#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include "daemon_process_fixture.h"
#include "gtest/gtest.h"
#include "missile/v1/missile.grpc.pb.h"
#include "subprocess.h"

namespace missile {
namespace {

namespace v1 = ::missile::v1;
using testing::Child;
using testing::ProcessResult;
using testing::TempDir;

class PacingAdminTest : public process_test::DaemonTest {
 protected:
  PacingAdminTest() {
    fake_settings_.clear();
    log_level_.clear();
    daemon_log_ = dir_.path() + "/missiled.log";
  }

  // Starts missiled with `daemon_extra` in [daemon]; its log goes to daemon_log_.
  void StartDaemon(const std::string& daemon_extra = "") {
    extra_daemon_ = daemon_extra;
    DaemonTest::StartDaemon();
  }

  // missilectl run as nobody (uid and gid 65534, no other groups).
  ProcessResult CtlAsNobody(std::vector<std::string> args) {
    args.insert(args.begin(), {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                               "--clear-groups", MISSILECTL, "--socket", socket_});
    return testing::Run(args);
  }

  grpc::Status SetPacing(const v1::SetPacingRequest& req, v1::SetPacingResponse* resp) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return admin_->SetPacing(&ctx, req, resp);
  }

  v1::PacingPolicy Policy() {
    v1::StatusResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = admin_->Status(&ctx, v1::StatusRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    EXPECT_TRUE(resp.has_pacing());
    return resp.pacing();
  }
};

TEST_F(PacingAdminTest, AnAdminChangesPacingLiveAndStatusShowsIt) {
  StartDaemon();
  ProcessResult status = Ctl({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("\npacing: on, window 8 items / 100 us, LS idle 200 us, stale 200 ms, "
                            "max hold 20 ms, unknown 50 us, share slack 2000 us, refill 25 us\n"),
            std::string::npos)
      << status.out;

  ProcessResult set = Ctl({"set", "--window-us", "300", "--pacing", "off"});  // as root
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find("pacing: on -> off\n"), std::string::npos) << set.out;
  EXPECT_NE(set.out.find("window_us: 100 -> 300\n"), std::string::npos) << set.out;
  EXPECT_EQ(set.out.find("window_items:"), std::string::npos) << set.out;  // not changed

  status = Ctl({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("\npacing: off, window 8 items / 300 us, LS idle 200 us"),
            std::string::npos)
      << status.out;
  ProcessResult json = Ctl({"--json", "status"});
  EXPECT_NE(json.out.find("\"pacing\":{\"pacing\":false,\"window_items\":8,\"window_us\":\"300\","),
            std::string::npos)
      << json.out;

  // Who changed what is in the daemon's log.
  std::string log;
  for (int i = 0; i < 100; ++i) {
    log = testing::ReadFile(daemon_log_);
    if (log.find("pacing changed by uid 0 pid ") != std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_NE(log.find(": pacing on -> off, window_us 100 -> 300"), std::string::npos) << log;

  // Setting it back.
  set = Ctl({"set", "--pacing", "on"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_TRUE(Policy().pacing());
  EXPECT_EQ(Policy().window_us(), 300u);
}

// SIGHUP re-reads the configuration: the pacing keys and the log level change live, a key
// fixed at start is named and left alone, a file that no longer parses changes nothing; the
// daemon keeps serving throughout.
TEST_F(PacingAdminTest, SighupReloadsWhatCanChangeLive) {
  StartDaemon();
  ASSERT_EQ(Policy().window_us(), 100u);
  const std::string config = dir_.path() + "/missiled.toml";
  auto rewrite = [&](const std::string& extra) {
    std::ofstream(config, std::ios::trunc)
        << "[daemon]\nsocket = \"" << socket_ << "\"\nlog_level = \"debug\"\n"
        << "[gpu]\nprofile_dir = \"" << dir_.path() << "/profiles\"\n" << extra;
  };
  auto log_has = [&](const std::string& text) {
    for (int i = 0; i < 300; ++i) {
      if (testing::ReadFile(daemon_log_).find(text) != std::string::npos) return true;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return false;
  };
  rewrite("[pcie]\nchunk = \"4MiB\"\n[compute]\nwindow_us = 300\n");
  daemon_.Kill(SIGHUP);
  EXPECT_TRUE(log_has("SIGHUP: applied compute.window_us, daemon.log_level"))
      << testing::ReadFile(daemon_log_);
  EXPECT_TRUE(log_has("take effect at the next start only: pcie.chunk"))
      << testing::ReadFile(daemon_log_);
  EXPECT_EQ(Policy().window_us(), 300u);
  EXPECT_TRUE(log_has("missiled debug: SIGHUP: log level now debug"))
      << "the new log level is not in force: " << testing::ReadFile(daemon_log_);
  // A file that does not parse: nothing changes, the daemon serves on.
  rewrite("[compute]\nwindow_us = \"soon\"\n");
  daemon_.Kill(SIGHUP);
  EXPECT_TRUE(log_has("SIGHUP: the configuration was not reloaded, nothing changed"))
      << testing::ReadFile(daemon_log_);
  EXPECT_EQ(Policy().window_us(), 300u);
  EXPECT_TRUE(daemon_.running());
}

TEST_F(PacingAdminTest, OutOfRangeValuesAreRejectedNamingTheKeyAndChangeNothing) {
  StartDaemon();
  // missilectl checks the range itself.
  ProcessResult r = Ctl({"set", "--window-us", "5000000"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("--window-us: '5000000' is not microseconds in [0, 1000000]"),
            std::string::npos)
      << r.err;
  // The daemon checks every field before it changes any.
  v1::SetPacingRequest req;
  req.set_pacing(false);
  req.set_window_items(4);
  req.set_window_us(5000000);
  v1::SetPacingResponse resp;
  grpc::Status s = SetPacing(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("window_us must be in [0, 1000000], got 5000000"),
            std::string::npos)
      << s.error_message();
  req.clear_window_us();
  req.set_ls_stale_ms(0);
  s = SetPacing(req, &resp);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_NE(s.error_message().find("ls_stale_ms"), std::string::npos) << s.error_message();
  EXPECT_EQ(SetPacing(v1::SetPacingRequest(), &resp).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);  // nothing to change
  v1::PacingPolicy p = Policy();
  EXPECT_TRUE(p.pacing());
  EXPECT_EQ(p.window_items(), 8u);
  EXPECT_EQ(p.window_us(), 100u);
  EXPECT_EQ(p.ls_stale_ms(), 200u);

  // The edges are accepted, and the answer is the policy in force.
  req = v1::SetPacingRequest();
  req.set_window_items(1024);
  req.set_share_slack_us(1000000);
  ASSERT_TRUE(SetPacing(req, &resp).ok());
  EXPECT_EQ(resp.pacing().window_items(), 1024u);
  EXPECT_EQ(resp.pacing().share_slack_us(), 1000000u);
  EXPECT_EQ(resp.previous().window_items(), 8u);
  EXPECT_EQ(Policy().window_items(), 1024u);
}

TEST_F(PacingAdminTest, NonAdminCannotChangePacing) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run missilectl as another user";
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
  StartDaemon("socket_group = \"nogroup\"\n");
  ProcessResult denied = CtlAsNobody({"set", "--window-us", "300", "--pacing", "off"});
  EXPECT_EQ(denied.exit_code, 1) << denied.out << denied.err;
  EXPECT_NE(denied.err.find("PERMISSION_DENIED: uid 65534 may not change pacing"),
            std::string::npos)
      << denied.err;
  // A non-admin may still read the policy, which did not change.
  ProcessResult status = CtlAsNobody({"status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("\npacing: on, window 8 items / 100 us"), std::string::npos)
      << status.out;
  // Root may.
  ProcessResult allowed = Ctl({"set", "--window-us", "300"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  EXPECT_EQ(Policy().window_us(), 300u);
}

TEST_F(PacingAdminTest, TenantsShowTheirPacedGpuWork) {
  StartDaemon();
  // The probe fills what it allocates with memsets, which are paced. An LS tenant alone on its
  // GPU marks nothing (no BE tenant to tell), nor is a BE tenant alone paced: "web" comes
  // first and marks nothing, "batch" is paced next to it, "api" marks next to "batch".
  Child web, be, api;
  ASSERT_TRUE(web.Start({TENANT_PROBE, "alloc:4", "hold"}, TenantEnv("ls", "web")));
  ASSERT_EQ(web.WaitForLine("ready"), "ready");
  ASSERT_TRUE(be.Start({TENANT_PROBE, "alloc:4", "hold"}, TenantEnv("be", "batch")));
  ASSERT_EQ(be.WaitForLine("ready"), "ready");
  ASSERT_TRUE(api.Start({TENANT_PROBE, "alloc:4", "hold"}, TenantEnv("ls", "api")));
  ASSERT_EQ(api.WaitForLine("ready"), "ready");

  v1::ListTenantsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp).ok());
  ASSERT_EQ(resp.tenants_size(), 3);
  for (const v1::TenantInfo& t : resp.tenants()) {
    ASSERT_EQ(t.compute_size(), 1) << t.name();
    const v1::ComputeUse& c = t.compute(0);
    EXPECT_EQ(c.gpu_index(), 0u);
    if (t.name() == "web") {
      EXPECT_EQ(c.submissions(), 0u) << t.name();
    } else {
      EXPECT_GT(c.submissions(), 0u) << t.name();
    }
    EXPECT_GE(c.ls_busy_share(), 0.0);
    EXPECT_LE(c.ls_busy_share(), 1.0);
    EXPECT_GE(c.held_share(), 0.0);
    EXPECT_LE(c.held_share(), 1.0);
    if (t.tenant_class() == v1::BEST_EFFORT) {
      EXPECT_EQ(c.ls_busy_share(), 0.0);
    } else {
      EXPECT_EQ(c.held_share(), 0.0);
    }
  }

  ProcessResult table = Ctl({"tenants"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("  HELD  "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("  IN FLIGHT  "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("  LS BUSY  "), std::string::npos) << table.out;
  // The BE row shows its held time and items in flight, the LS row its busy share.
  EXPECT_NE(table.out.find(" ms ("), std::string::npos) << table.out;
  EXPECT_NE(table.out.find("%"), std::string::npos) << table.out;
  ProcessResult json = Ctl({"--json", "tenants"});
  EXPECT_NE(json.out.find("\"compute\":[{\"gpu_index\":0,\"submissions\":"), std::string::npos)
      << json.out;
  for (Child* c : {&web, &be, &api}) c->CloseStdin();
  for (Child* c : {&web, &be, &api}) EXPECT_EQ(c->Wait(), 0);
}

}  // namespace
}  // namespace missile
