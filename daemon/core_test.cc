// DaemonCore in one process: its GPUs are pools over a fake BlockSource, its tenants this test
// process (and its parent, for a second pid), its admins plain credentials.
#include "core.h"

#include <sys/wait.h>
#include <unistd.h>

#include <chrono>
#include <cmath>
#include <csignal>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "daemon/testing/fake_block_source.h"
#include "gtest/gtest.h"
#include "logger.h"
#include "spdlog/sinks/ostream_sink.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_scheme.h"
#include "missile/common/size.h"

namespace missile::daemon {
namespace {

constexpr uint64_t kG = uint64_t{2} << 20;
constexpr TenantClass kLs = TenantClass::kLatencySensitive;
constexpr TenantClass kBe = TenantClass::kBestEffort;

colorer::ColourPolicy OneColourPolicy() {
  auto map = colorer::UniformChannelMap::Create(1);
  EXPECT_TRUE(map.ok());
  auto scheme = colorer::ColourScheme::EvenSplit(
      std::shared_ptr<const colorer::ChannelMap>(*std::move(map)), 1);
  EXPECT_TRUE(scheme.ok());
  auto policy = colorer::ColourPolicy::Create(*scheme);
  EXPECT_TRUE(policy.ok());
  return *policy;
}

// One GPU of 32 granules; each tenant may hold 8, each class 16.
Gpu FakeGpu() {
  Gpu gpu;
  gpu.info.uuid = "GPU-00000000-0000-0000-0000-000000000000";
  gpu.info.name = "fake";
  gpu.info.total_bytes = 32 * kG;
  gpu.info.granularity = kG;
  gpu.source = std::make_unique<FakeBlockSource>();
  gpu.quota[ClassIndex(kLs)] = {8 * kG, 16 * kG};
  gpu.quota[ClassIndex(kBe)] = {8 * kG, 16 * kG};
  PoolOptions options;
  options.granularity = kG;
  options.capacity_bytes = 32 * kG;
  options.cache_limit_bytes = 32 * kG;
  auto pool = VramPool::Create(options, gpu.source.get(), OneColourPolicy(),
                               gpu.quota[ClassIndex(kLs)], gpu.quota[ClassIndex(kBe)]);
  EXPECT_TRUE(pool.ok()) << pool.status();
  gpu.pool = *std::move(pool);
  return gpu;
}

PolicyTarget ByPid(int pid) {
  PolicyTarget t;
  t.pid = pid;
  return t;
}

PolicyTarget ByName(const std::string& name) {
  PolicyTarget t;
  t.name = name;
  return t;
}

PolicyTarget ByClass(TenantClass cls) {
  PolicyTarget t;
  t.cls = cls;
  return t;
}

PolicyChange Priority(int priority) {
  PolicyChange c;
  c.priority = priority;
  return c;
}

PolicyChange TenantQuota(uint64_t bytes) {
  PolicyChange c;
  c.quota_bytes = bytes;
  return c;
}

uint64_t LeasedBytes(const DaemonCore& core) { return core.gpus()[0].pool->Snapshot().leased_bytes; }

class DaemonCoreTest : public ::testing::Test {
 protected:
  DaemonCoreTest() {
    std::vector<Gpu> gpus;
    gpus.push_back(FakeGpu());
    core_ = std::make_unique<DaemonCore>(CoreOptions{}, std::move(gpus));
    EXPECT_TRUE(core_->Start().ok());
  }

  SessionInfo MustRegister(const PeerCredentials& creds, const std::string& name,
                           TenantClass cls) {
    auto info = core_->Register(creds, name, cls, 0);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? *info : SessionInfo{};
  }

  // This process, and its parent: two live pids the core can watch.
  const PeerCredentials me_{getpid(), 1000, 1000};
  const PeerCredentials parent_{getppid(), 1001, 1001};
  const PeerCredentials root_{getpid(), 0, 0};
  const PeerCredentials user_{getpid(), 1000, 1000};
  std::unique_ptr<DaemonCore> core_;
};

TEST_F(DaemonCoreTest, RegisterGivesASessionWithTheClassDefaults) {
  SessionInfo ls = MustRegister(me_, "web", kLs);
  EXPECT_NE(ls.id, 0u);
  EXPECT_EQ(ls.cls, kLs);
  EXPECT_EQ(ls.priority, -10);
  EXPECT_EQ(ls.token.size(), 16u);
  // The same process registering again gets the same session.
  EXPECT_EQ(MustRegister(me_, "web", kLs).id, ls.id);
  SessionInfo be = MustRegister(parent_, "batch", kBe);
  EXPECT_NE(be.id, ls.id);
  EXPECT_EQ(be.priority, 10);
  EXPECT_EQ(core_->ListSessions().size(), 2u);
  EXPECT_EQ(core_->Register(me_, "bad name!", kBe, 0).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DaemonCoreTest, RegisterKeepsTheKubernetesIdentityAndRefusesABadOne) {
  absl::StatusOr<SessionInfo> bad =
      core_->Register(me_, "web", kLs, 0, K8sIdentity{"pod", "bad/ns", ""});
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("namespace 'bad/ns'"), std::string::npos)
      << bad.status();
  EXPECT_TRUE(core_->ListSessions().empty());  // nothing registered
  absl::StatusOr<SessionInfo> ok =
      core_->Register(me_, "web", kLs, 0, K8sIdentity{"web-0", "prod", "server"});
  ASSERT_TRUE(ok.ok()) << ok.status();
  ASSERT_EQ(core_->ListSessions().size(), 1u);
  EXPECT_EQ(core_->ListSessions()[0].k8s, (K8sIdentity{"web-0", "prod", "server"}));
}

TEST_F(DaemonCoreTest, AllocatesWithinTheQuota) {
  SessionInfo s = MustRegister(me_, "web", kBe);
  auto chunks = core_->Allocate(me_, s.id, 0, /*single=*/false, 4 * kG);
  ASSERT_TRUE(chunks.ok()) << chunks.status();
  EXPECT_EQ(chunks->size(), 4u);
  auto block = core_->Allocate(me_, s.id, 0, /*single=*/true, 4 * kG);
  ASSERT_TRUE(block.ok()) << block.status();
  ASSERT_EQ(block->size(), 1u);
  EXPECT_EQ((*block)[0].bytes, 4 * kG);
  auto usage = core_->GetUsage(me_, s.id, 0);
  ASSERT_TRUE(usage.ok());
  EXPECT_EQ(usage->used_bytes, 8 * kG);
  EXPECT_EQ(usage->quota_bytes, 8 * kG);
  EXPECT_EQ(LeasedBytes(*core_), 8 * kG);
}

TEST_F(DaemonCoreTest, RefusesBeyondTheQuotaAndBadRequests) {
  SessionInfo s = MustRegister(me_, "web", kBe);
  ASSERT_TRUE(core_->Allocate(me_, s.id, 0, false, 6 * kG).ok());
  auto over = core_->Allocate(me_, s.id, 0, false, 4 * kG);
  EXPECT_EQ(over.status().code(), absl::StatusCode::kResourceExhausted) << over.status();
  EXPECT_NE(over.status().message().find("quota"), std::string::npos) << over.status();
  EXPECT_EQ(LeasedBytes(*core_), 6 * kG);  // nothing leased by the refused call

  EXPECT_EQ(core_->Allocate(me_, s.id, 0, false, kG / 2).status().code(),
            absl::StatusCode::kInvalidArgument);  // not a multiple of the granularity
  EXPECT_EQ(core_->Allocate(me_, s.id, 1, false, kG).status().code(),
            absl::StatusCode::kInvalidArgument);  // no GPU 1
  EXPECT_EQ(core_->Allocate(parent_, s.id, 0, false, kG).status().code(),
            absl::StatusCode::kPermissionDenied);  // another process's session
  EXPECT_EQ(core_->Allocate(me_, s.id + 1, 0, false, kG).status().code(),
            absl::StatusCode::kNotFound);
}

TEST_F(DaemonCoreTest, EndingASessionReturnsItsMemory) {
  SessionInfo s = MustRegister(me_, "web", kLs);
  ASSERT_TRUE(core_->Allocate(me_, s.id, 0, false, 8 * kG).ok());
  EXPECT_EQ(LeasedBytes(*core_), 8 * kG);
  core_->EndSession(s.id, "test");
  EXPECT_EQ(LeasedBytes(*core_), 0u);
  EXPECT_TRUE(core_->ListSessions().empty());
  EXPECT_EQ(core_->Allocate(me_, s.id, 0, false, kG).status().code(), absl::StatusCode::kNotFound);
  // Its pid may register again, as a new session.
  EXPECT_NE(MustRegister(me_, "web", kLs).id, s.id);
}

// A session that ends while its process runs (not by its exit) leaves the blocks it fetched
// counted as possibly mapped, and never leased to anyone, until the process exits.
TEST_F(DaemonCoreTest, FetchedMemoryOfASessionEndedWhileItsProcessRunsStaysCountedUntilExit) {
  const pid_t child = fork();
  ASSERT_GE(child, 0);
  if (child == 0) {
    pause();
    _exit(0);
  }
  const PeerCredentials kid{child, 1002, 1002};
  SessionInfo s = MustRegister(kid, "kid", kBe);
  auto leases = core_->Allocate(kid, s.id, 0, false, 4 * kG);
  ASSERT_TRUE(leases.ok()) << leases.status();
  auto fds = core_->FetchBlocks(kid, s.id, 0, {(*leases)[0].id, (*leases)[1].id});
  ASSERT_TRUE(fds.ok()) << fds.status();
  for (int fd : *fds) close(fd);
  core_->EndSession(s.id, "test");
  PoolSnapshot snap = core_->gpus()[0].pool->Snapshot();
  EXPECT_EQ(snap.released_mapped_bytes, 2 * kG);
  EXPECT_EQ(snap.cached_bytes, 2 * kG);  // the two never fetched
  kill(child, SIGKILL);
  waitpid(child, nullptr, 0);
  for (int i = 0; i < 300 && core_->gpus()[0].pool->Snapshot().released_mapped_bytes != 0; ++i) {
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  EXPECT_EQ(core_->gpus()[0].pool->Snapshot().released_mapped_bytes, 0u)
      << "the process exited: its memory is gone";
}

TEST_F(DaemonCoreTest, FreeReturnsBlocksAndRefusesForeignOnes) {
  SessionInfo a = MustRegister(me_, "a", kBe);
  SessionInfo b = MustRegister(parent_, "b", kBe);
  auto leases = core_->Allocate(me_, a.id, 0, false, 2 * kG);
  ASSERT_TRUE(leases.ok());
  EXPECT_EQ(core_->Free(parent_, b.id, 0, {(*leases)[0].id}).code(), absl::StatusCode::kNotFound);
  ASSERT_TRUE(core_->Free(me_, a.id, 0, {(*leases)[0].id, (*leases)[1].id}).ok());
  EXPECT_EQ(LeasedBytes(*core_), 0u);
}

TEST_F(DaemonCoreTest, SideChannelCallsCheckTokenAndHolder) {
  SessionInfo a = MustRegister(me_, "a", kBe);
  SessionInfo b = MustRegister(parent_, "b", kBe);
  EXPECT_TRUE(core_->AuthenticateSideChannel(me_, a.id, a.token).ok());
  EXPECT_EQ(core_->AuthenticateSideChannel(me_, a.id, b.token).code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(core_->AuthenticateSideChannel(me_, b.id, b.token).code(),
            absl::StatusCode::kPermissionDenied);  // b belongs to the parent's pid

  auto leases = core_->Allocate(me_, a.id, 0, false, 2 * kG);
  ASSERT_TRUE(leases.ok());
  auto fds = core_->FetchBlocks(me_, a.id, 0, {(*leases)[0].id, (*leases)[1].id});
  ASSERT_TRUE(fds.ok()) << fds.status();
  ASSERT_EQ(fds->size(), 2u);
  for (int fd : *fds) {
    EXPECT_GE(fd, 0);
    close(fd);
  }
  EXPECT_EQ(core_->FetchBlocks(parent_, b.id, 0, {(*leases)[0].id}).status().code(),
            absl::StatusCode::kNotFound);  // not b's block
  // No arbiter and no pacing domain on this GPU.
  EXPECT_EQ(core_->OpenCopyChannel(me_, a.id, 0).status().code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(core_->OpenPacing(me_, a.id, 0).status().code(), absl::StatusCode::kUnavailable);
}

TEST_F(DaemonCoreTest, AdminChangesPolicy) {
  SessionInfo s = MustRegister(me_, "web", kBe);
  const PolicyTarget by_pid = ByPid(me_.pid);
  PolicyChange to_ls = Priority(-5);
  to_ls.cls = kLs;
  EXPECT_EQ(core_->SetPolicy(user_, by_pid, to_ls).status().code(),
            absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(core_->ListSessions()[0].cls, kBe);  // unchanged

  auto changed = core_->SetPolicy(root_, by_pid, to_ls);
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 1u);
  SessionInfo now = core_->ListSessions()[0];
  EXPECT_EQ(now.cls, kLs);
  EXPECT_EQ(now.priority, -5);
  EXPECT_GT(now.generation, s.generation);
  // A Watch waiting on the old generation sees the change at once.
  auto seen = core_->WaitForChange(me_, s.id, s.generation, [] { return false; });
  ASSERT_TRUE(seen.ok());
  EXPECT_EQ(seen->cls, kLs);

  EXPECT_EQ(core_->SetPolicy(root_, ByPid(1 << 30), to_ls).status().code(),
            absl::StatusCode::kNotFound);
  EXPECT_EQ(core_->SetPolicy(root_, by_pid, Priority(40)).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->SetPolicy(root_, by_pid, PolicyChange{}).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST_F(DaemonCoreTest, ANameSharedByTwoUidsIsNoTarget) {
  MustRegister(me_, "web", kBe);
  const uint64_t sibling = MustRegister(PeerCredentials{getppid(), me_.uid, me_.gid}, "web", kBe).id;
  auto changed = core_->SetPolicy(root_, ByName("web"), Priority(-5));
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 2u);  // one uid: both of its tenants

  core_->EndSession(sibling, "test");
  MustRegister(parent_, "web", kBe);  // another user takes the same name
  changed = core_->SetPolicy(root_, ByName("web"), Priority(5));
  EXPECT_EQ(changed.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(changed.status().message().find("(1000, 1001)"), std::string::npos) << changed.status();
  for (const SessionInfo& s : core_->ListSessions()) EXPECT_NE(s.priority, 5) << s.creds.uid;
}

TEST_F(DaemonCoreTest, AdminChangesAClassQuota) {
  SessionInfo s = MustRegister(me_, "web", kBe);
  auto changed = core_->SetPolicy(root_, ByClass(kBe),
                                  TenantQuota(2 * kG));
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(core_->gpus()[0].quota[ClassIndex(kBe)].tenant_quota_bytes, 2 * kG);
  EXPECT_EQ(core_->Allocate(me_, s.id, 0, false, 4 * kG).status().code(),
            absl::StatusCode::kResourceExhausted);
  EXPECT_TRUE(core_->Allocate(me_, s.id, 0, false, 2 * kG).ok());
  // A tenant quota above the class quota changes nothing.
  EXPECT_EQ(core_->SetPolicy(root_, ByClass(kBe),
                             TenantQuota(32 * kG))
                .status()
                .code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->gpus()[0].quota[ClassIndex(kBe)].tenant_quota_bytes, 2 * kG);
}

// Lowering a quota takes nothing back: a tenant left above it can allocate nothing more. Such
// a change (`set --class be --quota 95` was once 95 bytes) is refused, naming who holds what,
// unless forced.
TEST_F(DaemonCoreTest, AQuotaBelowWhatTenantsHoldNeedsForce) {
  SessionInfo s = MustRegister(me_, "web", kBe);
  ASSERT_TRUE(core_->Allocate(me_, s.id, 0, false, 6 * kG).ok());
  const std::string pid = std::to_string(me_.pid);
  auto refused = core_->SetPolicy(root_, ByClass(kBe), TenantQuota(2 * kG));
  EXPECT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("pid " + pid + " 'web' holds " +
                                            FormatSize(6 * kG) + " on GPU 0, its quota would be " +
                                            FormatSize(2 * kG)),
            std::string::npos)
      << refused.status();
  EXPECT_NE(refused.status().message().find("force"), std::string::npos) << refused.status();
  EXPECT_EQ(core_->gpus()[0].quota[ClassIndex(kBe)].tenant_quota_bytes, 8 * kG);  // unchanged
  EXPECT_EQ(core_->SetPolicy(root_, ByPid(me_.pid), TenantQuota(4 * kG)).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core_->GetUsage(me_, s.id, 0)->quota_bytes, 8 * kG);
  PolicyChange class_quota;
  class_quota.class_quota_bytes = 4 * kG;
  class_quota.quota_bytes = 4 * kG;
  refused = core_->SetPolicy(root_, ByClass(kBe), class_quota);
  EXPECT_NE(refused.status().message().find("class be holds " + FormatSize(6 * kG) +
                                            " on GPU 0, its class quota would be " +
                                            FormatSize(4 * kG)),
            std::string::npos)
      << refused.status();
  // At what it holds, or for another class, nothing is in the way.
  EXPECT_TRUE(core_->SetPolicy(root_, ByPid(me_.pid), TenantQuota(6 * kG)).ok());
  EXPECT_TRUE(core_->SetPolicy(root_, ByClass(kLs), TenantQuota(kG)).ok());

  PolicyChange forced = TenantQuota(2 * kG);
  forced.force = true;
  ASSERT_TRUE(core_->SetPolicy(root_, ByClass(kBe), forced).ok());
  EXPECT_EQ(core_->gpus()[0].quota[ClassIndex(kBe)].tenant_quota_bytes, 2 * kG);
  EXPECT_EQ(LeasedBytes(*core_), 6 * kG);  // kept
  EXPECT_EQ(core_->Allocate(me_, s.id, 0, false, kG).status().code(),
            absl::StatusCode::kResourceExhausted);
}

// A percentage is of each GPU's pool, as in the configuration: 12.5% of 32 blocks is 4.
TEST_F(DaemonCoreTest, AQuotaMayBeAPercentageOfThePool) {
  SessionInfo s = MustRegister(me_, "web", kBe);
  PolicyChange change;
  change.quota_percent = 12.5;
  change.class_quota_percent = 50;
  ASSERT_TRUE(core_->SetPolicy(root_, ByClass(kBe), change).ok());
  EXPECT_EQ(core_->gpus()[0].quota[ClassIndex(kBe)].tenant_quota_bytes, 4 * kG);
  EXPECT_EQ(core_->gpus()[0].quota[ClassIndex(kBe)].class_quota_bytes, 16 * kG);
  PolicyChange tenant;
  tenant.quota_percent = 6.25;
  ASSERT_TRUE(core_->SetPolicy(root_, ByPid(me_.pid), tenant).ok());
  EXPECT_EQ(core_->GetUsage(me_, s.id, 0)->quota_bytes, 2 * kG);

  for (double bad : {0.0, -5.0, 100.5, std::nan(""), HUGE_VAL}) {
    tenant.quota_percent = bad;
    auto refused = core_->SetPolicy(root_, ByPid(me_.pid), tenant);
    EXPECT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
    EXPECT_NE(refused.status().message().find("quota_percent must be more than 0 and at most 100"),
              std::string::npos)
        << refused.status();
  }
  tenant.quota_percent = 50;
  tenant.quota_bytes = kG;
  EXPECT_EQ(core_->SetPolicy(root_, ByPid(me_.pid), tenant).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core_->GetUsage(me_, s.id, 0)->quota_bytes, 2 * kG);
}

// Quota refusals are logged at warning, but a tenant asking in a loop gets one line per
// interval, which counts the refusals left out.
TEST_F(DaemonCoreTest, QuotaRefusalsAreLoggedAtWarningAndRateLimited) {
  std::ostringstream log;
  SetLogSinkForTesting(std::make_shared<spdlog::sinks::ostream_sink_mt>(log, true));
  SessionInfo s = MustRegister(me_, "web", kBe);
  for (int i = 0; i < 5; ++i) {
    EXPECT_EQ(core_->Allocate(me_, s.id, 0, false, 10 * kG).status().code(),
              absl::StatusCode::kResourceExhausted);
  }
  SetLogSinkForTesting(nullptr);
  const std::string text = log.str();
  const std::string line = "missiled warning: session " + std::to_string(s.id);
  ASSERT_NE(text.find(line), std::string::npos) << text;
  EXPECT_EQ(text.find(line, text.find(line) + 1), std::string::npos)
      << "four of the five refusals within the interval are not logged:\n" << text;
}

PolicyChange Budget(uint32_t pct) {
  PolicyChange c;
  c.budget_pct = pct;
  return c;
}

// FakeGpu with a pacing domain (no sampler) whose [compute] ls_budget_pct is `default_pct`.
Gpu PacedFakeGpu(uint32_t default_pct) {
  Gpu gpu = FakeGpu();
  PacingSettings settings;
  settings.ls_budget_pct = default_pct;
  auto pacing = PacingDomain::Create(settings, /*sampler=*/false);
  EXPECT_TRUE(pacing.ok()) << pacing.status();
  gpu.pacing = *std::move(pacing);
  return gpu;
}

// The latency budget a session's pacing slot on GPU 0 has.
uint32_t SlotBudget(const DaemonCore& core, uint64_t session) {
  std::optional<PacingStats> st = core.gpus()[0].pacing->Stats(session);
  return st ? st->budget_pct : 0;
}

TEST(DaemonCoreBudgetTest, ATenantsBudgetThenTheClassesThenThePacingPolicys) {
  std::vector<Gpu> gpus;
  gpus.push_back(PacedFakeGpu(120));
  DaemonCore core(CoreOptions{}, std::move(gpus));
  ASSERT_TRUE(core.Start().ok());
  const PeerCredentials root{getpid(), 0, 0};
  auto web = core.Register(PeerCredentials{getpid(), 1000, 1000}, "web", kLs, 0);
  auto api = core.Register(PeerCredentials{getppid(), 1001, 1001}, "api", kLs, 0);
  ASSERT_TRUE(web.ok() && api.ok());
  EXPECT_EQ(SlotBudget(core, web->id), 120u) << "[compute] ls_budget_pct";

  auto changed = core.SetPolicy(root, ByName("web"), Budget(150));
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 1u);
  EXPECT_EQ(SlotBudget(core, web->id), 150u);
  EXPECT_EQ(SlotBudget(core, api->id), 120u);
  EXPECT_EQ(core.GetSession(PeerCredentials{getpid(), 1000, 1000}, web->id)->budget_pct, 150u);

  // The class's budget: api (none of its own) follows it, web keeps its own.
  changed = core.SetPolicy(root, ByClass(kLs), Budget(300));
  ASSERT_TRUE(changed.ok()) << changed.status();
  EXPECT_EQ(*changed, 1u) << "only api follows the class's budget";
  EXPECT_EQ(core.class_defaults(kLs).budget_pct, 300u);
  EXPECT_EQ(SlotBudget(core, web->id), 150u);
  EXPECT_EQ(SlotBudget(core, api->id), 300u);

  // 0 clears: web follows the class's, then, the class's cleared, both follow [compute].
  ASSERT_TRUE(core.SetPolicy(root, ByPid(getpid()), Budget(0)).ok());
  EXPECT_EQ(SlotBudget(core, web->id), 300u);
  ASSERT_TRUE(core.SetPolicy(root, ByClass(kLs), Budget(0)).ok());
  EXPECT_EQ(core.class_defaults(kLs).budget_pct, 0u);
  EXPECT_EQ(SlotBudget(core, web->id), 120u);
  EXPECT_EQ(SlotBudget(core, api->id), 120u);

  // A tenant of 100 % keeps BE work off while it is busy, whatever the default.
  ASSERT_TRUE(core.SetPolicy(root, ByName("api"), Budget(100)).ok());
  EXPECT_EQ(SlotBudget(core, api->id), 100u);
  ASSERT_TRUE(core.SetPolicy(root, ByClass(kLs), Budget(200)).ok());
  EXPECT_EQ(SlotBudget(core, api->id), 100u);
  EXPECT_EQ(SlotBudget(core, web->id), 200u);
}

TEST(DaemonCoreBudgetTest, OutOfRangeAndBeTargetsAreRefusedAndChangeNothing) {
  std::vector<Gpu> gpus;
  gpus.push_back(PacedFakeGpu(100));
  DaemonCore core(CoreOptions{}, std::move(gpus));
  ASSERT_TRUE(core.Start().ok());
  const PeerCredentials root{getpid(), 0, 0};
  const PeerCredentials user{getpid(), 1000, 1000};
  auto ls = core.Register(user, "web", kLs, 0);
  auto be = core.Register(PeerCredentials{getppid(), 1000, 1000}, "batch", kBe, 0);
  ASSERT_TRUE(ls.ok() && be.ok());
  ASSERT_TRUE(core.SetPolicy(root, ByName("web"), Budget(200)).ok());

  for (uint32_t bad : {1u, 99u, 1001u, 5000u}) {
    for (const PolicyTarget& target : {ByName("web"), ByClass(kLs)}) {
      absl::StatusOr<uint32_t> refused = core.SetPolicy(root, target, Budget(bad));
      ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument) << bad;
      EXPECT_EQ(refused.status().message(),
                "budget_pct must be in [100, 1000] (or 0 to clear it), got " +
                    std::to_string(bad));
    }
  }
  // A budget with another change that is fine: neither is made.
  PolicyChange both = Budget(50);
  both.priority = -1;
  EXPECT_EQ(core.SetPolicy(root, ByName("web"), both).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(core.GetSession(user, ls->id)->priority, -10);

  absl::StatusOr<uint32_t> refused = core.SetPolicy(root, ByClass(kBe), Budget(150));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(refused.status().message(),
            "budget_pct: class be has no latency budget; only LS tenants have one");
  refused = core.SetPolicy(root, ByName("batch"), Budget(150));
  ASSERT_EQ(refused.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(refused.status().message().find("'batch' is a BE tenant, and only LS tenants have a "
                                            "latency budget"),
            std::string::npos)
      << refused.status();
  // An LS tenant moved to BE by the same change too, and it stays LS.
  PolicyChange to_be = Budget(150);
  to_be.cls = kBe;
  EXPECT_EQ(core.SetPolicy(root, ByName("web"), to_be).status().code(),
            absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(core.GetSession(user, ls->id)->cls, kLs);
  // A BE tenant moved to LS by the same change gets it.
  PolicyChange to_ls = Budget(250);
  to_ls.cls = kLs;
  ASSERT_TRUE(core.SetPolicy(root, ByName("batch"), to_ls).ok());
  EXPECT_EQ(SlotBudget(core, be->id), 250u);

  EXPECT_EQ(SlotBudget(core, ls->id), 200u) << "nothing refused changed it";
  EXPECT_EQ(core.class_defaults(kLs).budget_pct, 0u);
  EXPECT_EQ(core.class_defaults(kBe).budget_pct, 0u);
  // Only an administrator.
  EXPECT_EQ(core.SetPolicy(user, ByName("web"), Budget(300)).status().code(),
            absl::StatusCode::kPermissionDenied);
}

// A tenant's policy and the class defaults set at run time come back in a new core over the
// same state file, for the same name and uid only.
TEST(DaemonCoreStateTest, PolicyComesBackFromTheStateFile) {
  const std::string dir = ::testing::TempDir() + "/core_state_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  CoreOptions options;
  options.state_file = dir + "/policy.toml";
  const PeerCredentials root{getpid(), 0, 0};
  const PeerCredentials tenant{getpid(), 1000, 1000};
  {
    std::vector<Gpu> gpus;
    gpus.push_back(FakeGpu());
    DaemonCore core(options, std::move(gpus));
    ASSERT_TRUE(core.Start().ok());
    ASSERT_TRUE(core.Register(tenant, "web", kBe, 0).ok());
    PolicyChange change = Priority(-3);
    change.cls = kLs;
    change.quota_bytes = 4 * kG;
    ASSERT_TRUE(core.SetPolicy(root, ByName("web"), change).ok());
    ASSERT_TRUE(core.SetPolicy(root, ByClass(kBe), Priority(12)).ok());
    ASSERT_TRUE(core.SetPolicy(root, ByName("web"), Budget(175)).ok());
    ASSERT_TRUE(core.SetPolicy(root, ByClass(kLs), Budget(400)).ok());
  }
  std::vector<Gpu> gpus;
  gpus.push_back(PacedFakeGpu(100));
  DaemonCore core(options, std::move(gpus));
  ASSERT_TRUE(core.Start().ok());
  EXPECT_EQ(core.class_defaults(kBe).priority, 12);
  auto web = core.Register(tenant, "web", kBe, 0);
  ASSERT_TRUE(web.ok()) << web.status();
  EXPECT_EQ(web->cls, kLs);
  EXPECT_EQ(web->priority, -3);
  EXPECT_EQ(core.GetUsage(tenant, web->id, 0)->quota_bytes, 4 * kG);
  // Its own latency budget, on its pacing slot from registration; the LS class's is back.
  EXPECT_EQ(web->budget_pct, 175u);
  EXPECT_EQ(SlotBudget(core, web->id), 175u);
  EXPECT_EQ(core.class_defaults(kLs).budget_pct, 400u);
  // The same name under another uid is another tenant: the class defaults.
  auto other = core.Register(PeerCredentials{getppid(), 1001, 1001}, "web", kBe, 0);
  ASSERT_TRUE(other.ok()) << other.status();
  EXPECT_EQ(other->cls, kBe);
  EXPECT_EQ(other->priority, 12);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace missile::daemon
