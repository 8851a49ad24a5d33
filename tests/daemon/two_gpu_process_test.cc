// Multi-process tests of a node with two GPUs (see daemon_process_fixture.h): the test double
// simulates two devices (FAKECUDA_DEVICES=2), each with its own memory, PCIe link and compute
// engine, and missiled manages both. Tenants choose a GPU the way programs do, by the current
// context (tenant_probe's dev:<n> step, pace_probe's PACE_PROBE_DEVICE), and the tests check
// that each GPU's pool, copy arbiter and pacing domain sees only the work done on that GPU.
#include <chrono>
#include <cstdlib>
#include <map>
#include <string>
#include <thread>

#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

constexpr double kMs = 1e6;  // nanoseconds

// The unsigned number after `key=` in `line`, or 0 (CLOCK_MONOTONIC nanoseconds need 64 bits).
uint64_t NsField(const std::string& line, const std::string& key) {
  size_t pos = line.find(key + "=");
  if (pos == std::string::npos) return 0;
  return std::strtoull(line.c_str() + pos + key.size() + 1, nullptr, 10);
}

// What one tenant holds and has copied on one GPU, as the daemon reports it.
struct GpuUse {
  uint64_t used = 0;
  uint64_t h2d = 0;
  uint64_t d2h = 0;
  uint64_t submissions = 0;
  bool paced = false;  // the GPU's pacing domain has a record of the tenant
};

class TwoGpuTest : public DaemonTest {
 protected:
  void SetUp() override {
    DaemonTest::SetUp();
    // Processes take each engine in time slices of 1 ms, as GPU contexts do.
    extra_env_ = {{"FAKECUDA_DEVICES", "2"}, {"FAKECUDA_TIMESLICE_US", "1000"}};
  }

  v1::TenantInfo TenantNamed(const std::string& name) {
    v1::ListTenantsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    for (const auto& t : resp.tenants()) {
      if (t.name() == name) return t;
    }
    ADD_FAILURE() << "no tenant " << name << ": " << resp.DebugString();
    return {};
  }

  static GpuUse UseOn(const v1::TenantInfo& t, uint32_t gpu) {
    GpuUse u;
    for (const auto& x : t.usage()) {
      if (x.gpu_index() == gpu) u.used = x.used_bytes();
    }
    for (const auto& x : t.pcie()) {
      if (x.gpu_index() == gpu) {
        u.h2d = x.h2d_bytes();
        u.d2h = x.d2h_bytes();
      }
    }
    for (const auto& x : t.compute()) {
      if (x.gpu_index() == gpu) {
        u.submissions = x.submissions();
        u.paced = true;
      }
    }
    return u;
  }

  // An LS tenant that joins `device`'s pacing and then waits: a BE tenant alone on a GPU is not
  // paced, and these tests look at where a BE tenant's work is marked. Returns the bytes it
  // holds on `device`.
  uint64_t StartIdleLs(Child* ls, int device) {
    auto env = TenantEnv("ls", "idle-gpu" + std::to_string(device));
    env["PACE_PROBE_DEVICE"] = std::to_string(device);
    EXPECT_TRUE(ls->Start({PACE_PROBE, "idle"}, env));
    EXPECT_FALSE(ls->WaitForLine("ready", 20).empty()) << ls->out();
    return UseOn(TenantNamed("idle-gpu" + std::to_string(device)), device).used;
  }
};

TEST_F(TwoGpuTest, StatusListsBothGpusWithTheirPools) {
  StartDaemon();
  v1::StatusResponse st = Status();
  ASSERT_EQ(st.pools_size(), 2) << st.DebugString();
  EXPECT_EQ(st.pools(0).gpu().index(), 0u);
  EXPECT_EQ(st.pools(1).gpu().index(), 1u);
  EXPECT_NE(st.pools(0).gpu().uuid(), st.pools(1).gpu().uuid());
  const std::string uuid0 = st.pools(0).gpu().uuid(), uuid1 = st.pools(1).gpu().uuid();
  ProcessResult text = Ctl({"status"});
  ASSERT_EQ(text.exit_code, 0) << text.err;
  EXPECT_NE(text.out.find(uuid0), std::string::npos) << text.out;
  EXPECT_NE(text.out.find(uuid1), std::string::npos) << text.out;
  ProcessResult json = Ctl({"--json", "status"});
  ASSERT_EQ(json.exit_code, 0) << json.err;
  EXPECT_NE(json.out.find("\"uuid\":\"" + uuid0 + "\""), std::string::npos) << json.out;
  EXPECT_NE(json.out.find("\"uuid\":\"" + uuid1 + "\""), std::string::npos) << json.out;
}

// A tenant that makes device 1's context current: its memory comes from GPU 1's pool, its quota
// is GPU 1's, its host-device copies are granted by GPU 1's arbiter and its work is marked in
// GPU 1's pacing domain; GPU 0 sees nothing of it.
TEST_F(TwoGpuTest, ATenantOnGpu1UsesGpu1sPoolQuotaArbiterAndPacingOnly) {
  StartDaemon();
  Child idle0, idle1;
  const uint64_t idle_on0 = StartIdleLs(&idle0, 0), idle_on1 = StartIdleLs(&idle1, 1);
  Child t;
  auto env = TenantEnv("be", "on-gpu1");
  env["MISSILE_QUOTA"] = "8MiB";
  // alloc fills the memory and reads all of it back: an 8 MiB copy device to host.
  ASSERT_TRUE(t.Start({TENANT_PROBE, "dev:1", "alloc:8", "alloc:2", "hold"}, env));
  ASSERT_EQ(t.WaitForLine("ready"), "ready") << t.out();
  EXPECT_NE(t.out().find("dev 1 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("alloc 8 ok"), std::string::npos) << t.out();
  // The quota is per GPU: 8 MiB on GPU 1 leaves no room there for 2 more.
  EXPECT_NE(t.out().find("alloc 2 err 2"), std::string::npos) << t.out();
  v1::StatusResponse st = Status();
  ASSERT_EQ(st.pools_size(), 2);
  EXPECT_EQ(st.pools(0).leased_bytes(), idle_on0);
  EXPECT_EQ(st.pools(1).leased_bytes(), 8 * kMiB + idle_on1);
  const v1::TenantInfo info = TenantNamed("on-gpu1");
  const GpuUse gpu0 = UseOn(info, 0), gpu1 = UseOn(info, 1);
  EXPECT_EQ(gpu1.used, 8 * kMiB) << info.DebugString();
  EXPECT_EQ(gpu1.d2h, 8 * kMiB) << info.DebugString();
  EXPECT_GT(gpu1.submissions, 0u) << info.DebugString();
  EXPECT_EQ(gpu0.used, 0u) << info.DebugString();
  EXPECT_EQ(gpu0.h2d + gpu0.d2h, 0u) << info.DebugString();
  EXPECT_EQ(gpu0.submissions, 0u) << info.DebugString();
  t.CloseStdin();
  EXPECT_EQ(t.Wait(), 0);
  idle0.CloseStdin();
  idle1.CloseStdin();
  EXPECT_EQ(idle0.Wait(), 0);
  EXPECT_EQ(idle1.Wait(), 0);
}

// One process on both GPUs, switching the current context: each GPU's pool and arbiter sees its
// part only, the quota holds on each GPU separately, a copy of one GPU's memory made while the
// other's context is current is scheduled on the GPU holding the memory, and a peer copy
// between the two GPUs' memory goes through no arbiter (it does not cross the host link).
TEST_F(TwoGpuTest, AProcessOnBothGpusIsAccountedOnEachSeparately) {
  StartDaemon();
  Child idle0, idle1;
  const uint64_t idle_on0 = StartIdleLs(&idle0, 0), idle_on1 = StartIdleLs(&idle1, 1);
  Child t;
  auto env = TenantEnv("be", "both");
  env["MISSILE_QUOTA"] = "16MiB";
  ASSERT_TRUE(t.Start({TENANT_PROBE, "dev:1", "alloc:8", "dev:0", "alloc:4", "dev:1", "alloc:4",
                       "peer", "dev:0", "alloc:12", "dev:1", "alloc:6", "check", "hold"},
                      env));
  ASSERT_EQ(t.WaitForLine("ready"), "ready") << t.out();
  const std::string out = t.out();
  EXPECT_NE(out.find("peer 4194304 ok"), std::string::npos) << out;
  // 16 MiB on GPU 0 fits its quota although the process holds 28 MiB in all; GPU 1 has 12.
  EXPECT_NE(out.find("alloc 12 ok"), std::string::npos) << out;
  EXPECT_NE(out.find("alloc 6 err 2"), std::string::npos) << out;
  EXPECT_NE(out.find("check ok"), std::string::npos) << out;
  v1::StatusResponse st = Status();
  ASSERT_EQ(st.pools_size(), 2);
  EXPECT_EQ(st.pools(0).leased_bytes(), 16 * kMiB + idle_on0);
  EXPECT_EQ(st.pools(1).leased_bytes(), 12 * kMiB + idle_on1);
  const v1::TenantInfo info = TenantNamed("both");
  const GpuUse gpu0 = UseOn(info, 0), gpu1 = UseOn(info, 1);
  EXPECT_EQ(gpu0.used, 16 * kMiB) << info.DebugString();
  EXPECT_EQ(gpu1.used, 12 * kMiB) << info.DebugString();
  // Every allocation was read back twice: by its alloc step, with its own GPU current, and by
  // check, with GPU 1 current. Both reads go through the arbiter of the GPU that holds the
  // memory, the link they cross, not that of the current context. The 4 MiB peer copy added
  // nothing to either (its 4 KiB read-backs are below the bypass size).
  EXPECT_EQ(gpu0.d2h, 2 * 16 * kMiB) << info.DebugString();
  EXPECT_EQ(gpu1.d2h, 2 * 12 * kMiB) << info.DebugString();
  EXPECT_EQ(gpu0.h2d + gpu1.h2d, 0u) << info.DebugString();
  EXPECT_GT(gpu0.submissions, 0u) << info.DebugString();
  EXPECT_GT(gpu1.submissions, 0u) << info.DebugString();
  t.CloseStdin();
  EXPECT_EQ(t.Wait(), 0);
  idle0.CloseStdin();
  idle1.CloseStdin();
  EXPECT_EQ(idle0.Wait(), 0);
  EXPECT_EQ(idle1.Wait(), 0);
}

class TwoGpuPacingTest : public TwoGpuTest {
 protected:
  void StartPacingDaemon() {
    StartDaemon("[compute]\nmax_hold_ms = 0\nls_stale_ms = 10000\nls_idle_us = 1000\n");
  }

  std::map<std::string, std::string> ProbeEnv(const std::string& cls, int device) const {
    auto env = TenantEnv(cls, cls + "-gpu" + std::to_string(device));
    env["PACE_PROBE_DEVICE"] = std::to_string(device);
    return env;
  }

  // An LS request that stays on `device` for `ms`; returns the moment it was marked.
  uint64_t StartLs(Child* ls, int device, long ms) {
    EXPECT_TRUE(ls->Start({PACE_PROBE, "ls", std::to_string(ms)}, ProbeEnv("ls", device)));
    const std::string marked = ls->WaitForLine("marked", 20);
    EXPECT_FALSE(marked.empty()) << ls->out();
    return NsField(marked, "t");
  }

  // A BE tenant on `device`, set up and waiting for stdin to close before its one memset.
  void StartBe(Child* be, int device) {
    ASSERT_TRUE(be->Start({PACE_PROBE, "be"}, ProbeEnv("be", device)));
    ASSERT_FALSE(be->WaitForLine("ready", 20).empty()) << be->out();
  }

  // The moment the BE's memset finished.
  uint64_t BeEnd(Child* be) {
    const std::string line = be->WaitForLine("be ", 30);
    EXPECT_EQ(be->Wait(10), 0) << be->out();
    EXPECT_EQ(NsField(line, "ok"), 1u) << line;
    return NsField(line, "t1");
  }

  uint64_t LsDone(Child* ls) {
    const std::string done = ls->WaitForLine("done", 10);
    EXPECT_FALSE(done.empty()) << ls->out();
    EXPECT_EQ(ls->Wait(10), 0);
    return NsField(done, "t");
  }
};

// GPU 1 has an LS tenant beside its BE, so the BE is paced there (a BE alone on its GPU is
// not, and would pass whatever GPU 0's pacing did); that LS is idle, so GPU 1's pacing lets
// the BE run, and the LS busy on GPU 0 must not hold it.
TEST_F(TwoGpuPacingTest, AnLsBusyOnGpu0DoesNotHoldABeOnGpu1) {
  StartPacingDaemon();
  Child idle1, be, ls;
  StartIdleLs(&idle1, 1);
  // One memset before "ready", so that GPU 1's pacing domain has counted the BE's work.
  ASSERT_TRUE(be.Start({PACE_PROBE, "be", "0", "1"}, ProbeEnv("be", 1)));
  ASSERT_FALSE(be.WaitForLine("ready", 20).empty()) << be.out();
  const v1::TenantInfo info = TenantNamed("be-gpu1");
  EXPECT_GT(UseOn(info, 1).submissions, 0u) << "not paced on GPU 1: " << info.DebugString();
  EXPECT_EQ(UseOn(info, 0).submissions, 0u) << info.DebugString();
  const uint64_t marked = StartLs(&ls, 0, 1500);
  be.CloseStdin();
  const uint64_t be_end = BeEnd(&be);
  EXPECT_LT(static_cast<double>(be_end - marked), 1000 * kMs);
  const uint64_t ls_done = LsDone(&ls);
  EXPECT_LT(be_end, ls_done);
  idle1.CloseStdin();
  EXPECT_EQ(idle1.Wait(), 0);
}

// An LS/BE pair on each GPU at the same time: each BE waits for its own GPU's LS only.
TEST_F(TwoGpuPacingTest, TwoPairsAreEachProtectedAndDoNotHoldEachOther) {
  StartPacingDaemon();
  Child be0, be1, ls0, ls1;
  StartBe(&be0, 0);
  StartBe(&be1, 1);
  StartLs(&ls0, 0, 1500);
  StartLs(&ls1, 1, 400);
  be0.CloseStdin();
  be1.CloseStdin();
  const uint64_t be1_end = BeEnd(&be1);
  const uint64_t ls1_done = LsDone(&ls1);
  const uint64_t be0_end = BeEnd(&be0);
  const uint64_t ls0_done = LsDone(&ls0);
  // Held by its own LS...
  EXPECT_GE(be1_end, ls1_done);
  EXPECT_GE(be0_end, ls0_done);
  // ...and let go right after it, not when the other GPU's LS finished (1.1 s later).
  EXPECT_LT(static_cast<double>(be1_end - ls1_done), 300 * kMs);
  EXPECT_LT(be1_end, ls0_done);
  EXPECT_LT(static_cast<double>(be0_end - ls0_done), 300 * kMs);
}

}  // namespace
}  // namespace missile::process_test
