#include "ctl_check.h"

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::cli {
namespace {

using ::testing::HasSubstr;

v1::StatusResponse OneGpu(bool pacing = true) {
  v1::StatusResponse s;
  s.set_version("0.1.0");
  s.set_uptime_s(65);
  v1::PoolStatus* pool = s.add_pools();
  pool->mutable_gpu()->set_index(0);
  pool->mutable_gpu()->set_name("NVIDIA H200");
  pool->mutable_gpu()->set_uuid("GPU-1234");
  pool->set_capacity_bytes(uint64_t{8} << 30);
  pool->set_leased_bytes(uint64_t{1} << 30);
  s.mutable_pacing()->set_pacing(pacing);
  s.mutable_pacing()->set_window_items(8);
  s.mutable_mps()->set_tenants_on_mps(false);
  return s;
}

v1::TenantInfo* AddTenant(v1::ListTenantsResponse* r, uint32_t pid, const std::string& name,
                          v1::TenantClass cls) {
  v1::TenantInfo* t = r->add_tenants();
  t->set_pid(pid);
  t->set_name(name);
  t->set_tenant_class(cls);
  t->add_usage()->set_gpu_index(0);
  v1::ComputeUse* c = t->add_compute();
  c->set_gpu_index(0);
  c->set_submissions(7);
  if (cls == v1::LATENCY_SENSITIVE) c->set_ls_busy_share(0.4);
  if (cls == v1::BEST_EFFORT) {
    c->set_held_share(0.25);
    c->set_held_ms(1500);
  }
  return t;
}

CheckInput Healthy() {
  CheckInput in;
  in.socket = "/run/missile/missiled.sock";
  in.status = OneGpu();
  v1::ListTenantsResponse tenants;
  AddTenant(&tenants, 41, "web", v1::LATENCY_SENSITIVE);
  AddTenant(&tenants, 42, "batch", v1::BEST_EFFORT);
  in.tenants = tenants;
  return in;
}

// The line of `check`, or a FAIL line saying it is missing.
CheckLine Find(const std::vector<CheckLine>& lines, const std::string& check) {
  for (const CheckLine& l : lines) {
    if (l.check == check) return l;
  }
  return {CheckLevel::kFail, "missing", "no line " + check, ""};
}

TEST(CheckTest, MissingSocketIsOneFailLineAndExitOne) {
  CheckInput in;
  in.socket = "/nowhere.sock";
  in.socket_status = absl::UnavailableError(
      "cannot reach missiled at /nowhere.sock: no such socket; is missiled running?");
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].level, CheckLevel::kFail);
  EXPECT_EQ(CheckExitCode(lines), 1);
  EXPECT_EQ(FormatCheck(lines),
            "FAIL  socket: cannot reach missiled at /nowhere.sock: no such socket; is missiled "
            "running?\n");
}

TEST(CheckTest, DaemonNotAnsweringFailsAfterTheSocket) {
  CheckInput in;
  in.socket = "/s.sock";
  in.status_error = "cannot reach missiled at /s.sock: nothing listens on the socket";
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0].level, CheckLevel::kOk);
  EXPECT_EQ(lines[1].check, "daemon");
  EXPECT_EQ(lines[1].level, CheckLevel::kFail);
  EXPECT_EQ(CheckExitCode(lines), 1);
}

TEST(CheckTest, HealthyNodeIsAllOkAndNamesEveryTenant) {
  const std::vector<CheckLine> lines = EvaluateCheck(Healthy());
  for (const CheckLine& l : lines)
    EXPECT_EQ(l.level, CheckLevel::kOk) << l.check << ": " << l.found;
  EXPECT_EQ(CheckExitCode(lines), 0);
  EXPECT_EQ(Find(lines, "daemon").found, "missiled 0.1.0 answers, up 1m05s");
  EXPECT_THAT(Find(lines, "gpu 0").found, HasSubstr("NVIDIA H200 (GPU-1234) open"));
  EXPECT_THAT(Find(lines, "mps").found, HasSubstr("off"));
  EXPECT_THAT(Find(lines, "pacing").found, HasSubstr("on, window 8 items"));
  EXPECT_EQ(Find(lines, "tenants gpu 0").found, "1 LS, 1 BE");
  EXPECT_EQ(Find(lines, "ls web (pid 41, gpu 0)").found,
            "busy 40% of about the last second, 7 work items");
  EXPECT_EQ(Find(lines, "be batch (pid 42, gpu 0)").found,
            "held 25% of about the last second, 1.5 s in all, 7 work items");
  // No reserve asked for: no reserve line.
  EXPECT_EQ(Find(lines, "be batch (pid 42, gpu 0) reserve").check, "missing");
  const std::string text = FormatCheck(lines);
  EXPECT_THAT(text, HasSubstr("ok    tenants gpu 0: 1 LS, 1 BE\n"));
}

TEST(CheckTest, BestEffortWithoutLatencySensitiveWarns) {
  CheckInput in = Healthy();
  in.tenants->mutable_tenants()->DeleteSubrange(0, 1);
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  const CheckLine l = Find(lines, "tenants gpu 0");
  EXPECT_EQ(l.level, CheckLevel::kWarn);
  EXPECT_THAT(l.found, HasSubstr("no LS tenant"));
  EXPECT_THAT(l.todo, HasSubstr("--class ls"));
  EXPECT_EQ(CheckExitCode(lines), 0);  // a warning is not a failure
  EXPECT_THAT(FormatCheck(lines), HasSubstr("warn  tenants gpu 0: 0 LS, 1 BE: "));
}

TEST(CheckTest, UnknownClassWarnsNamingThePid) {
  CheckInput in = Healthy();
  AddTenant(&*in.tenants, 43, "odd", v1::TENANT_CLASS_UNSPECIFIED);
  const CheckLine l = Find(EvaluateCheck(in), "tenants gpu 0");
  EXPECT_EQ(l.level, CheckLevel::kWarn);
  EXPECT_EQ(l.found, "1 LS, 1 BE, 1 of unknown class (pid 43)");
}

TEST(CheckTest, PacingOffWarnsAndSaysHowToTurnItOn) {
  CheckInput in = Healthy();
  in.status = OneGpu(/*pacing=*/false);
  const CheckLine l = Find(EvaluateCheck(in), "pacing");
  EXPECT_EQ(l.level, CheckLevel::kWarn);
  EXPECT_THAT(l.todo, HasSubstr("missilectl set --pacing on"));
}

TEST(CheckTest, NoGpuFails) {
  CheckInput in = Healthy();
  in.status->clear_pools();
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  EXPECT_EQ(Find(lines, "gpus").level, CheckLevel::kFail);
  EXPECT_EQ(CheckExitCode(lines), 1);
}

TEST(CheckTest, ReserveAskedButNotInForceWarns) {
  CheckInput in = Healthy();
  in.status->mutable_pacing()->set_ls_reserve_tpcs(16);
  in.tenants->mutable_tenants(1)->mutable_compute(0)->set_reserve(v1::ComputeUse::RESERVE_NOT_MPS);
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  EXPECT_EQ(Find(lines, "ls reserve").level, CheckLevel::kWarn);  // MPS is off
  const CheckLine l = Find(lines, "be batch (pid 42, gpu 0) reserve");
  EXPECT_EQ(l.level, CheckLevel::kWarn);
  EXPECT_THAT(l.found, HasSubstr("time-sliced"));

  in.status->mutable_mps()->set_tenants_on_mps(true);
  in.tenants->mutable_tenants(1)->mutable_compute(0)->set_reserve(v1::ComputeUse::RESERVE_ACTIVE);
  in.tenants->mutable_tenants(1)->mutable_compute(0)->set_reserve_tpcs(16);
  const std::vector<CheckLine> on_mps = EvaluateCheck(in);
  EXPECT_EQ(Find(on_mps, "ls reserve").check, "missing");
  EXPECT_EQ(Find(on_mps, "be batch (pid 42, gpu 0) reserve").found,
            "its kernels leave 16 TPCs free");
  EXPECT_EQ(CheckExitCode(on_mps), 0);
}

TEST(CheckTest, TenantsCallFailing) {
  CheckInput in = Healthy();
  in.tenants.reset();
  in.tenants_error = "UNAVAILABLE: gone";
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  EXPECT_EQ(lines.back().check, "tenants");
  EXPECT_EQ(lines.back().level, CheckLevel::kFail);
}

TEST(CheckTest, JsonIsOneLineWithEscapes) {
  std::vector<CheckLine> lines = {{CheckLevel::kOk, "daemon", "a \"quoted\"\nname", ""},
                                  {CheckLevel::kFail, "gpus", "none", "fix it"}};
  EXPECT_EQ(CheckToJson(lines),
            "{\"checks\":[{\"level\":\"ok\",\"check\":\"daemon\",\"found\":\"a "
            "\\\"quoted\\\"\\u000aname\",\"todo\":\"\"},{\"level\":\"FAIL\",\"check\":\"gpus\","
            "\"found\":\"none\",\"todo\":\"fix it\"}],\"exit_status\":1}\n");
}

TEST(CheckTest, TenantsInKubernetesAreNamedByPodToo) {
  CheckInput in = Healthy();
  in.tenants->mutable_tenants(0)->set_k8s_pod("web-0");
  in.tenants->mutable_tenants(0)->set_k8s_namespace("prod");
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  EXPECT_EQ(Find(lines, "ls web (pid 41, gpu 0, pod prod/web-0)").level, CheckLevel::kOk);
}

TEST(CheckTest, DaemonTextWithControlCharactersIsMadePrintable) {
  CheckInput in = Healthy();
  in.tenants->mutable_tenants(0)->set_name("we\x1b[2Jb");
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  EXPECT_EQ(Find(lines, "ls we?[2Jb (pid 41, gpu 0)").level, CheckLevel::kOk);
}

}  // namespace
}  // namespace missile::cli
