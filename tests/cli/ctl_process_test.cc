// missilectl against the real missiled on the driver test double (tests/fakecuda): what `set`
// reports and what a class change does to a running tenant's priority and weight; what `status`
// says about MPS.
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <cstring>
#include <fstream>
#include <map>
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
using testing::ProcessResult;
using testing::TempDir;

class CtlProcessTest : public process_test::DaemonTest {
 protected:
  CtlProcessTest() {
    fake_settings_.clear();
    log_level_.clear();
    daemon_log_ = dir_.path() + "/missiled.log";
  }
};

TEST_F(CtlProcessTest, ClassChangeTakesTheClassDefaultsAndSetSaysWhatChanged) {
  StartDaemon();
  Child tenant;
  ASSERT_TRUE(tenant.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "web")));
  ASSERT_EQ(tenant.WaitForLine("ready"), "ready");
  const std::string pid = std::to_string(tenant.pid());

  // BE defaults (priority 10, weight 110) -> LS defaults (priority -10, weight 9548).
  ProcessResult set = Ctl({"set", "--pid", pid, "--class-to", "ls"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "changed 1 tenant(s)\n" + pid +
                         " web: class be -> ls, priority 10 -> -10, weight 110 -> 9548\n");

  // A weight given with the class is kept; the priority is still the class's.
  set = Ctl({"set", "--pid", pid, "--class-to", "be", "--weight", "500"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "changed 1 tenant(s)\n" + pid +
                         " web: class ls -> be, priority -10 -> 10, weight 9548 -> 500\n");

  // A priority given with the class wins over the class's.
  set = Ctl({"set", "--pid", pid, "--class-to", "ls", "--priority", "0"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "changed 1 tenant(s)\n" + pid +
                         " web: class be -> ls, priority 10 -> 0, weight 500 -> 1024\n");

  set = Ctl({"set", "--name", "web", "--quota", "256MiB"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_NE(set.out.find(pid + " web: quota 0: "), std::string::npos) << set.out;
  EXPECT_NE(set.out.find(" -> 256.0 MiB\n"), std::string::npos) << set.out;

  set = Ctl({"set", "--name", "web", "--quota", "256MiB"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "changed 1 tenant(s)\n" + pid + " web: unchanged\n");

  ProcessResult json = Ctl({"--json", "tenants"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"tenant_class\":\"LATENCY_SENSITIVE\",\"priority\":0,\"weight\":1024,"),
            std::string::npos)
      << json.out;
  EXPECT_NE(json.out.find("\"quota_bytes\":\"268435456\","), std::string::npos) << json.out;

  ProcessResult table = Ctl({"tenants"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("  GPU  USED/QUOTA  "), std::string::npos) << table.out;
  EXPECT_NE(table.out.find(" web   ls     0     1024    0    "), std::string::npos) << table.out;

  tenant.CloseStdin();
  EXPECT_EQ(tenant.Wait(), 0);
}

// The LS latency budget of one tenant and of the LS class, as missilectl sets and shows them;
// out-of-range values and BE targets are refused with a clear message and change nothing.
// long: one daemon and three tenants walked through every way of setting a budget, in order.
TEST_F(CtlProcessTest, ALatencyBudgetPerTenantAndForTheLsClass) {
  StartDaemon();
  Child web, api, batch;
  ASSERT_TRUE(web.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("ls", "web")));
  ASSERT_EQ(web.WaitForLine("ready"), "ready");
  ASSERT_TRUE(api.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("ls", "api")));
  ASSERT_EQ(api.WaitForLine("ready"), "ready");
  ASSERT_TRUE(batch.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "batch")));
  ASSERT_EQ(batch.WaitForLine("ready"), "ready");
  const std::string web_pid = std::to_string(web.pid());
  const std::string api_pid = std::to_string(api.pid());
  // The budget in force on GPU 0 (ComputeUse) and the tenant's own (TenantInfo).
  auto budgets = [this](const std::string& name) {
    v1::ListTenantsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    EXPECT_TRUE(admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp).ok());
    for (const v1::TenantInfo& t : resp.tenants()) {
      if (t.name() != name) continue;
      EXPECT_EQ(t.compute_size(), 1) << name;
      return std::make_pair(t.compute_size() > 0 ? t.compute(0).budget_pct() : 0,
                            t.budget_pct());
    }
    ADD_FAILURE() << "no tenant " << name;
    return std::make_pair(0u, 0u);
  };
  EXPECT_EQ(budgets("web"), std::make_pair(100u, 0u)) << "[compute] ls_budget_pct";

  ProcessResult set = Ctl({"set", "--name", "web", "--budget-pct", "150"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "changed 1 tenant(s)\n" + web_pid + " web: budget 100% -> 150% (own)\n");
  ProcessResult json = Ctl({"--json", "tenants"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"budget_pct\":150,\"budget\":\"BUDGET_"), std::string::npos)
      << json.out;
  EXPECT_EQ(budgets("web"), std::make_pair(150u, 150u));
  EXPECT_EQ(budgets("api"), std::make_pair(100u, 0u));
  ProcessResult table = Ctl({"tenants"});
  ASSERT_EQ(table.exit_code, 0) << table.err;
  EXPECT_NE(table.out.find("; budget 150% (own)"), std::string::npos) << table.out;

  // Refused by missilectl before anything is sent, and by missiled.
  for (const char* bad : {"99", "1001"}) {
    ProcessResult refused = Ctl({"set", "--name", "web", "--budget-pct", bad});
    EXPECT_EQ(refused.exit_code, 2) << bad;
    EXPECT_NE(refused.err.find(std::string("--budget-pct: '") + bad +
                               "' is not a budget in [100, 1000] percent, or 0 to clear it"),
              std::string::npos)
        << refused.err;
  }
  ProcessResult refused = Ctl({"set", "--class", "be", "--budget-pct", "150"});
  EXPECT_EQ(refused.exit_code, 2);
  EXPECT_NE(refused.err.find("class be has no latency budget; only LS tenants have one"),
            std::string::npos)
      << refused.err;
  refused = Ctl({"set", "--name", "batch", "--budget-pct", "150"});
  EXPECT_EQ(refused.exit_code, 1);
  EXPECT_NE(refused.err.find("'batch' is a BE tenant, and only LS tenants have a latency budget"),
            std::string::npos)
      << refused.err;
  for (const auto& [target, pct] : {std::pair<std::string, uint32_t>{"web", 50},
                                    {"web", 1001}, {"class be", 150}}) {
    v1::SetPolicyRequest req;
    if (target == "class be") {
      req.set_tenant_class(v1::BEST_EFFORT);
    } else {
      req.set_name(target);
    }
    req.set_budget_pct(pct);
    v1::SetPolicyResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = admin_->SetPolicy(&ctx, req, &resp);
    EXPECT_EQ(s.error_code(), grpc::StatusCode::INVALID_ARGUMENT) << target << " " << pct;
    EXPECT_EQ(s.error_message(),
              target == "class be"
                  ? std::string("budget_pct: class be has no latency budget; only LS tenants "
                                "have one")
                  : "budget_pct must be in [100, 1000] (or 0 to clear it), got " +
                        std::to_string(pct));
  }
  EXPECT_EQ(budgets("web"), std::make_pair(150u, 150u)) << "nothing refused changed it";
  EXPECT_EQ(budgets("batch").first, 0u);

  // The LS class's budget: api (none of its own) follows it, web keeps its own.
  set = Ctl({"set", "--class", "ls", "--budget-pct", "300"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "changed 1 tenant(s)\n" + web_pid + " web: unchanged\n" + api_pid +
                         " api: budget 100% -> 300%\n");
  EXPECT_EQ(budgets("api"), std::make_pair(300u, 0u));
  EXPECT_EQ(budgets("web"), std::make_pair(150u, 150u));
  ProcessResult status = Ctl({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("BUDGET\nls "), std::string::npos) << status.out;
  EXPECT_NE(status.out.find(" 300%\nbe "), std::string::npos) << status.out;
  // 0 clears web's: it follows the class's.
  set = Ctl({"set", "--pid", web_pid, "--budget-pct", "0"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(set.out, "changed 1 tenant(s)\n" + web_pid + " web: budget 150% (own) -> 300%\n");
  EXPECT_EQ(budgets("web"), std::make_pair(300u, 0u));

  for (Child* c : {&web, &api, &batch}) c->CloseStdin();
  for (Child* c : {&web, &api, &batch}) EXPECT_EQ(c->Wait(), 0);
}

TEST_F(CtlProcessTest, StatusSaysWhetherTenantsRunOnMps) {
  StartDaemon();
  ProcessResult status = Ctl({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("\nMPS: off, tenants are time-sliced\n"), std::string::npos)
      << status.out;
  EXPECT_EQ(status.out.find("share fate"), std::string::npos) << status.out;
}

// [compute] mps = "start" with a stand-in control program (-d leaves a marker; get_server_list
// answers while it exists): status and the start-up summary both say that tenants are MPS
// clients and that MPS clients share fate.
TEST_F(CtlProcessTest, StatusAndStartUpSummaryWarnThatMpsClientsShareFate) {
  const std::string control = dir_.path() + "/fake-mps-control";
  std::ofstream(control) << "#!/bin/sh\n"
                            "p=\"$CUDA_MPS_PIPE_DIRECTORY\"\n"
                            "if [ \"$1\" = \"-d\" ]; then touch \"$p/running\"; exit 0; fi\n"
                            "read cmd\n"
                            "case \"$cmd\" in\n"
                            "  get_server_list) [ -e \"$p/running\" ] ;;\n"
                            "  quit) rm -f \"$p/running\" ;;\n"
                            "esac\n";
  chmod(control.c_str(), 0755);
  const std::string pipe = dir_.path() + "/mps-pipe";
  StartDaemon("[compute]\nmps = \"start\"\nmps_control = \"" + control +
              "\"\nmps_pipe_directory = \"" + pipe + "\"\nmps_log_directory = \"" + dir_.path() +
              "/mps-log\"\n");
  ProcessResult status = Ctl({"status"});
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("\nMPS: on, tenants are MPS clients (control daemon in " + pipe +
                            ", compute.mps = start)\nwarning: MPS clients share fate: a fault in "
                            "one tenant (an illegal address) can end every other tenant's work "
                            "on that GPU\n"),
            std::string::npos)
      << status.out;
  daemon_.Kill(SIGTERM);
  daemon_.Wait(10);
  const std::string log = testing::ReadFile(dir_.path() + "/missiled.log");
  EXPECT_NE(log.find("MPS: missiled and the tenants started after it are MPS clients (pipe "
                     "directory " +
                     pipe + "); MPS clients share fate"),
            std::string::npos)
      << log;
}

// mps = "off" with an MPS control daemon of the node's own (a control socket in the pipe
// directory): tenants are MPS clients all the same, and status says so.
TEST_F(CtlProcessTest, StatusSeesAnMpsDaemonMissiledDidNotStart) {
  const std::string pipe = dir_.path() + "/mps-pipe";
  ASSERT_EQ(mkdir(pipe.c_str(), 0755), 0);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string control = pipe + "/control";
  ASSERT_LT(control.size(), sizeof(addr.sun_path));
  memcpy(addr.sun_path, control.c_str(), control.size() + 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  StartDaemon("[compute]\nmps_pipe_directory = \"" + pipe + "\"\n");
  ProcessResult status = Ctl({"status"});
  close(fd);
  ASSERT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("\nMPS: on, tenants are MPS clients (control daemon in " + pipe +
                            ", not started by missiled)\nwarning: MPS clients share fate"),
            std::string::npos)
      << status.out;
  daemon_.Kill(SIGTERM);
  daemon_.Wait(10);
  const std::string log = testing::ReadFile(dir_.path() + "/missiled.log");
  EXPECT_NE(log.find("tenants run on MPS (control daemon in " + pipe + "); MPS clients share fate"),
            std::string::npos)
      << log;
}

// `missilectl check` with no daemon: one FAIL line that says what to do, exit status 1.
TEST_F(CtlProcessTest, CheckFailsWithoutTheDaemon) {
  ProcessResult check = Ctl({"check"});
  EXPECT_EQ(check.exit_code, 1) << check.out << check.err;
  EXPECT_EQ(check.out, "FAIL  socket: cannot reach missiled at " + socket_ +
                           ": no such socket; is missiled running? check 'systemctl status "
                           "missiled' (or give --socket PATH)\n");
  ProcessResult json = Ctl({"--json", "check"});
  EXPECT_EQ(json.exit_code, 1);
  EXPECT_NE(json.out.find("\"level\":\"FAIL\",\"check\":\"socket\""), std::string::npos)
      << json.out;
}

// `missilectl check` against missiled with an LS and a BE tenant: every check ok, each tenant
// named on its own line.
TEST_F(CtlProcessTest, CheckNamesTheTenantsOfARunningDaemon) {
  StartDaemon();
  Child ls, be;
  ASSERT_TRUE(ls.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("ls", "web")));
  ASSERT_TRUE(be.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "batch")));
  ASSERT_EQ(ls.WaitForLine("ready"), "ready");
  ASSERT_EQ(be.WaitForLine("ready"), "ready");
  ProcessResult check = Ctl({"check"});
  EXPECT_EQ(check.exit_code, 0) << check.out << check.err;
  EXPECT_EQ(check.out.find("warn"), std::string::npos) << check.out;
  EXPECT_EQ(check.out.find("FAIL"), std::string::npos) << check.out;
  for (const std::string& line :
       {"ok    socket: " + socket_ + ": a socket this user may connect to\n",
        std::string("ok    mps: off on every GPU: tenants are time-sliced\n"),
        std::string("ok    pacing: on, window "), std::string("ok    tenants gpu 0: 1 LS, 1 BE\n"),
        "ok    ls web (pid " + std::to_string(ls.pid()) + ", gpu 0): busy ",
        "ok    be batch (pid " + std::to_string(be.pid()) + ", gpu 0): held "}) {
    EXPECT_NE(check.out.find(line), std::string::npos) << line << "\nin:\n" << check.out;
  }
  EXPECT_NE(check.out.find("ok    daemon: missiled "), std::string::npos) << check.out;
  EXPECT_NE(check.out.find("ok    gpu 0: "), std::string::npos) << check.out;

  // The LS gone: the BE alone is a warning, not a failure.
  ls.CloseStdin();
  EXPECT_EQ(ls.Wait(), 0);
  for (int i = 0; i < 100; ++i) {
    check = Ctl({"check"});
    if (check.out.find("1 LS") == std::string::npos) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(50));
  }
  EXPECT_EQ(check.exit_code, 0) << check.out;
  EXPECT_NE(check.out.find("warn  tenants gpu 0: 0 LS, 1 BE: "), std::string::npos) << check.out;
  be.CloseStdin();
  EXPECT_EQ(be.Wait(), 0);
}

}  // namespace
}  // namespace missile
