// Multi-process tests of missiled (see daemon_process_fixture.h): policy set at run time is
// kept in the state file and is back after a restart; a corrupt state file is reported and the
// daemon starts all the same.
#include <sys/stat.h>

#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

class StateTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    state_ = dir_.path() + "/state/policy.toml";
    mkdir((dir_.path() + "/state").c_str(), 0755);
    extra_daemon_ = "state_file = \"" + state_ + "\"\n";
    daemon_log_ = dir_.path() + "/missiled.log";
  }

  // The tenant named `name` as the daemon lists it (fails the test when there is none).
  v1::TenantInfo TenantNamed(const std::string& name) {
    v1::ListTenantsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const v1::TenantInfo& t : resp.tenants()) {
      if (t.name() == name) return t;
    }
    ADD_FAILURE() << "no tenant named " << name;
    return v1::TenantInfo();
  }

  v1::ClassPolicy ClassOf(v1::TenantClass cls) {
    const v1::StatusResponse status = Status();
    for (const v1::ClassPolicy& c : status.classes()) {
      if (c.tenant_class() == cls) return c;
    }
    ADD_FAILURE() << "no class " << cls;
    return v1::ClassPolicy();
  }

  std::string Log() { return testing::ReadFile(daemon_log_); }

  std::string state_;
};

// long: one scenario across a restart: the policy set before it, checked after it.
TEST_F(StateTest, PolicySetAtRunTimeIsBackAfterARestart) {
  StartDaemon();
  {
    Child web;
    ASSERT_TRUE(web.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "web")));
    ASSERT_EQ(web.WaitForLine("ready"), "ready");
    ProcessResult moved = Ctl({"set", "--name", "web", "--class-to", "ls", "--weight", "77",
                               "--quota", "64MiB"});
    ASSERT_EQ(moved.exit_code, 0) << moved.err;
    ProcessResult be = Ctl({"set", "--class", "be", "--priority", "7", "--quota", "256MiB"});
    ASSERT_EQ(be.exit_code, 0) << be.err;
    // Latency budgets: web's own and the LS class's.
    ProcessResult budget = Ctl({"set", "--name", "web", "--budget-pct", "175"});
    ASSERT_EQ(budget.exit_code, 0) << budget.err;
    budget = Ctl({"set", "--class", "ls", "--budget-pct", "250"});
    ASSERT_EQ(budget.exit_code, 0) << budget.err;
    web.CloseStdin();
    web.Wait();
  }
  const std::string kept = testing::ReadFile(state_);
  EXPECT_NE(kept.find("name = \"web\""), std::string::npos) << kept;
  EXPECT_NE(kept.find("uid = " + std::to_string(getuid())), std::string::npos) << kept;
  // Every change is logged with who made it and the values before and after.
  const std::string log = Log();
  EXPECT_NE(log.find("policy changed by uid " + std::to_string(getuid()) + " pid "),
            std::string::npos) << log;
  EXPECT_NE(log.find("class be -> ls"), std::string::npos) << log;
  EXPECT_NE(log.find("priority 10 -> -10, weight "), std::string::npos) << log;
  EXPECT_NE(log.find(" -> 77, quota "), std::string::npos) << log;
  EXPECT_NE(log.find("class be defaults changed by uid"), std::string::npos) << log;
  EXPECT_NE(log.find("priority 10 -> 7"), std::string::npos) << log;
  EXPECT_NE(log.find("budget none -> 175%"), std::string::npos) << log;
  EXPECT_NE(log.find("class ls defaults changed by uid"), std::string::npos) << log;
  EXPECT_NE(log.find("budget none -> 250%"), std::string::npos) << log;

  StopDaemon();
  ASSERT_EQ(daemon_exit_, 0);
  StartDaemon();
  // The class defaults are back before any tenant registers.
  v1::ClassPolicy be = ClassOf(v1::BEST_EFFORT);
  EXPECT_EQ(be.priority(), 7);
  EXPECT_EQ(be.tenant_quota_bytes(), 256 * kMiB);
  EXPECT_EQ(ClassOf(v1::LATENCY_SENSITIVE).priority(), -10) << "only the LS budget was changed";
  EXPECT_EQ(ClassOf(v1::LATENCY_SENSITIVE).budget_pct(), 250u);
  EXPECT_EQ(ClassOf(v1::BEST_EFFORT).budget_pct(), 0u);
  // A new process with the same name and uid gets the tenant's policy back, whatever class
  // it asks for; another name gets the (restored) class defaults.
  Child web, other;
  ASSERT_TRUE(web.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "web")));
  ASSERT_EQ(web.WaitForLine("ready"), "ready");
  ASSERT_TRUE(other.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "other")));
  ASSERT_EQ(other.WaitForLine("ready"), "ready");
  v1::TenantInfo w = TenantNamed("web");
  EXPECT_EQ(w.tenant_class(), v1::LATENCY_SENSITIVE);
  EXPECT_EQ(w.weight(), 77u);
  ASSERT_GT(w.usage_size(), 0);
  EXPECT_EQ(w.usage(0).quota_bytes(), 64 * kMiB);
  EXPECT_EQ(w.budget_pct(), 175u);
  ASSERT_GT(w.compute_size(), 0);
  EXPECT_EQ(w.compute(0).budget_pct(), 175u);
  v1::TenantInfo o = TenantNamed("other");
  EXPECT_EQ(o.tenant_class(), v1::BEST_EFFORT);
  EXPECT_EQ(o.priority(), 7);
  EXPECT_NE(Log().find("policy kept for this name and uid"), std::string::npos) << Log();
  web.CloseStdin();
  other.CloseStdin();
  web.Wait();
  other.Wait();
}

TEST_F(StateTest, ACorruptStateFileIsReportedAndTheDaemonStarts) {
  std::ofstream(state_) << "version = 1\n[[tenants]]\nname = \"web\"\nuid = \"root\"\n";
  StartDaemon();
  EXPECT_EQ(Status().pools_size(), 1) << "the daemon serves";
  const std::string log = Log();
  EXPECT_NE(log.find("missiled error: policy state file ignored, starting with the "
                     "configuration's policy"),
            std::string::npos) << log;
  EXPECT_NE(log.find(state_ + ": line 2: a tenant needs a name and a class"), std::string::npos)
      << log;
  EXPECT_NE(log.find("; moved to " + state_ + ".bad"), std::string::npos) << log;
  EXPECT_NE(testing::ReadFile(state_ + ".bad").find("uid = \"root\""), std::string::npos)
      << "the bad file is kept for the administrator";
  EXPECT_EQ(ClassOf(v1::BEST_EFFORT).priority(), 10) << "the configuration's policy";
  // The next change replaces the file with a good one.
  ProcessResult set = Ctl({"set", "--class", "be", "--priority", "3"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  const std::string now = testing::ReadFile(state_);
  EXPECT_NE(now.find("[classes.be]\npriority = 3\n"), std::string::npos) << now;
  EXPECT_EQ(now.find("uid = \"root\""), std::string::npos) << now;
}

TEST_F(StateTest, AStateFileThatCannotBeWrittenLeavesTheChangeInForce) {
  extra_daemon_ = "state_file = \"" + dir_.path() + "/no-such-dir/policy.toml\"\n";
  StartDaemon();
  ProcessResult set = Ctl({"set", "--class", "be", "--priority", "4"});
  ASSERT_EQ(set.exit_code, 0) << set.err;
  EXPECT_EQ(ClassOf(v1::BEST_EFFORT).priority(), 4);
  EXPECT_NE(Log().find("policy state file not written"), std::string::npos) << Log();
}

}  // namespace
}  // namespace missile::process_test
