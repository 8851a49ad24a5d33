// Multi-process tests of missiled with real tenants: the daemon and the tenant programs run as
// separate processes over the real Unix sockets, on the driver test double (tests/fakecuda),
// whose VMM chunks really share memory across processes.
#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "missile/colorer/profile.h"
#include "missile/common/fd_passing.h"
#include "missile/v1/missile.grpc.pb.h"
#include "subprocess.h"

namespace missile {
namespace {

namespace v1 = ::missile::v1;
using testing::Child;
using testing::ProcessResult;
using testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;

// The physical addresses on the first line of `text` that has them.
std::set<std::string> PhysOf(const std::string& text) {
  std::set<std::string> out;
  size_t pos = text.find("phys=");
  if (pos == std::string::npos) return out;
  size_t end = text.find('\n', pos);
  std::stringstream ss(text.substr(pos + 5, end == std::string::npos ? end : end - pos - 5));
  std::string item;
  while (std::getline(ss, item, ',')) out.insert(item);
  return out;
}

class DaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    chmod(dir_.path().c_str(), 0755);  // tenants running as another user must reach the socket
    shm_ = "/fakecuda-daemontest-" + std::to_string(getpid()) + "-" +
           ::testing::UnitTest::GetInstance()->current_test_info()->name();
    socket_ = dir_.path() + "/missiled.sock";
  }
  void TearDown() override {
    StopDaemon();
    unlink(("/dev/shm" + shm_).c_str());
  }

  std::map<std::string, std::string> FakeEnv() const {
    // A shallow stream queue (GPUs have a bounded command queue too) catches a shim that
    // enqueues a long gated copy before the daemon can grant any of it.
    return {{"FAKECUDA_SHM", shm_}, {"FAKECUDA_TOTAL_MEM", "1G"},
            {"FAKECUDA_PCIE_BYTES_PER_US", link_rate_}, {"FAKECUDA_STREAM_DEPTH", "64"},
            {"LD_PRELOAD", "<unset>"}};
  }

  // Writes the config (extra TOML appended to the defaults here) and starts missiled.
  void StartDaemon(const std::string& extra = "") {
    std::string config = dir_.path() + "/missiled.toml";
    std::ofstream(config) << "[daemon]\nsocket = \"" << socket_ << "\"\n"
                          << "log_level = \"debug\"\n" << extra_daemon_ << "\n"
                          << "[gpu]\nprofile_dir = \"" << dir_.path() << "/profiles\"\n"
                          << extra;
    chmod(config.c_str(), 0644);
    auto env = FakeEnv();
    env["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
    ASSERT_TRUE(daemon_.Start({MISSILED, "--config", config}, env));
    for (int i = 0; i < 500 && access(socket_.c_str(), F_OK) != 0; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    ASSERT_EQ(access(socket_.c_str(), F_OK), 0) << "missiled did not create " << socket_;
    channel_ = grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials());
    admin_ = v1::Admin::NewStub(channel_);
    tenant_ = v1::Tenant::NewStub(channel_);
  }

  void StopDaemon() {
    if (daemon_.running()) {
      daemon_.Kill(SIGTERM);
      daemon_exit_ = daemon_.Wait(10);
    }
  }

  std::map<std::string, std::string> TenantEnv(const std::string& cls,
                                               const std::string& name = "probe") const {
    auto env = FakeEnv();
    env["LD_PRELOAD"] = MISSILE_SHIM;
    env["MISSILE_REAL_LIBCUDA"] = FAKECUDA_LIB;
    env["MISSILE_SOCKET"] = socket_;
    env["MISSILE_TENANT_CLASS"] = cls;
    env["MISSILE_TENANT_NAME"] = name;
    return env;
  }

  v1::StatusResponse Status() {
    v1::StatusResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    grpc::Status s = admin_->Status(&ctx, v1::StatusRequest(), &resp);
    EXPECT_TRUE(s.ok()) << s.error_message();
    return resp;
  }

  uint64_t Leased() {
    auto st = Status();
    return st.pools_size() > 0 ? st.pools(0).leased_bytes() : ~0ull;
  }

  // Leased bytes once they settle at `want` (a tenant that exited is reaped asynchronously), or
  // what they are after three seconds.
  uint64_t LeasedWithin3s(uint64_t want) {
    uint64_t leased = Leased();
    for (int i = 0; i < 300 && leased != want; ++i) {
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
      leased = Leased();
    }
    return leased;
  }

  TempDir dir_;
  std::string shm_;
  std::string socket_;
  std::string extra_daemon_;
  std::string link_rate_ = "100000";  // simulated PCIe bytes per microsecond
  Child daemon_;
  int daemon_exit_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::Tenant::Stub> tenant_;
};

TEST_F(DaemonTest, TwoTenantsShareNothingAndEachSeesItsOwnQuota) {
  StartDaemon("[classes.be]\ntenant_quota = \"64MiB\"\n[classes.ls]\ntenant_quota = \"128MiB\"\n");
  Child be, ls;
  auto be_env = TenantEnv("be", "batch");
  be_env["MISSILE_BLOCKS"] = "chunks";  // one 2 MiB block per granule; the LS tenant: one block
  ASSERT_TRUE(be.Start({TENANT_PROBE, "info", "alloc:16", "hold", "check"}, be_env));
  ASSERT_EQ(be.WaitForLine("ready"), "ready");
  ASSERT_TRUE(ls.Start({TENANT_PROBE, "info", "alloc:16", "hold", "check"}, TenantEnv("ls", "web")));
  ASSERT_EQ(ls.WaitForLine("ready"), "ready");
  EXPECT_NE(be.out().find("total=67108864 devtotal=67108864"), std::string::npos) << be.out();
  EXPECT_NE(ls.out().find("total=134217728 devtotal=134217728"), std::string::npos) << ls.out();
  std::set<std::string> be_phys = PhysOf(be.out()), ls_phys = PhysOf(ls.out());
  ASSERT_EQ(be_phys.size(), 8u) << be.out();
  ASSERT_EQ(ls_phys.size(), 8u) << ls.out();
  for (const auto& p : be_phys) EXPECT_EQ(ls_phys.count(p), 0u) << "shared block at " << p;
  EXPECT_EQ(Leased(), 32 * kMiB);
  be.CloseStdin();
  ls.CloseStdin();
  EXPECT_EQ(be.Wait(), 0);
  EXPECT_EQ(ls.Wait(), 0);
  EXPECT_NE(be.out().find("check ok"), std::string::npos) << be.out();
  EXPECT_NE(ls.out().find("check ok"), std::string::npos) << ls.out();
}

TEST_F(DaemonTest, OverQuotaFailsCleanlyInOneTenantOnly) {
  StartDaemon("[classes.be]\ntenant_quota = \"64MiB\"\n");
  Child greedy, other;
  ASSERT_TRUE(greedy.Start({TENANT_PROBE, "alloc:48", "alloc:32", "check", "hold"},
                           TenantEnv("be", "greedy")));
  ASSERT_EQ(greedy.WaitForLine("ready"), "ready");
  EXPECT_NE(greedy.out().find("alloc 48 ok"), std::string::npos) << greedy.out();
  EXPECT_NE(greedy.out().find("alloc 32 err 2"), std::string::npos) << greedy.out();  // OOM
  EXPECT_NE(greedy.out().find("check ok"), std::string::npos) << greedy.out();
  ASSERT_TRUE(other.Start({TENANT_PROBE, "alloc:48", "check"}, TenantEnv("be", "other")));
  EXPECT_EQ(other.Wait(), 0);
  EXPECT_NE(other.out().find("alloc 48 ok"), std::string::npos) << other.out();
  EXPECT_NE(other.out().find("check ok"), std::string::npos) << other.out();
  greedy.CloseStdin();
  EXPECT_EQ(greedy.Wait(), 0);
}

TEST_F(DaemonTest, KilledTenantReturnsEverythingWithinASecond) {
  StartDaemon();
  Child victim;
  ASSERT_TRUE(victim.Start({TENANT_PROBE, "alloc:32", "small:20", "vmm:4", "loop:8:3", "hold"},
                           TenantEnv("be", "victim")));
  ASSERT_EQ(victim.WaitForLine("ready"), "ready");
  // 32 MiB, one block carved for the small allocations, the 4 MiB VMM block (released by the
  // program, but frees go back to the daemon in batches, so it is still held) and the 8 MiB the
  // loop freed, kept mapped by the shim for reuse.
  ASSERT_EQ(Leased(), 46 * kMiB);
  ASSERT_EQ(Status().tenants(), 1u);
  auto killed = std::chrono::steady_clock::now();
  victim.Kill(SIGKILL);
  victim.Wait();
  uint64_t leased = ~0ull;
  while (std::chrono::steady_clock::now() - killed < std::chrono::seconds(3)) {
    leased = Leased();
    if (leased == 0 && Status().tenants() == 0) break;
    std::this_thread::sleep_for(std::chrono::milliseconds(10));
  }
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - killed).count();
  EXPECT_EQ(leased, 0u);
  EXPECT_LT(seconds, 1.0);
  // The blocks are usable by the next tenant.
  Child next;
  ASSERT_TRUE(next.Start({TENANT_PROBE, "alloc:32", "check"}, TenantEnv("be", "next")));
  EXPECT_EQ(next.Wait(), 0);
  EXPECT_NE(next.out().find("check ok"), std::string::npos) << next.out();
}

// A block one tenant wrote and gave back reaches the next tenant scrubbed (the daemon maps a
// block only to scrub it, the first time it comes back).
TEST_F(DaemonTest, ReturnedBlocksAreScrubbedBeforeTheNextTenantGetsThem) {
  StartDaemon();
  Child first;
  ASSERT_TRUE(first.Start({TENANT_PROBE, "alloc:16", "freeall", "info"}, TenantEnv("be", "first")));
  EXPECT_EQ(first.Wait(), 0);
  ASSERT_NE(first.out().find("alloc 16 ok"), std::string::npos) << first.out();
  const std::set<std::string> written = PhysOf(first.out());
  ASSERT_EQ(written.size(), 8u) << first.out();
  ASSERT_EQ(LeasedWithin3s(0), 0u);
  Child next;
  ASSERT_TRUE(next.Start({TENANT_PROBE, "zero:16"}, TenantEnv("be", "next")));
  EXPECT_EQ(next.Wait(), 0);
  const std::string out = next.out();
  ASSERT_NE(out.find("zero 16 "), std::string::npos) << out;
  EXPECT_EQ(PhysOf(out.substr(out.find("zero 16 "))), written)
      << "the next tenant did not get the same block: " << out;
  EXPECT_NE(out.find("zero 16 yes"), std::string::npos) << out;
}

TEST_F(DaemonTest, SmallAllocationsAreCarvedFromHeldBlocks) {
  StartDaemon();
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "small:200", "hold"}, TenantEnv("ls")));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  EXPECT_NE(t.out().find("small 200 ok"), std::string::npos) << t.out();
  EXPECT_EQ(Leased(), 2 * kMiB);  // 200 x 4 KiB fit in one block: one round trip, not 200
  t.CloseStdin();
  EXPECT_EQ(t.Wait(), 0);
}

// An allocate-free loop of one size is served from the range the first allocation mapped: the
// shim imports its blocks once, and the daemon leases them once, whichever shape backs it. The
// freed range stays leased (counted against the tenant) until a capacity query returns it.
TEST_F(DaemonTest, AllocFreeLoopReusesTheFreedRange) {
  StartDaemon();
  for (const auto& [blocks, imports] : {std::pair{"single", 1}, std::pair{"chunks", 8}}) {
    SCOPED_TRACE(blocks);
    auto env = TenantEnv("ls", std::string("loop-") + blocks);
    env["MISSILE_BLOCKS"] = blocks;
    Child t;
    ASSERT_TRUE(t.Start({TENANT_PROBE, "loop:16:40", "hold"}, env));
    ASSERT_EQ(t.WaitForLine("ready"), "ready");
    EXPECT_NE(t.out().find("loop 16 40 ok imports=" + std::to_string(imports) + "\n"),
              std::string::npos) << t.out();
    EXPECT_EQ(Leased(), 16 * kMiB);  // the one range, cached
    t.CloseStdin();
    EXPECT_EQ(t.Wait(), 0);
    ASSERT_EQ(LeasedWithin3s(0), 0u);

    // cuMemGetInfo returns the cached range: the daemon's numbers are those of a tenant that
    // kept nothing.
    Child q;
    ASSERT_TRUE(q.Start({TENANT_PROBE, "loop:16:40", "info", "hold"}, env));
    ASSERT_EQ(q.WaitForLine("ready"), "ready");
    EXPECT_EQ(Leased(), 0u);
    size_t pos = q.out().find("info free=");
    ASSERT_NE(pos, std::string::npos) << q.out();
    uint64_t free_bytes = strtoull(q.out().c_str() + pos + 10, nullptr, 10);
    pos = q.out().find("total=", pos);
    uint64_t total_bytes = strtoull(q.out().c_str() + pos + 6, nullptr, 10);
    EXPECT_EQ(free_bytes, total_bytes) << q.out();
    q.CloseStdin();
    EXPECT_EQ(q.Wait(), 0);
    ASSERT_EQ(LeasedWithin3s(0), 0u);
  }
}

// The chunks the small-allocation carver gives back are reused like any freed range of their
// size (one granule).
TEST_F(DaemonTest, ChunksTheSmallAllocatorReleasesAreReused) {
  StartDaemon();
  Child t;
  // 1100 x 4 KiB fill three 2 MiB chunks; once freed, one stays with the carver and two are
  // cached, so the loop imports nothing.
  ASSERT_TRUE(t.Start({TENANT_PROBE, "small:1100", "freeall", "loop:2:10", "small:1", "check"},
                      TenantEnv("ls")));
  EXPECT_EQ(t.Wait(), 0);
  EXPECT_NE(t.out().find("small 1100 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("loop 2 10 ok imports=0\n"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("check ok"), std::string::npos) << t.out();
}

// The cache keeps at most 32 ranges and at most an eighth of the quota asked for (here 256 MiB:
// 32 MiB); past either, the oldest go back to the daemon and the next allocations of their size
// import again.
TEST_F(DaemonTest, ReuseCacheIsBoundedByCountAndBytes) {
  StartDaemon();
  Child by_count;
  ASSERT_TRUE(by_count.Start({TENANT_PROBE, "many:2:40", "freeall", "many:2:40", "check"},
                             TenantEnv("ls", "count")));
  EXPECT_EQ(by_count.Wait(), 0);
  EXPECT_NE(by_count.out().find("many 2 40 ok imports=40\n"), std::string::npos) << by_count.out();
  EXPECT_NE(by_count.out().find("many 2 40 ok imports=8\n"), std::string::npos) << by_count.out();
  EXPECT_NE(by_count.out().find("check ok"), std::string::npos) << by_count.out();
  ASSERT_EQ(LeasedWithin3s(0), 0u);

  auto env = TenantEnv("ls", "bytes");
  env["MISSILE_QUOTA"] = "256MiB";
  Child by_bytes;
  ASSERT_TRUE(by_bytes.Start({TENANT_PROBE, "many:16:4", "freeall", "many:16:4", "check",
                              "freeall", "alloc:64", "freeall", "loop:64:3"},
                             env));
  EXPECT_EQ(by_bytes.Wait(), 0);
  EXPECT_NE(by_bytes.out().find("many 16 4 ok imports=4\n"), std::string::npos) << by_bytes.out();
  EXPECT_NE(by_bytes.out().find("many 16 4 ok imports=2\n"), std::string::npos) << by_bytes.out();
  EXPECT_NE(by_bytes.out().find("check ok"), std::string::npos) << by_bytes.out();
  // A range larger than the bound is never cached: each allocation imports.
  EXPECT_NE(by_bytes.out().find("loop 64 3 ok imports=3\n"), std::string::npos) << by_bytes.out();
}

// The byte bound also follows the quota the daemon sets (here the BE class's), not only the one
// the tenant asks for.
TEST_F(DaemonTest, ReuseCacheBoundFollowsTheDaemonsQuota) {
  StartDaemon("[classes.be]\ntenant_quota = \"256MiB\"\n");
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "many:16:4", "freeall", "many:16:4", "check"},
                      TenantEnv("be", "bytes")));
  EXPECT_EQ(t.Wait(), 0);
  EXPECT_NE(t.out().find("many 16 4 ok imports=4\n"), std::string::npos) << t.out();
  // An eighth of 256 MiB: two of the four 16 MiB ranges stayed cached.
  EXPECT_NE(t.out().find("many 16 4 ok imports=2\n"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("check ok"), std::string::npos) << t.out();
}

// Memory the tenant freed but the shim still caches counts against its quota; an allocation
// that only fits once it goes back must succeed, and the data of the next allocation is its own.
TEST_F(DaemonTest, AllocationOverQuotaReturnsTheCacheAndSucceeds) {
  StartDaemon("[classes.be]\ntenant_quota = \"64MiB\"\n");
  for (const char* blocks : {"single", "chunks"}) {
    SCOPED_TRACE(blocks);
    auto env = TenantEnv("be", std::string("quota-") + blocks);
    env["MISSILE_BLOCKS"] = blocks;
    Child t;
    ASSERT_TRUE(t.Start({TENANT_PROBE, "alloc:48", "freeall", "alloc:32", "alloc:30", "check",
                         "info", "hold"},
                        env));
    ASSERT_EQ(t.WaitForLine("ready"), "ready");
    EXPECT_NE(t.out().find("alloc 48 ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("alloc 32 ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("alloc 30 ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("check ok"), std::string::npos) << t.out();
    EXPECT_NE(t.out().find("info free=2097152 total=67108864"), std::string::npos) << t.out();
    EXPECT_EQ(Leased(), 62 * kMiB);
    t.CloseStdin();
    EXPECT_EQ(t.Wait(), 0);
    ASSERT_EQ(LeasedWithin3s(0), 0u);
  }
}

TEST_F(DaemonTest, VmmStreamOrderedAndPointerQueriesWork) {
  StartDaemon();
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "vmm:6", "async:8", "alloc:3", "range", "freeall", "info"},
                      TenantEnv("be")));
  EXPECT_EQ(t.Wait(), 0);
  EXPECT_NE(t.out().find("vmm 6 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("async 8 ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("range base_ok=1 size=3145728 rc=0"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("freeall ok"), std::string::npos) << t.out();
}

TEST_F(DaemonTest, NonAdminCannotChangePolicy) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run missilectl as another user";
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
  extra_daemon_ = "socket_group = \"nogroup\"\n";
  StartDaemon();
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "victim")));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  ProcessResult denied = testing::Run(
      {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", MISSILECTL,
       "--socket", socket_, "set", "--name", "victim", "--priority", "-20"});
  EXPECT_EQ(denied.exit_code, 1) << denied.out << denied.err;
  EXPECT_NE(denied.err.find("PERMISSION_DENIED"), std::string::npos) << denied.err;
  // A non-admin may still read.
  ProcessResult read = testing::Run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                     "--clear-groups", MISSILECTL, "--socket", socket_, "tenants"});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_NE(read.out.find("victim"), std::string::npos) << read.out;
  ProcessResult allowed = testing::Run(
      {MISSILECTL, "--socket", socket_, "set", "--name", "victim", "--priority", "-20"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  ProcessResult json = testing::Run({MISSILECTL, "--socket", socket_, "--json", "tenants"});
  EXPECT_NE(json.out.find("\"priority\":-20"), std::string::npos) << json.out;
  t.CloseStdin();
  t.Wait();
}

TEST_F(DaemonTest, MalformedAndOversizedRequestsGetClearErrorsAndChangeNothing) {
  StartDaemon();
  auto call = [](auto fn) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return fn(&ctx);
  };
  v1::RegisterRequest reg;
  v1::RegisterResponse reg_resp;
  reg.set_name("");
  reg.set_tenant_class(v1::BEST_EFFORT);
  EXPECT_EQ(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  reg.set_name("ok-name");
  reg.set_tenant_class(v1::TENANT_CLASS_UNSPECIFIED);
  EXPECT_EQ(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  reg.set_name("bad name; rm -rf");
  reg.set_tenant_class(v1::BEST_EFFORT);
  EXPECT_EQ(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  reg.set_name("tester");
  ASSERT_TRUE(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).ok());
  uint64_t session = reg_resp.session_id();

  auto allocate = [&](uint64_t sess, uint32_t gpu, v1::AllocateRequest::Shape shape, uint64_t bytes) {
    v1::AllocateRequest req;
    req.set_session_id(sess);
    req.set_gpu_index(gpu);
    req.set_shape(shape);
    req.set_bytes(bytes);
    v1::AllocateResponse resp;
    return call([&](auto* c) { return tenant_->Allocate(c, req, &resp); }).error_code();
  };
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 3 * kMiB), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 0), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, uint64_t{1} << 62),
            grpc::StatusCode::INVALID_ARGUMENT);  // larger than the whole pool
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 960 * kMiB),
            grpc::StatusCode::OK);  // the pool (972 MiB) holds it: this one is real
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 64 * kMiB),
            grpc::StatusCode::RESOURCE_EXHAUSTED);  // but not 64 MiB more
  EXPECT_EQ(allocate(session, 7, v1::AllocateRequest::CHUNKS, 2 * kMiB), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::SHAPE_UNSPECIFIED, 2 * kMiB),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session + 1000, 0, v1::AllocateRequest::CHUNKS, 2 * kMiB),
            grpc::StatusCode::NOT_FOUND);
  v1::FreeRequest free_req;
  free_req.set_session_id(session);
  free_req.add_block_ids(123456);
  v1::FreeResponse free_resp;
  EXPECT_EQ(call([&](auto* c) { return tenant_->Free(c, free_req, &free_resp); }).error_code(),
            grpc::StatusCode::NOT_FOUND);
  free_req.clear_block_ids();
  EXPECT_EQ(call([&](auto* c) { return tenant_->Free(c, free_req, &free_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Another process cannot use this session: a tenant's blocks belong to its process.
  Child other;
  ASSERT_TRUE(other.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "other")));
  ASSERT_EQ(other.WaitForLine("ready"), "ready");
  uint64_t leased = Leased();
  EXPECT_EQ(leased, 962 * kMiB);  // our 960 MiB and the other tenant's 2 MiB

  // Garbage on the gRPC socket and a forged side-channel hello do not hurt anyone.
  int sock = -1;
  ASSERT_TRUE(fdpass::ConnectUnix(socket_, &sock).ok());
  const char junk[] = "GET / HTTP/1.1\r\n\r\n\x00\xff\xfe garbage";
  ASSERT_GT(write(sock, junk, sizeof(junk)), 0);
  close(sock);
  ASSERT_TRUE(fdpass::ConnectUnix(socket_ + ".fd", &sock).ok());
  fdpass::Hello hello;
  hello.session_id = session;  // our own session, but the wrong token
  fdpass::Reply reply;
  ASSERT_TRUE(fdpass::SendMessage(sock, &hello, sizeof(hello)).ok());
  ASSERT_TRUE(fdpass::ReceiveMessage(sock, &reply, sizeof(reply)).ok());
  EXPECT_EQ(reply.status, static_cast<uint32_t>(absl::StatusCode::kPermissionDenied));
  close(sock);

  EXPECT_EQ(Leased(), leased);  // nothing changed
  other.CloseStdin();
  EXPECT_EQ(other.Wait(), 0);
  EXPECT_NE(other.out().find("alloc 2 ok"), std::string::npos) << other.out();
}

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

double Field(const std::string& out, const std::string& key) {
  size_t pos = out.find(key + "=");
  return pos == std::string::npos ? -1 : atof(out.c_str() + pos + key.size() + 1);
}

// The PCIe scheduler, end to end on the test double's simulated link (one FIFO DMA queue per
// direction shared by all processes, like the hardware): an LS tenant's 4 MiB copies while a
// BE tenant streams 256 MiB copies. At 1000 bytes/us a 1 MiB chunk takes 1 ms.
TEST_F(DaemonTest, PcieSchedulerKeepsAnLsCopyFastUnderBulkCopies) {
  link_rate_ = "1000";
  // The simulated link moves a chunk in a millisecond, so keeping the arbiter polling after LS
  // requests buys nothing here, and on a machine with two cores it takes one from the tenants.
  // The BE tenant starts on the default be_chunk (16 MiB) and shrinks to 1 MiB chunks once the
  // LS tenant copies; the few LS copies that meet 16 MiB chunks do not move the median checked.
  StartDaemon("[pcie]\nchunk = \"1MiB\"\nmax_inflight_chunks = 1\nmax_inflight_per_tenant = 1\n"
              "ls_spin_us = 0\n");
  auto plain = FakeEnv();
  plain["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
  auto measure_ls = [&](const std::map<std::string, std::string>& env) {
    ProcessResult r = testing::Run({COPY_PROBE, "lat", "4", "20", "20"}, env, 120);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("data ok"), std::string::npos) << r.out;
    return Field(r.out, "p50_us");
  };
  double alone = measure_ls(plain);
  ASSERT_GT(alone, 0);

  double unmanaged = 0;
  {
    Child be;
    ASSERT_TRUE(be.Start({COPY_PROBE, "bulk", "256", "4", "-", "async"}, plain));
    ASSERT_EQ(be.WaitForLine("ready"), "ready");
    unmanaged = measure_ls(plain);
    EXPECT_EQ(be.Wait(60), 0);
  }
  double managed = 0;
  std::string be_out;
  {
    Child be;
    ASSERT_TRUE(be.Start({COPY_PROBE, "bulk", "256", "4", "-", "async"}, TenantEnv("be", "bulk")));
    ASSERT_EQ(be.WaitForLine("ready"), "ready");
    managed = measure_ls(TenantEnv("ls", "web"));
    EXPECT_EQ(be.Wait(60), 0);
    be_out = be.out();
  }
  printf("LS 4 MiB copy p50: alone %.0f us, next to BE bulk copies %.0f us unmanaged, %.0f us "
         "with Missile; BE: %s\n", alone, unmanaged, managed, be_out.c_str());
  RecordProperty("ls_alone_p50_us", std::to_string(alone));
  RecordProperty("ls_unmanaged_p50_us", std::to_string(unmanaged));
  RecordProperty("ls_missile_p50_us", std::to_string(managed));
  EXPECT_GE(unmanaged, 10 * alone) << "alone " << alone << " us, unmanaged " << unmanaged;
  EXPECT_LE(managed, 1.5 * alone) << "alone " << alone << " us, with Missile " << managed;
  EXPECT_GT(Field(be_out, "copies"), 0) << be_out;  // the BE tenant still moved data
  EXPECT_NE(be_out.find("data ok"), std::string::npos) << be_out;
}

// A copy queued behind other work on its stream (here a host function that sleeps, as a long
// kernel would) is not granted until its stream reaches it: it must not hold the only chunk in
// flight while an LS tenant's copies wait.
TEST_F(DaemonTest, PcieCopyWaitingOnItsStreamDoesNotHoldTheLink) {
  link_rate_ = "1000";
  StartDaemon("[pcie]\nchunk = \"1MiB\"\nbe_chunk = \"0\"\nmax_inflight_chunks = 1\n"
              "max_inflight_per_tenant = 1\nls_spin_us = 0\n");  // as in the test above
  auto measure_ls = [&]() {
    ProcessResult r = testing::Run({COPY_PROBE, "lat", "4", "30", "10"}, TenantEnv("ls", "web"), 120);
    EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
    EXPECT_NE(r.out.find("data ok"), std::string::npos) << r.out;
    return Field(r.out, "p50_us");
  };
  double alone = measure_ls();
  ASSERT_GT(alone, 0);
  for (const char* mode : {"async", "sync"}) {  // a synchronous copy waits on the legacy stream
    Child be;
    ASSERT_TRUE(be.Start({COPY_PROBE, "bulk", "2", "3", "-", mode, "stall:100"},
                         TenantEnv("be", "stalled")));
    ASSERT_EQ(be.WaitForLine("ready"), "ready");
    double next_to_stalled = measure_ls();
    EXPECT_EQ(be.Wait(60), 0) << be.out();
    printf("LS 4 MiB copy p50: alone %.0f us, next to a BE whose %s copies wait 100 ms on their "
           "stream %.0f us; BE: %s\n", alone, mode, next_to_stalled, be.out().c_str());
    EXPECT_LE(next_to_stalled, 1.5 * alone) << mode << ": alone " << alone
                                            << " us, next to the stalled BE " << next_to_stalled;
    EXPECT_GT(Field(be.out(), "copies"), 0) << be.out();
    EXPECT_NE(be.out().find("data ok"), std::string::npos) << be.out();
  }
}

// When the driver refuses a stream memory operation around a scheduled chunk, the program still
// gets its copy (the rest goes unscheduled) and later copies are scheduled as before.
TEST_F(DaemonTest, FailedStreamMemoryOperationStillCopies) {
  link_rate_ = "100000";
  StartDaemon("[pcie]\nchunk = \"1MiB\"\n");
  auto env = TenantEnv("ls", "web");
  env["FAKECUDA_FAIL"] = "cuStreamWriteValue32_v2:2,cuStreamWaitValue32_v2:3";
  ProcessResult r = testing::Run({COPY_PROBE, "lat", "4", "10", "1", "async"}, env, 60);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_NE(r.out.find("data ok"), std::string::npos) << r.out;
  EXPECT_NE(r.err.find("the copy goes on unscheduled"), std::string::npos) << r.err;
}

// A copy of more chunks than a quarter of the gates (here 4800 chunks of 64 KiB, more than there are gates) goes as several
// requests: scheduled, intact, and without running out of gates.
TEST_F(DaemonTest, CopyLargerThanTheGatesIsScheduledInPieces) {
  // be_chunk 0: the BE tenant's copy is cut into 64 KiB chunks even while no LS tenant copies.
  StartDaemon("[pcie]\nchunk = \"64KiB\"\nbe_chunk = \"0\"\n");
  for (const char* mode : {"async", "sync"}) {
    auto env = TenantEnv("be", "big");
    std::string report = dir_.path() + "/big-" + mode + ".report";
    env["MISSILE_REPORT"] = report;
    ProcessResult r = testing::Run({COPY_PROBE, "lat", "300", "2", "1", mode}, env, 120);
    EXPECT_EQ(r.exit_code, 0) << mode << r.out << r.err;
    EXPECT_NE(r.out.find("data ok"), std::string::npos) << mode << r.out;
    EXPECT_EQ(r.err.find("outstanding"), std::string::npos) << mode << r.err;
    std::ifstream in(report);
    std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
    // The warm-up and two measured copies, plus the check's copy back.
    EXPECT_NE(text.find("# 4 host-device copies went through the PCIe scheduler"),
              std::string::npos) << mode << text;
  }
}

// 2D and 3D copies between host and device memory (pinned, pageable, and given as unified
// addresses; synchronous and asynchronous), and ranges between host memory and an array, go
// through the scheduler in 64 KiB chunks that start and end inside rows, and every byte lands
// where the whole copy would have put it. 2D copies with an array side, and descriptions the
// driver rejects, go to the driver whole: the rejected ones fail as they would without Missile.
TEST_F(DaemonTest, ShapedAndArrayCopiesAreScheduledAndIntact) {
  // The probe itself, on the test double alone: its checks pass without Missile.
  auto plain = FakeEnv();
  plain["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
  ProcessResult alone = testing::Run({SHAPE_PROBE}, plain, 60);
  ASSERT_EQ(alone.exit_code, 0) << alone.out << alone.err;
  ASSERT_NE(alone.out.find("data ok"), std::string::npos) << alone.out;

  StartDaemon("[pcie]\nchunk = \"64KiB\"\nbe_chunk = \"0\"\n");
  auto env = TenantEnv("be", "shapes");
  const std::string report = dir_.path() + "/shapes.report";
  env["MISSILE_REPORT"] = report;
  ProcessResult r = testing::Run({SHAPE_PROBE}, env, 120);
  EXPECT_EQ(r.exit_code, 0) << r.out << r.err;
  EXPECT_EQ(r.out.find("corrupt"), std::string::npos) << r.out;
  EXPECT_NE(r.out.find("data ok"), std::string::npos) << r.out;
  const int copies = static_cast<int>(Field(r.out, "copies"));
  const int array_side = static_cast<int>(Field(r.out, "array_side"));
  EXPECT_EQ(copies, 30) << r.out;
  EXPECT_EQ(array_side, 4) << r.out;
  // 2D copies with an array side, and the two the driver rejects, are passed to it whole.
  std::ifstream in(report);
  std::string text((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  EXPECT_NE(text.find("# " + std::to_string(copies - array_side) +
                      " host-device copies went through the PCIe scheduler"),
            std::string::npos) << text;
}

// A daemon that dies without warning (SIGKILL) must not hang the tenants' scheduled copies:
// the shim notices the session is gone and lets every waiting chunk through.
TEST_F(DaemonTest, KilledDaemonDoesNotHangScheduledCopies) {
  link_rate_ = "1000";
  StartDaemon("[pcie]\nchunk = \"1MiB\"\nmax_inflight_chunks = 1\nmax_inflight_per_tenant = 1\n");
  Child bulk, lat;
  ASSERT_TRUE(bulk.Start({COPY_PROBE, "bulk", "64", "3", "-", "async"}, TenantEnv("be", "bulk")));
  ASSERT_TRUE(lat.Start({COPY_PROBE, "lat", "4", "200", "5"}, TenantEnv("ls", "web")));
  ASSERT_EQ(bulk.WaitForLine("ready"), "ready");
  ASSERT_EQ(lat.WaitForLine("ready"), "ready");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  daemon_.Kill(SIGKILL);
  daemon_.Wait();
  EXPECT_EQ(bulk.Wait(30), 0) << bulk.out();
  EXPECT_EQ(lat.Wait(30), 0) << lat.out();
  EXPECT_NE(bulk.out().find("data ok"), std::string::npos) << bulk.out();
  EXPECT_NE(lat.out().find("data ok"), std::string::npos) << lat.out();
  EXPECT_GT(Field(bulk.out(), "copies"), 0) << bulk.out();
}

// Colour placement end to end: a profile for the test double's GPU with a one-bit XOR channel
// hash (2 MiB chunks alternate between two channels), blocks whose synthetic physical
// addresses the test double reports, and an LS and a BE tenant that must land on disjoint
// channels.
TEST_F(DaemonTest, ColourPlacementPutsLsAndBeOnDisjointChannels) {
  constexpr uint64_t kMask = uint64_t{1} << 21;
  colorer::GpuColourProfile profile;
  profile.gpu_name = "Fake GPU (missile test double)";
  profile.uuid = "GPU-66616b65-6375-6461-2d67-707500000000";  // the test double's device 0
  profile.driver_version = "test double";
  profile.tool_version = "test";
  profile.date = "2026-11-29T00:00:00Z";
  profile.granularity_bytes = 2 * kMiB;
  profile.colours = 2;
  profile.channel_map.kind = colorer::ChannelMapSpec::Kind::kXor;
  profile.channel_map.masks = {kMask};
  mkdir((dir_.path() + "/profiles").c_str(), 0755);
  ASSERT_TRUE(colorer::SaveProfile(profile, dir_.path() + "/profiles/" + profile.uuid + ".toml").ok());
  StartDaemon();
  Child ls, be;
  ASSERT_TRUE(ls.Start({TENANT_PROBE, "alloc:16", "hold", "check"}, TenantEnv("ls", "web")));
  ASSERT_EQ(ls.WaitForLine("ready"), "ready");
  ASSERT_TRUE(be.Start({TENANT_PROBE, "alloc:16", "hold", "check"}, TenantEnv("be", "batch")));
  ASSERT_EQ(be.WaitForLine("ready"), "ready");
  auto channels = [&](const std::string& out) {
    std::set<int> set;
    for (const std::string& p : PhysOf(out)) set.insert((std::stoull(p) & kMask) != 0);
    return set;
  };
  std::set<int> ls_channels = channels(ls.out()), be_channels = channels(be.out());
  ASSERT_EQ(PhysOf(ls.out()).size(), 8u) << ls.out();
  ASSERT_EQ(PhysOf(be.out()).size(), 8u) << be.out();
  EXPECT_EQ(ls_channels.size(), 1u) << ls.out();
  EXPECT_EQ(be_channels.size(), 1u) << be.out();
  EXPECT_NE(ls_channels, be_channels) << "LS and BE share a channel";
  v1::StatusResponse st = Status();
  ASSERT_EQ(st.pools_size(), 1);
  const v1::PoolStatus& pool = st.pools(0);
  EXPECT_EQ(pool.gpu().colours(), 2u);
  ASSERT_EQ(pool.colours_size(), 2);
  uint64_t capacity = 0, used = 0;
  for (const v1::ColourUse& c : pool.colours()) {
    capacity += c.capacity_bytes();
    used += c.used_bytes();
  }
  EXPECT_EQ(capacity, pool.created_bytes());  // capacity per colour adds up
  EXPECT_EQ(used, pool.leased_bytes());
  EXPECT_EQ(used, 32 * kMiB);
  ls.CloseStdin();
  be.CloseStdin();
  EXPECT_EQ(ls.Wait(), 0);
  EXPECT_EQ(be.Wait(), 0);
  EXPECT_NE(ls.out().find("check ok"), std::string::npos);
  EXPECT_NE(be.out().find("check ok"), std::string::npos);
}

TEST_F(DaemonTest, BadConfigurationIsRejectedNamingTheKey) {
  std::string config = dir_.path() + "/bad.toml";
  std::ofstream(config) << "[daemon]\nsockt = \"/tmp/x\"\n";
  chmod(config.c_str(), 0644);
  auto env = FakeEnv();
  env["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
  ProcessResult r = testing::Run({MISSILED, "--config", config}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("daemon.sockt"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace missile
