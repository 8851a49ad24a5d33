// The metrics snapshot and its exposition: every family documented is written, and the values
// come from the daemon's state (a DaemonCore over a fake BlockSource, this process a tenant).
#include "metrics_snapshot.h"

#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "core.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "testing/vram_pool_test_util.h"

namespace missile::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
using pool_test::FakeSource;
using pool_test::kBe;
using pool_test::kG;
using pool_test::kLs;
using pool_test::MakePool;
using pool_test::OneColourPolicy;
using pool_test::PoolSetup;

Gpu FakeGpu(FakeSource* source) {
  Gpu gpu;
  gpu.info.uuid = "GPU-00000000-0000-0000-0000-000000000001";
  gpu.info.name = "fake";
  gpu.info.total_bytes = 16 * kG;
  gpu.info.granularity = kG;
  PoolSetup setup;
  setup.ls = {4 * kG, 8 * kG};
  gpu.quota[ClassIndex(kLs)] = setup.ls;
  gpu.quota[ClassIndex(kBe)] = setup.be;
  gpu.pool = MakePool(source, OneColourPolicy(), setup);
  return gpu;
}

TEST(MetricsSnapshotTest, ValuesComeFromTheDaemon) {
  FakeSource source;
  std::vector<Gpu> gpus;
  gpus.push_back(FakeGpu(&source));
  {
    DaemonCore core(CoreOptions{}, std::move(gpus));
    ASSERT_TRUE(core.Start().ok());
    const PeerCredentials me{getpid(), 1000, 1000};
    absl::StatusOr<SessionInfo> s =
        core.Register(me, "web.1", kLs, 0, K8sIdentity{"web-5f7c9-abcde", "prod", "server"});
    ASSERT_TRUE(s.ok()) << s.status();
    ASSERT_TRUE(core.Allocate(me, s->id, 0, /*single=*/true, 2 * kG).ok());
    EXPECT_FALSE(core.Allocate(me, s->id, 0, /*single=*/true, 4 * kG).ok());  // over quota

    MetricsSnapshot snap = TakeMetricsSnapshot(core, "1.2.3");
    EXPECT_EQ(snap.sessions_opened, 1u);
    EXPECT_EQ(snap.sessions_ended, 0u);
    ASSERT_EQ(snap.gpus.size(), 1u);
    EXPECT_EQ(snap.gpus[0].leased_bytes, 2 * kG);
    ASSERT_EQ(snap.tenants.size(), 1u);
    EXPECT_EQ(snap.tenants[0].used_bytes, 2 * kG);
    EXPECT_EQ(snap.tenants[0].quota_bytes, 4 * kG);
    EXPECT_EQ(snap.tenants[0].allocations, 1u);
    EXPECT_EQ(snap.tenants[0].refusals, 1u);

    absl::StatusOr<std::string> text = FormatMetrics(snap);
    ASSERT_TRUE(text.ok()) << text.status();
    const std::string uuid = "GPU-00000000-0000-0000-0000-000000000001";
    const std::string key =
        "name=\"web.1\",class=\"ls\",replica=\"0\",gpu=\"0\",gpu_uuid=\"" + uuid + "\"";
    const std::string labels = "{" + key + "}";
    // The pid, the session and the Kubernetes identity only on the info series.
    EXPECT_THAT(*text,
                HasSubstr("missile_tenant_info{" + key + ",pid=\"" + std::to_string(getpid()) +
                          "\",session=\"" + std::to_string(s->id) +
                          "\",pod=\"web-5f7c9-abcde\",namespace=\"prod\","
                          "container=\"server\"} 1\n"));
    EXPECT_THAT(*text, Not(HasSubstr("missile_tenant_used_bytes{name=\"web.1\",class=\"ls\",pid")));
    EXPECT_EQ(text->find("pod="), text->rfind("pod="));  // on no other series
    EXPECT_THAT(*text, HasSubstr("missile_build_info{version=\"1.2.3\"} 1\n"));
    EXPECT_THAT(*text, HasSubstr("missile_sessions_opened_total 1\n"));
    EXPECT_THAT(*text, HasSubstr("missile_tenant_used_bytes" + labels + " 4194304\n"));
    EXPECT_THAT(*text, HasSubstr("missile_tenant_quota_bytes" + labels + " 8388608\n"));
    EXPECT_THAT(*text, HasSubstr("missile_tenant_allocations_total" + labels + " 1\n"));
    EXPECT_THAT(*text, HasSubstr("missile_tenant_allocations_refused_total" + labels + " 1\n"));
    EXPECT_THAT(*text, HasSubstr("missile_gpu_pool_leased_bytes{gpu=\"0\",gpu_uuid=\"" + uuid +
                                 "\"} 4194304\n"));
    // No arbiter and no pacing on this GPU: no PCIe or pacing samples.
    EXPECT_THAT(*text, Not(HasSubstr("missile_tenant_pcie_bytes_total{")));
    EXPECT_THAT(*text, Not(HasSubstr("missile_gpu_pacing_tenants{")));

    core.EndSession(s->id, "test");
    snap = TakeMetricsSnapshot(core, "1.2.3");
    EXPECT_EQ(snap.sessions_ended, 1u);
    EXPECT_EQ(snap.sessions_active, 0u);
    EXPECT_TRUE(snap.tenants.empty());
    core.Stop();
  }
}

TEST(MetricsSnapshotTest, WritesEveryFamilyWithPcieAndPacing) {
  MetricsSnapshot snap;
  snap.version = "v";
  snap.start_time_seconds = 1796000000.5;
  snap.gpus.push_back({0, "GPU-x", 10, 8, 6, 2, 0, 1,
                       PacingSummary{1, 2, true, 1'500'000'000, 250'000'000, 0.75, 0.125}});
  TenantMetrics t;
  t.name = "batch";
  t.cls = "be";
  t.pid = 42;
  t.gpu_uuid = "GPU-x";
  PcieUse use;
  use.bytes[0] = 1 << 20;
  use.waits[0].Observe(30'000);       // 30 us: the 50 us bucket
  use.waits[0].Observe(900'000'000);  // 0.9 s: above every bound
  t.pcie = use;
  t.pacing = TenantPacing{5, 0.5, 0.25, 0, 0.125, 2.5};
  snap.tenants.push_back(t);
  absl::StatusOr<std::string> text = FormatMetrics(snap);
  ASSERT_TRUE(text.ok()) << text.status();
  const std::string h2d =
      "name=\"batch\",class=\"be\",replica=\"0\",gpu=\"0\",gpu_uuid=\"GPU-x\",direction=\"h2d\"";
  EXPECT_THAT(*text, HasSubstr("missile_tenant_pcie_bytes_total{" + h2d + "} 1048576\n"));
  EXPECT_THAT(*text,
              HasSubstr("missile_tenant_pcie_grant_wait_seconds_bucket{" + h2d + ",le=\"2.5e-05\"} 0\n"));
  EXPECT_THAT(*text,
              HasSubstr("missile_tenant_pcie_grant_wait_seconds_bucket{" + h2d + ",le=\"5e-05\"} 1\n"));
  EXPECT_THAT(*text,
              HasSubstr("missile_tenant_pcie_grant_wait_seconds_bucket{" + h2d + ",le=\"+Inf\"} 2\n"));
  EXPECT_THAT(*text, HasSubstr("missile_tenant_pcie_grant_wait_seconds_count{" + h2d + "} 2\n"));
  EXPECT_THAT(*text, HasSubstr("missile_tenant_pacing_held_seconds_total{name=\"batch\",class="
                               "\"be\",replica=\"0\",gpu=\"0\",gpu_uuid=\"GPU-x\"} 0.5\n"));
  EXPECT_THAT(*text, HasSubstr("missile_tenant_pacing_held_ratio{name=\"batch\",class="
                               "\"be\",replica=\"0\",gpu=\"0\",gpu_uuid=\"GPU-x\"} 0.125\n"));
  // The GPU's pacing domain.
  EXPECT_THAT(*text, HasSubstr("missile_gpu_pacing_tenants{gpu=\"0\",gpu_uuid=\"GPU-x\",class="
                               "\"ls\"} 1\n"));
  EXPECT_THAT(*text, HasSubstr("missile_gpu_pacing_tenants{gpu=\"0\",gpu_uuid=\"GPU-x\",class="
                               "\"be\"} 2\n"));
  EXPECT_THAT(*text, HasSubstr("missile_gpu_pacing_ls_busy{gpu=\"0\",gpu_uuid=\"GPU-x\"} 1\n"));
  const std::string gpu = "{gpu=\"0\",gpu_uuid=\"GPU-x\"} ";
  EXPECT_THAT(*text, HasSubstr("missile_gpu_ls_busy_seconds_total" + gpu + "1.5\n"));
  EXPECT_THAT(*text, HasSubstr("missile_gpu_be_busy_seconds_total" + gpu + "0.25\n"));
  EXPECT_THAT(*text, HasSubstr("missile_gpu_ls_busy_ratio" + gpu + "0.75\n"));
  EXPECT_THAT(*text, HasSubstr("missile_gpu_be_busy_ratio" + gpu + "0.125\n"));
  EXPECT_THAT(*text, HasSubstr("missile_tenant_busy_seconds_total{name=\"batch\",class="
                               "\"be\",replica=\"0\",gpu=\"0\",gpu_uuid=\"GPU-x\"} 2.5\n"));
  EXPECT_THAT(*text, HasSubstr("\nmissile_start_time_seconds 1796000000.5\n"));
  // Fractions are _ratio, as Prometheus names them; no family is named _share any more.
  EXPECT_THAT(*text, Not(HasSubstr("_share")));
  // Every family has its HELP and TYPE lines and at least one sample.
  for (const char* family :
       {"missile_build_info", "missile_uptime_seconds", "missile_sessions_opened_total",
        "missile_sessions_ended_total", "missile_sessions_active", "missile_gpu_pool_capacity_bytes",
        "missile_gpu_pool_created_bytes", "missile_gpu_pool_leased_bytes",
        "missile_gpu_pool_cached_bytes", "missile_gpu_pool_released_mapped_bytes",
        "missile_gpu_colours", "missile_gpu_pacing_tenants", "missile_gpu_pacing_ls_busy",
        "missile_tenant_info", "missile_tenant_used_bytes",
        "missile_tenant_quota_bytes", "missile_tenant_allocations_total",
        "missile_tenant_allocations_refused_total", "missile_tenant_pcie_bytes_total",
        "missile_tenant_pcie_grant_wait_seconds", "missile_tenant_pacing_submissions_total",
        "missile_tenant_pacing_held_seconds_total", "missile_tenant_pacing_gpu_seconds_total",
        "missile_tenant_ls_busy_ratio", "missile_tenant_pacing_held_ratio",
        "missile_start_time_seconds", "missile_gpu_ls_busy_seconds_total",
        "missile_gpu_be_busy_seconds_total", "missile_gpu_ls_busy_ratio",
        "missile_gpu_be_busy_ratio", "missile_tenant_busy_seconds_total",
        "missile_tenant_ls_budget_ratio", "missile_tenant_ls_stretch_ratio",
        "missile_tenant_ls_be_time_ratio", "missile_tenant_ls_be_window_scale"}) {
    EXPECT_THAT(*text, HasSubstr(std::string("# HELP ") + family + " ")) << family;
    EXPECT_THAT(*text, HasSubstr(std::string("# TYPE ") + family + " ")) << family;
    EXPECT_THAT(*text, HasSubstr(std::string("\n") + family)) << family;
  }
}

TenantMetrics Tenant(const std::string& name, uint64_t session, uint32_t gpu = 0) {
  TenantMetrics t;
  t.name = name;
  t.cls = "ls";
  t.session = session;
  t.gpu = gpu;
  return t;
}

std::vector<uint32_t> Replicas(const std::vector<TenantMetrics>& tenants) {
  std::vector<uint32_t> out;
  for (const TenantMetrics& t : tenants) out.push_back(t.replica);
  return out;
}

TEST(TenantReplicasTest, ARestartKeepsTheSeriesAndTwoLiveTenantsNeverShareOne) {
  TenantReplicas r;
  // Two live sessions of "web" and one of "db"; "web" on two GPUs.
  std::vector<TenantMetrics> t = {Tenant("web", 1), Tenant("web", 1, 1), Tenant("web", 2),
                                  Tenant("db", 3)};
  r.Assign(&t);
  EXPECT_THAT(Replicas(t), ::testing::ElementsAre(0, 0, 1, 0));
  // Session 1 ends, 4 (its restart) comes: 2 keeps its number, 4 takes the free one.
  t = {Tenant("web", 2), Tenant("db", 3), Tenant("web", 4)};
  r.Assign(&t);
  EXPECT_THAT(Replicas(t), ::testing::ElementsAre(1, 0, 0));
  // A BE "web" comes: its own numbers.
  t.push_back(Tenant("web", 5));
  t[3].cls = "be";
  r.Assign(&t);
  EXPECT_THAT(Replicas(t), ::testing::ElementsAre(1, 0, 0, 0));
  // Session 4 becomes BE (missilectl set), onto the number 5 has: one of them moves.
  t[2].cls = "be";
  r.Assign(&t);
  EXPECT_THAT(Replicas(t), ::testing::ElementsAre(1, 0, 0, 1));
  MetricsSnapshot snap;
  snap.tenants = t;
  EXPECT_TRUE(FormatMetrics(snap).ok());
}

TEST(MetricsSnapshotTest, TwoLiveTenantsOfOneNameAreTwoSeries) {
  FakeSource source;
  std::vector<Gpu> gpus;
  gpus.push_back(FakeGpu(&source));
  DaemonCore core(CoreOptions{}, std::move(gpus));
  ASSERT_TRUE(core.Start().ok());
  // Two processes (one session per process): this one and its parent.
  const PeerCredentials me{getpid(), 1000, 1000};
  const PeerCredentials parent{getppid(), 1000, 1000};
  absl::StatusOr<SessionInfo> a = core.Register(me, "web", kLs, 0);
  absl::StatusOr<SessionInfo> b = core.Register(parent, "web", kLs, 0);
  ASSERT_TRUE(a.ok() && b.ok());
  ASSERT_NE(a->id, b->id);
  ASSERT_TRUE(core.Allocate(me, a->id, 0, /*single=*/true, kG).ok());
  ASSERT_TRUE(core.Allocate(parent, b->id, 0, /*single=*/true, kG).ok());
  absl::StatusOr<std::string> text = FormatMetrics(TakeMetricsSnapshot(core, "v"));
  ASSERT_TRUE(text.ok()) << text.status();
  EXPECT_THAT(*text,
              HasSubstr("missile_tenant_used_bytes{name=\"web\",class=\"ls\",replica=\"0\""));
  EXPECT_THAT(*text,
              HasSubstr("missile_tenant_used_bytes{name=\"web\",class=\"ls\",replica=\"1\""));
  core.Stop();
}

}  // namespace
}  // namespace missile::daemon
