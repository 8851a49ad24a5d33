#include "ctl_format.h"

#include <cmath>
#include <string>

#include "gmock/gmock.h"
#include "google/protobuf/util/json_util.h"
#include "gtest/gtest.h"
#include "missile/common/size.h"

namespace missile::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

v1::PoolStatus* AddPool(v1::StatusResponse& s, uint32_t index, const std::string& uuid) {
  v1::PoolStatus* p = s.add_pools();
  p->mutable_gpu()->set_index(index);
  p->mutable_gpu()->set_name("NVIDIA H200");
  p->mutable_gpu()->set_uuid(uuid);
  p->mutable_gpu()->set_total_bytes(140 * kGiB);
  p->mutable_gpu()->set_granularity_bytes(2 * kMiB);
  p->mutable_gpu()->set_colours(1);
  p->set_capacity_bytes(120 * kGiB);
  p->set_created_bytes(40 * kGiB);
  p->set_leased_bytes(30 * kGiB);
  p->set_cached_bytes(10 * kGiB);
  p->set_tenants(2);
  return p;
}

v1::StatusResponse TwoGpuStatus() {
  v1::StatusResponse s;
  s.set_version("0.1.0");
  s.set_uptime_s(3 * 3600 + 4 * 60 + 5);
  s.set_tenants(3);
  v1::PoolStatus* p0 = AddPool(s, 0, "GPU-aaaa");
  p0->mutable_gpu()->set_colours(2);
  const char* roles[] = {"ls", "be"};
  for (uint32_t c = 0; c < 2; ++c) {
    v1::ColourUse* u = p0->add_colours();
    u->set_colour(c);
    u->set_capacity_bytes(20 * kGiB);
    u->set_used_bytes((c + 1) * kGiB);
    u->set_reserved_for(roles[c]);
  }
  v1::PoolStatus* p1 = AddPool(s, 1, "GPU-bbbb");
  p1->add_colours()->set_reserved_for("shared");
  p1->set_colour_note("no channel isolation on this GPU at 2 MiB: every block spans all channels");
  v1::ClassPolicy* ls = s.add_classes();
  ls->set_tenant_class(v1::LATENCY_SENSITIVE);
  ls->set_priority(-5);
  ls->set_weight(3121);
  ls->set_tenant_quota_bytes(8 * kGiB);
  ls->set_class_quota_bytes(64 * kGiB);
  v1::ClassPolicy* be = s.add_classes();
  be->set_tenant_class(v1::BEST_EFFORT);
  be->set_weight(1024);
  be->set_tenant_quota_bytes(4 * kGiB);
  be->set_class_quota_bytes(32 * kGiB);
  return s;
}

TEST(FormatTableTest, AlignsColumnsWithoutTrailingSpaces) {
  EXPECT_EQ(FormatTable({{"A", "BB", "C"}, {"long", "x", "y"}, {"z"}}),
            "A     BB  C\n"
            "long  x   y\n"
            "z\n");
  EXPECT_EQ(FormatTable({}), "");
}

TEST(FormatDurationTest, Units) {
  EXPECT_EQ(FormatDuration(0), "0s");
  EXPECT_EQ(FormatDuration(59), "59s");
  EXPECT_EQ(FormatDuration(60), "1m00s");
  EXPECT_EQ(FormatDuration(12 * 60 + 5), "12m05s");
  EXPECT_EQ(FormatDuration(3 * 3600 + 4 * 60 + 59), "3h04m");
  EXPECT_EQ(FormatDuration(2 * 86400 + 3 * 3600), "2d03h");
}

TEST(FormatStatusTest, TwoGpus) {
  EXPECT_EQ(FormatStatus(TwoGpuStatus()),
            "missiled 0.1.0, up 3h04m, 3 tenant(s), 2 GPU(s)\n"
            "\n"
            "GPU 0: NVIDIA H200 (GPU-aaaa), 140.0 GiB, blocks of 2.0 MiB\n"
            "  pool: capacity 120.0 GiB, created 40.0 GiB, leased 30.0 GiB, cached 10.0 GiB\n"
            "  tenants: 2\n"
            "  colours: 2\n"
            "    COLOUR  CAPACITY  USED     RESERVED\n"
            "    0       20.0 GiB  1.0 GiB  ls\n"
            "    1       20.0 GiB  2.0 GiB  be\n"
            "\n"
            "GPU 1: NVIDIA H200 (GPU-bbbb), 140.0 GiB, blocks of 2.0 MiB\n"
            "  pool: capacity 120.0 GiB, created 40.0 GiB, leased 30.0 GiB, cached 10.0 GiB\n"
            "  tenants: 2\n"
            "  colours: 1 (no channel isolation on this GPU at 2 MiB: every block spans all "
            "channels)\n"
            "\n"
            "CLASS  PRIO  WEIGHT  TENANT QUOTA  CLASS QUOTA  BUDGET\n"
            "ls     -5    3121    8.0 GiB       64.0 GiB     -\n"
            "be     0     1024    4.0 GiB       32.0 GiB     -\n");
}

// The LS class's latency budget: its own, else the pacing policy's, which it follows.
TEST(FormatStatusTest, TheLsClassShowsItsBudget) {
  v1::StatusResponse s = TwoGpuStatus();
  s.mutable_pacing()->set_pacing(true);
  s.mutable_pacing()->set_ls_budget_pct(120);
  EXPECT_THAT(FormatStatus(s), HasSubstr("ls     -5    3121    8.0 GiB       64.0 GiB     "
                                         "120% (pacing)\n"
                                         "be     0     1024    4.0 GiB       32.0 GiB     -\n"));
  s.mutable_classes(0)->set_budget_pct(250);
  EXPECT_THAT(FormatStatus(s), HasSubstr("ls     -5    3121    8.0 GiB       64.0 GiB     250%\n"));
}

TEST(FormatStatusTest, OneColourNoteIsOnTheColoursLine) {
  v1::StatusResponse s;
  s.set_version("0.1.0");
  v1::PoolStatus* p = AddPool(s, 0, "GPU-cccc");
  p->add_colours()->set_reserved_for("shared");
  p->set_colour_note("one colour: this GPU offers no channel isolation at 2 MiB");
  std::string out = FormatStatus(s);
  EXPECT_THAT(out, HasSubstr("\n  colours: 1 (one colour: this GPU offers no channel isolation "
                             "at 2 MiB)\n"));
  EXPECT_THAT(out, Not(HasSubstr("COLOUR ")));
  EXPECT_THAT(out, Not(HasSubstr("CLASS")));  // no class policies in this response
}

TEST(FormatStatusTest, MemoryThatMayStillBeMappedIsShown) {
  v1::StatusResponse s;
  s.set_version("0.1.0");
  v1::PoolStatus* p = AddPool(s, 0, "GPU-dddd");
  p->set_released_mapped_bytes(6 * kMiB);
  EXPECT_THAT(FormatStatus(s), HasSubstr("  pool: capacity 120.0 GiB, created 40.0 GiB, leased "
                                         "30.0 GiB, cached 10.0 GiB, released (may still be "
                                         "mapped) 6.0 MiB\n"));
}

TEST(FormatStatusTest, ControlCharactersFromTheDaemonAreMasked) {
  v1::StatusResponse s;
  s.set_version("1.0\x1b[31m");
  EXPECT_THAT(FormatStatus(s), HasSubstr("missiled 1.0?[31m,"));
}

TEST(FormatStatusTest, SaysWhetherTenantsRunOnMpsAndWarnsThatTheyShareFate) {
  v1::StatusResponse s;
  s.set_version("1.0");
  s.mutable_mps()->set_pipe_directory("/tmp/nvidia-mps");
  EXPECT_THAT(FormatStatus(s), HasSubstr("\nMPS: off, tenants are time-sliced\n"));
  EXPECT_THAT(FormatStatus(s), Not(HasSubstr("share fate")));
  s.mutable_mps()->set_tenants_on_mps(true);
  s.mutable_mps()->set_managed_by_missiled(true);
  std::string out = FormatStatus(s);
  EXPECT_THAT(out, HasSubstr("\nMPS: on, tenants are MPS clients (control daemon in "
                             "/tmp/nvidia-mps, compute.mps = start)\n"
                             "warning: MPS clients share fate: a fault in one tenant (an illegal "
                             "address) can end every other tenant's work on that GPU\n"));
  s.mutable_mps()->set_managed_by_missiled(false);
  EXPECT_THAT(FormatStatus(s), HasSubstr("not started by missiled)"));
  // A daemon from before MpsStatus sends none: nothing is claimed either way.
  s.clear_mps();
  EXPECT_THAT(FormatStatus(s), Not(HasSubstr("MPS")));
}

v1::ListTenantsResponse Tenants() {
  v1::ListTenantsResponse r;
  v1::TenantInfo* b = r.add_tenants();
  b->set_pid(4321);
  b->set_name("batch-train");
  b->set_tenant_class(v1::BEST_EFFORT);
  b->set_priority(10);
  b->set_weight(110);
  b->set_connected_s(2 * 86400 + 3600);
  for (uint32_t g = 0; g < 2; ++g) {
    v1::Usage* u = b->add_usage();
    u->set_gpu_index(g);
    u->set_used_bytes(g == 0 ? 1288490189 : 0);  // 1.2 GiB
    u->set_quota_bytes(8 * kGiB);
  }
  v1::TenantInfo* a = r.add_tenants();
  a->set_pid(77);
  a->set_name("infer");
  a->set_tenant_class(v1::LATENCY_SENSITIVE);
  a->set_priority(-5);
  a->set_weight(3121);
  a->set_connected_s(65);
  v1::Usage* u = a->add_usage();
  u->set_gpu_index(0);
  u->set_used_bytes(512 * kMiB);
  u->set_quota_bytes(16 * kGiB);
  v1::PcieUse* p = a->add_pcie();
  p->set_gpu_index(0);
  p->set_h2d_bytes(3 * kGiB);
  p->set_d2h_bytes(64 * kMiB);
  p->set_h2d_share(0.25);
  p->set_d2h_share(1.0);
  v1::ComputeUse* c = a->add_compute();
  c->set_gpu_index(0);
  c->set_submissions(9000);
  c->set_ls_busy_share(0.404);
  v1::ComputeUse* held = b->add_compute();
  held->set_gpu_index(0);
  held->set_submissions(120000);
  held->set_held_ms(1234.5);
  held->set_held_count(800);
  held->set_held_share(0.35);
  held->set_inflight(3);
  held->set_gpu_ms(56000);
  return r;
}

// A tenant on two GPUs gets two rows, each complete, so that grep and awk see every column.
TEST(FormatTenantsTest, OneRowPerTenantAndGpuSortedByPid) {
  EXPECT_EQ(FormatTenants(Tenants()),
            "PID   NAME         CLASS  PRIO  WEIGHT  GPU  USED/QUOTA            "
            "PCIE H2D / D2H (SHARE)           HELD         IN FLIGHT  LS BUSY  AGE\n"
            "77    infer        ls     -5    3121    0    512.0 MiB / 16.0 GiB  "
            "3.0 GiB (25%) / 64.0 MiB (100%)  -            -          40%      1m05s\n"
            "4321  batch-train  be     10    110     0    1.2 GiB / 8.0 GiB     "
            "-                                1.2 s (35%)  3          -        2d01h\n"
            "4321  batch-train  be     10    110     1    0 B / 8.0 GiB         "
            "-                                -            -          -        2d01h\n");
}

// An LS tenant with a latency budget: what the controller measured, after its busy share.
TEST(FormatTenantsTest, AnLsBudgetFollowsItsBusyShare) {
  v1::ListTenantsResponse r = Tenants();
  v1::TenantInfo* ls = r.mutable_tenants(0);
  if (ls->tenant_class() != v1::LATENCY_SENSITIVE) ls = r.mutable_tenants(1);
  ASSERT_EQ(ls->tenant_class(), v1::LATENCY_SENSITIVE);
  v1::ComputeUse* c = ls->mutable_compute(0);
  c->set_budget_pct(125);
  c->set_budget(v1::ComputeUse::BUDGET_SPENDING);
  c->set_stretch(1.184);
  c->set_be_share(0.2);
  EXPECT_NE(FormatTenants(r).find("40%; budget 125%: stretch 1.18, BE share 20%"),
            std::string::npos) << FormatTenants(r);
  c->set_budget(v1::ComputeUse::BUDGET_UNMET);
  c->set_be_share(0);
  EXPECT_NE(FormatTenants(r).find("40%; budget 125% unmet: stretch 1.18 with no BE share"),
            std::string::npos) << FormatTenants(r);
  c->set_budget(v1::ComputeUse::BUDGET_LEARNING);
  EXPECT_NE(FormatTenants(r).find("40%; budget 125% learning"), std::string::npos);
  // What the newest measured period took, against what it was measured with.
  c->set_period_ms(1.314);
  c->set_alone_ms(1.118);
  c->set_budget(v1::ComputeUse::BUDGET_SPENDING);
  c->set_be_share(0.2);
  EXPECT_NE(FormatTenants(r).find(
                "40%; budget 125%: stretch 1.18, BE share 20%, last 1.31 ms of 1.12 alone"),
            std::string::npos) << FormatTenants(r);
  EXPECT_EQ(FormatTenants(r).find("on MPS"), std::string::npos);
  // An MPS client's alone durations are its work alone on MPS: the yardstick is named.
  c->set_mps_client(true);
  EXPECT_NE(FormatTenants(r).find("BE share 20%, last 1.31 ms of 1.12 alone on MPS"),
            std::string::npos) << FormatTenants(r);
  c->set_mps_client(false);
  c->set_budget(v1::ComputeUse::BUDGET_UNMET);
  EXPECT_NE(FormatTenants(r).find(
                "unmet: stretch 1.18 with no BE share, last 1.31 ms of 1.12 alone"),
            std::string::npos) << FormatTenants(r);
  c->set_budget_pct(100);
  EXPECT_EQ(FormatTenants(r).find("budget"), std::string::npos);
}

TEST(FormatTenantsTest, GpuWorkPerGpu) {
  v1::ListTenantsResponse r;
  v1::TenantInfo* be = r.add_tenants();
  be->set_pid(1);
  be->set_tenant_class(v1::BEST_EFFORT);
  for (uint32_t g = 0; g < 2; ++g) {
    v1::ComputeUse* c = be->add_compute();
    c->set_gpu_index(g);
    c->set_held_ms(g == 0 ? 0 : 35.4);
    c->set_held_share(g == 0 ? 0 : 0.021);
    c->set_inflight(g + 1);
    c->set_ls_busy_share(0.9);  // not an LS: not shown
  }
  std::string out = FormatTenants(r);
  EXPECT_THAT(out, HasSubstr("\n1          be     0     0       0    -           -  "
                             "                     0 ms (0%)   1          -        0s\n"
                             "1          be     0     0       1    -           -  "
                             "                     35 ms (2%)  2          -        0s\n"));
  EXPECT_THAT(out, Not(HasSubstr("90%")));
  // The LS reserve of TPCs, or why there is none.
  be->mutable_compute(0)->set_reserve(v1::ComputeUse::RESERVE_ACTIVE);
  be->mutable_compute(0)->set_reserve_tpcs(8);
  be->mutable_compute(1)->set_reserve(v1::ComputeUse::RESERVE_UNAVAILABLE);
  out = FormatTenants(r);
  EXPECT_THAT(out, HasSubstr("0 ms (0%); reserve 8 TPCs"));
  EXPECT_THAT(out, HasSubstr("35 ms (2%); no reserve (masks unavailable)"));
  be->mutable_compute(1)->set_reserve(v1::ComputeUse::RESERVE_NOT_MPS);
  EXPECT_THAT(FormatTenants(r), HasSubstr("; no reserve (not MPS)"));
}

// An LS tenant's latency budget after its busy share: the one in force, "(own)" when it is the
// tenant's own, which shows even at 100 %.
TEST(FormatTenantsTest, AnLsTenantsBudgetAndWhetherItIsItsOwn) {
  v1::ListTenantsResponse r = Tenants();
  v1::TenantInfo* infer = r.mutable_tenants(1);
  v1::ComputeUse* c = infer->mutable_compute(0);
  c->set_budget_pct(100);
  EXPECT_THAT(FormatTenants(r), HasSubstr("  40%      1m05s\n"));
  c->set_budget_pct(200);
  c->set_budget(v1::ComputeUse::BUDGET_SPENDING);
  c->set_stretch(1.5);
  c->set_be_share(0.25);
  EXPECT_THAT(FormatTenants(r), HasSubstr("  40%; budget 200%: stretch 1.50, BE share 25%  "));
  infer->set_budget_pct(200);
  EXPECT_THAT(FormatTenants(r),
              HasSubstr("  40%; budget 200% (own): stretch 1.50, BE share 25%  "));
  c->set_be_share(8);
  c->set_be_window_scale(4);
  EXPECT_THAT(FormatTenants(r),
              HasSubstr("  40%; budget 200% (own): stretch 1.50, BE share 800%, BE window x4  "));
  c->set_be_share(HUGE_VAL);
  c->set_be_window_scale(16);
  EXPECT_THAT(FormatTenants(r),
              HasSubstr("  40%; budget 200% (own): stretch 1.50, BE not held, BE window x16  "));
  c->set_resting(true);
  EXPECT_THAT(FormatTenants(r), HasSubstr("BE not held, BE window x16, resting  "));
  c->set_resting(false);
  c->set_budget(v1::ComputeUse::BUDGET_LEARNING);
  EXPECT_THAT(FormatTenants(r), HasSubstr("  40%; budget 200% (own) learning  "));
  infer->set_budget_pct(100);
  c->set_budget_pct(100);
  c->set_budget(v1::ComputeUse::BUDGET_OFF);
  EXPECT_THAT(FormatTenants(r), HasSubstr("  40%; budget 100% (own)  "));
}

// The Kubernetes identity, as a last column only when some tenant has one.
TEST(FormatTenantsTest, PodColumnWhereATenantHasOne) {
  v1::ListTenantsResponse r = Tenants();
  EXPECT_THAT(FormatTenants(r), Not(HasSubstr("POD")));
  r.mutable_tenants(0)->set_k8s_pod("train-0");
  r.mutable_tenants(0)->set_k8s_namespace("ml");
  const std::string out = FormatTenants(r);
  EXPECT_THAT(out, HasSubstr("  AGE    POD\n"));
  EXPECT_THAT(out, HasSubstr("  1m05s  -\n"));  // infer: outside Kubernetes
  // Both of batch-train's rows, the container not known.
  EXPECT_THAT(out, HasSubstr("  2d01h  ml/train-0/-\n4321"));
  EXPECT_EQ(out.substr(out.size() - 20), "2d01h  ml/train-0/-\n");
}

TEST(FormatHeldTest, Units) {
  EXPECT_EQ(FormatHeld(0), "0 ms");
  EXPECT_EQ(FormatHeld(0.4), "0 ms");
  EXPECT_EQ(FormatHeld(12.6), "13 ms");
  EXPECT_EQ(FormatHeld(999.4), "999 ms");
  EXPECT_EQ(FormatHeld(1000), "1.0 s");
  EXPECT_EQ(FormatHeld(1234.5), "1.2 s");
  EXPECT_EQ(FormatHeld(3600000), "3600.0 s");
}

TEST(FormatTenantsTest, NoTenantsAndNoUsage) {
  EXPECT_EQ(FormatTenants(v1::ListTenantsResponse()), "no tenants\n");
  v1::ListTenantsResponse r;
  r.add_tenants()->set_pid(5);
  EXPECT_THAT(FormatTenants(r),
              HasSubstr("\n5          ?      0     0       -    -           -                       "
                        "-     -          -        0s\n"));
}

v1::PacingPolicy DefaultPacing() {
  v1::PacingPolicy p;
  p.set_pacing(true);
  p.set_window_items(8);
  p.set_window_us(100);
  p.set_ls_idle_us(200);
  p.set_ls_stale_ms(200);
  p.set_max_hold_ms(20);
  p.set_unknown_us(50);
  p.set_share_slack_us(2000);
  p.set_refill_us(25);
  return p;
}

TEST(FormatStatusTest, PacingPolicyOnOneLine) {
  v1::StatusResponse s = TwoGpuStatus();
  *s.mutable_pacing() = DefaultPacing();
  std::string out = FormatStatus(s);
  EXPECT_THAT(out, HasSubstr("be     0     1024    4.0 GiB       32.0 GiB     -\n"
                             "\n"
                             "pacing: on, window 8 items / 100 us, LS idle 200 us, stale 200 ms, "
                             "max hold 20 ms, unknown 50 us, share slack 2000 us, refill 25 us\n"));
  EXPECT_EQ(out.back(), '\n');
  v1::PacingPolicy off = DefaultPacing();
  off.set_pacing(false);
  off.set_max_hold_ms(0);
  EXPECT_EQ(FormatPacingPolicy(off),
            "pacing: off, window 8 items / 100 us, LS idle 200 us, stale 200 ms, no max hold, "
            "unknown 50 us, share slack 2000 us, refill 25 us");
  // A daemon that paces nothing (or an older one) sends no policy: no line.
  EXPECT_THAT(FormatStatus(TwoGpuStatus()), Not(HasSubstr("pacing:")));
}

TEST(FormatSetPacingTest, BeforeAndAfter) {
  v1::SetPacingResponse r;
  *r.mutable_previous() = DefaultPacing();
  *r.mutable_pacing() = DefaultPacing();
  r.mutable_pacing()->set_pacing(false);
  r.mutable_pacing()->set_window_us(300);
  r.mutable_pacing()->set_share_slack_us(0);
  EXPECT_EQ(FormatSetPacing(r),
            "pacing: on -> off\n"
            "window_us: 100 -> 300\n"
            "share_slack_us: 2000 -> 0\n"
            "pacing: off, window 8 items / 300 us, LS idle 200 us, stale 200 ms, max hold 20 ms, "
            "unknown 50 us, share slack 0 us, refill 25 us\n");
  *r.mutable_pacing() = DefaultPacing();
  EXPECT_THAT(FormatSetPacing(r), ::testing::StartsWith("pacing unchanged\npacing: on, "));
  r.mutable_pacing()->set_ls_reserve_tpcs(8);
  EXPECT_THAT(FormatSetPacing(r), ::testing::StartsWith("ls_reserve_tpcs: 0 -> 8\n"));
  EXPECT_THAT(FormatSetPacing(r), HasSubstr("refill 25 us, LS reserve 8 TPCs on MPS\n"));
  r.mutable_pacing()->set_ls_budget_pct(200);
  r.mutable_pacing()->set_ls_rest_ms(9000);
  EXPECT_THAT(FormatSetPacing(r), HasSubstr("on MPS, LS budget 200%, LS rest 9000 ms\n"));
}

TEST(FormatSetPolicyTest, Count) {
  v1::SetPolicyResponse r;
  r.set_tenants_changed(3);
  EXPECT_EQ(FormatSetPolicy(r), "changed 3 tenant(s)\n");
}

TEST(FormatSetPolicyTest, BeforeAndAfterOfTheTargetedTenants) {
  v1::ListTenantsResponse before = Tenants(), after = Tenants();
  for (v1::ListTenantsResponse* list : {&before, &after}) {
    for (int i = 0; i < list->tenants_size(); ++i) list->mutable_tenants(i)->set_session_id(i + 1);
  }
  v1::TenantInfo* batch = after.mutable_tenants(0);
  batch->set_tenant_class(v1::LATENCY_SENSITIVE);
  batch->set_priority(-10);
  batch->set_weight(9548);
  batch->mutable_usage(1)->set_quota_bytes(16 * kGiB);
  v1::SetPolicyResponse r;
  r.set_tenants_changed(1);
  v1::SetPolicyRequest by_pid;
  by_pid.set_pid(4321);
  EXPECT_EQ(FormatSetPolicy(r, by_pid, before, after),
            "changed 1 tenant(s)\n"
            "4321 batch-train: class be -> ls, priority 10 -> -10, weight 110 -> 9548, "
            "quota 1: 8.0 GiB -> 16.0 GiB\n");
  v1::SetPolicyRequest by_class;
  by_class.set_tenant_class(v1::LATENCY_SENSITIVE);
  r.set_tenants_changed(2);
  EXPECT_EQ(FormatSetPolicy(r, by_class, before, after),
            "changed 2 tenant(s)\n"
            "77 infer: unchanged\n"
            "4321 batch-train: class be -> ls, priority 10 -> -10, weight 110 -> 9548, "
            "quota 1: 8.0 GiB -> 16.0 GiB\n");
  // An LS tenant's budget, as in force, and whether it is its own.
  v1::ListTenantsResponse was = after;
  after.mutable_tenants(1)->mutable_compute(0)->set_budget_pct(150);
  after.mutable_tenants(1)->set_budget_pct(150);
  v1::SetPolicyRequest infer;
  infer.set_pid(77);
  r.set_tenants_changed(1);
  EXPECT_EQ(FormatSetPolicy(r, infer, was, after),
            "changed 1 tenant(s)\n77 infer: budget - -> 150% (own)\n");
  was.mutable_tenants(1)->mutable_compute(0)->set_budget_pct(150);
  EXPECT_EQ(FormatSetPolicy(r, infer, was, after),
            "changed 1 tenant(s)\n77 infer: budget 150% -> 150% (own)\n");
  r.set_tenants_changed(2);
  v1::SetPolicyRequest by_name;
  by_name.set_name("nobody");
  EXPECT_EQ(FormatSetPolicy(r, by_name, before, after), "changed 2 tenant(s)\n");
}

TEST(ToJsonTest, StatusKeepsProtoFieldNames) {
  absl::StatusOr<std::string> json = ToJson(TwoGpuStatus());
  ASSERT_TRUE(json.ok()) << json.status();
  for (const char* field :
       {"\"version\"", "\"uptime_s\"", "\"pools\"", "\"capacity_bytes\"", "\"created_bytes\"",
        "\"leased_bytes\"", "\"cached_bytes\"", "\"colour_note\"", "\"reserved_for\"",
        "\"granularity_bytes\"", "\"tenant_quota_bytes\"", "\"class_quota_bytes\"",
        "\"tenant_class\":\"LATENCY_SENSITIVE\"", "\"tenant_class\":\"BEST_EFFORT\"",
        "\"uptime_s\":\"11045\"", "\"total_bytes\":\"150323855360\"",
        "\"colours\":[{\"colour\":0,"}) {
    EXPECT_THAT(*json, HasSubstr(field));
  }
  EXPECT_THAT(*json, Not(HasSubstr("uptimeS")));
  EXPECT_THAT(*json, Not(HasSubstr("\"pacing\"")));  // an absent message stays absent
  EXPECT_EQ(json->back(), '\n');
  EXPECT_EQ(json->find('\n'), json->size() - 1);  // one line
}

TEST(ToJsonTest, TenantsAndZeroFields) {
  absl::StatusOr<std::string> json = ToJson(Tenants());
  ASSERT_TRUE(json.ok()) << json.status();
  for (const char* field :
       {"\"tenants\"", "\"pid\":4321", "\"name\":\"batch-train\"", "\"used_bytes\"",
        "\"quota_bytes\"", "\"connected_s\"", "\"gpu_index\":0", "\"compute\"",
        "\"held_ms\":1234.5", "\"held_share\":0.35", "\"inflight\":\"3\"",
        "\"ls_busy_share\":0.404", "\"submissions\":\"120000\"", "\"h2d_bytes\":\"3221225472\"",
        "\"priority\":-5"}) {
    EXPECT_THAT(*json, HasSubstr(field));
  }
  json = ToJson(v1::SetPolicyResponse());
  ASSERT_TRUE(json.ok());
  EXPECT_EQ(*json, "{\"tenants_changed\":0}\n");
}

TEST(ToJsonTest, StringsAreEscapedAndUint64KeepsEveryDigit) {
  v1::ListTenantsResponse r;
  v1::TenantInfo* t = r.add_tenants();
  t->set_name("a\"b\\c\n\x01");
  t->set_session_id(UINT64_MAX);
  absl::StatusOr<std::string> json = ToJson(r);
  ASSERT_TRUE(json.ok());
  EXPECT_THAT(*json, HasSubstr("\"name\":\"a\\\"b\\\\c\\n\\u0001\""));
  EXPECT_THAT(*json, HasSubstr("\"session_id\":\"18446744073709551615\""));
  EXPECT_THAT(*json, HasSubstr("\"tenant_class\":\"TENANT_CLASS_UNSPECIFIED\""));
}

TEST(ToJsonTest, ProtobufReadsItBack) {
  absl::StatusOr<std::string> json = ToJson(Tenants());
  ASSERT_TRUE(json.ok()) << json.status();
  v1::ListTenantsResponse back;
  ASSERT_TRUE(google::protobuf::util::JsonStringToMessage(*json, &back).ok());
  EXPECT_EQ(back.SerializeAsString(), Tenants().SerializeAsString());
}

}  // namespace
}  // namespace missile::cli
