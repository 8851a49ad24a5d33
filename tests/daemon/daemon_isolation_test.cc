// Multi-process tests of tenant isolation across a daemon stall and across a tenant that keeps
// a mapping of a block it gave back: no physical memory is ever shared between tenants, and a
// session ends only when its process exits.
//
// When the test runs as root, the second tenant runs as another user (uid 65534, through
// setpriv), as in a real deployment; otherwise both tenants share the test's uid and the test
// says so.
#include <fcntl.h>
#include <signal.h>
#include <sys/mman.h>
#include <sys/stat.h>

#include <algorithm>
#include <cstring>
#include <functional>
#include <iostream>
#include <fstream>
#include <vector>

#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

using Clock = std::chrono::steady_clock;
constexpr int kOtherUid = 65534;
// The test double keeps a block's bytes after a header page of its memfd (tests/fakecuda/vmm.cc).
constexpr off_t kChunkHeaderBytes = 4096;

bool Eventually(const std::function<bool()>& done, std::chrono::milliseconds limit) {
  const auto until = Clock::now() + limit;
  while (Clock::now() < until) {
    if (done()) return true;
    std::this_thread::sleep_for(std::chrono::milliseconds(20));
  }
  return done();
}

class IsolationTest : public DaemonTest {
 protected:
  // The daemon, with its test-double state readable by a tenant of another uid.
  void StartShared() {
    daemon_log_ = dir_.path() + "/missiled.log";
    // The other user reaches the socket through its group, as a tenant group would.
    if (geteuid() == 0) extra_daemon_ = "socket_group = \"nogroup\"\n";
    StartDaemon();
    chmod(("/dev/shm" + shm_).c_str(), 0666);
  }

  // argv for a tenant program run as the other user when the test runs as root.
  std::vector<std::string> AsOtherUser(std::vector<std::string> argv) {
    if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
      other_uid_ = false;
      return argv;
    }
    other_uid_ = true;
    std::vector<std::string> out = {"/usr/bin/setpriv", "--reuid=" + std::to_string(kOtherUid),
                                    "--regid=" + std::to_string(kOtherUid), "--clear-groups"};
    out.insert(out.end(), argv.begin(), argv.end());
    return out;
  }

  void SayWhetherUidsDiffer() {
    RecordProperty("tenants_of_two_uids", other_uid_ ? "yes" : "no");
    if (!other_uid_) {
      std::cout << "[ NOTE     ] not root (or no setpriv): both tenants run as uid " << geteuid()
                << "; the cross-uid part is not exercised\n";
    }
  }

  std::set<uint32_t> ListedPids() {
    v1::ListTenantsResponse resp;
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    std::set<uint32_t> pids;
    if (!admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp).ok()) return pids;
    for (const auto& t : resp.tenants()) pids.insert(t.pid());
    return pids;
  }

  bool other_uid_ = false;
};

// A tenant written by hand, as an attacker would: it registers, leases blocks, maps their
// descriptors itself (the test double's blocks are memfds) and keeps the mappings.
class RawTenant {
 public:
  explicit RawTenant(v1::Tenant::Stub* stub) : stub_(stub) {}
  ~RawTenant() {
    for (auto [p, n] : maps_) munmap(p, n);
    if (side_ >= 0) close(side_);
  }

  void Register() {
    v1::RegisterRequest req;
    req.set_protocol_version(1);
    req.set_name("raw");
    req.set_tenant_class(v1::BEST_EFFORT);
    v1::RegisterResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Register(&ctx, req, &resp).ok());
    session_ = resp.session_id();
    ASSERT_TRUE(fdpass::ConnectUnix(resp.side_channel_path(), &side_, 5000).ok());
    fdpass::Hello hello;
    hello.session_id = session_;
    memcpy(hello.token, resp.side_channel_token().data(), 16);
    fdpass::Reply reply;
    ASSERT_TRUE(fdpass::SendMessage(side_, &hello, sizeof(hello)).ok());
    ASSERT_TRUE(fdpass::ReceiveMessage(side_, &reply, sizeof(reply)).ok());
    ASSERT_EQ(reply.status, 0u);
  }

  // Leases one 2 MiB block, maps it and fills it with `pattern`; returns its id.
  uint64_t LeaseAndFill(unsigned char pattern) {
    v1::AllocateRequest req;
    req.set_session_id(session_);
    req.set_shape(v1::AllocateRequest::CHUNKS);
    req.set_bytes(2 * kMiB);
    v1::AllocateResponse resp;
    grpc::ClientContext ctx;
    grpc::Status s = stub_->Allocate(&ctx, req, &resp);
    EXPECT_TRUE(s.ok() && resp.blocks_size() == 1) << s.error_message();
    if (!s.ok() || resp.blocks_size() != 1) return 0;
    fdpass::FetchRequest fetch;
    fetch.op = fdpass::kFetchBlocks;
    fetch.count = 1;
    fetch.block_ids[0] = resp.blocks(0).id();
    fdpass::Reply reply;
    std::vector<int> fds;
    EXPECT_TRUE(fdpass::SendMessage(side_, &fetch, sizeof(fetch)).ok());
    EXPECT_TRUE(fdpass::ReceiveMessage(side_, &reply, sizeof(reply), &fds).ok());
    EXPECT_EQ(fds.size(), 1u);
    if (fds.size() != 1) return 0;
    void* p = mmap(nullptr, 2 * kMiB, PROT_READ | PROT_WRITE, MAP_SHARED, fds[0], kChunkHeaderBytes);
    close(fds[0]);
    EXPECT_NE(p, MAP_FAILED) << strerror(errno);
    if (p == MAP_FAILED) return 0;
    memset(p, pattern, 2 * kMiB);
    maps_.emplace_back(static_cast<unsigned char*>(p), 2 * kMiB);
    return resp.blocks(0).id();
  }

  void Free(uint64_t id) {
    v1::FreeRequest req;
    req.set_session_id(session_);
    req.add_block_ids(id);
    v1::FreeResponse resp;
    grpc::ClientContext ctx;
    ASSERT_TRUE(stub_->Free(&ctx, req, &resp).ok());
  }

  // Closing its own side channel: before, this ended the session and took its blocks back.
  void CloseSideChannel() {
    close(side_);
    side_ = -1;
  }

  // Bytes of the kept mappings equal to `value`.
  size_t Count(unsigned char value) const {
    size_t n = 0;
    for (auto [p, bytes] : maps_) n += std::count(p, p + bytes, value);
    return n;
  }
  void Fill(unsigned char value) {
    for (auto [p, bytes] : maps_) memset(p, value, bytes);
  }
  uint64_t session() const { return session_; }

 private:
  v1::Tenant::Stub* stub_;
  uint64_t session_ = 0;
  int side_ = -1;
  std::vector<std::pair<unsigned char*, size_t>> maps_;
};

// Tenant A keeps the mappings of a block it freed and of a block it held when it closed its own
// side channel; tenant B (another uid when run as root) then allocates, writes and checks. A
// must not see B's bytes, and B's bytes must not change when A writes through its mappings.
TEST_F(IsolationTest, AKeptMappingNeverReachesAnotherTenantsMemory) {
  StartShared();
  RawTenant a(tenant_.get());
  ASSERT_NO_FATAL_FAILURE(a.Register());
  // Outside the probe's patterns (its pid % 251 + 1, 1-251), so B's bytes never look like A's
  // (0xa1 collided with one pid in 251).
  const unsigned char kA = 0xfe;
  const uint64_t freed = a.LeaseAndFill(kA);
  const uint64_t kept = a.LeaseAndFill(kA);
  ASSERT_NE(freed, 0u);
  ASSERT_NE(kept, 0u);
  a.Free(freed);
  a.CloseSideChannel();
  std::this_thread::sleep_for(std::chrono::milliseconds(300));  // the daemon sees it closed

  Child b;
  auto env_b = TenantEnv("be", "other");
  env_b["MISSILE_BLOCKS"] = "chunks";  // 2 MiB blocks, the size of the ones A gave back
  ASSERT_TRUE(b.Start(AsOtherUser({TENANT_PROBE, "alloc:8", "hold", "check"}), env_b));
  SayWhetherUidsDiffer();
  ASSERT_EQ(b.WaitForLine("ready"), "ready") << b.out();
  ASSERT_NE(b.out().find("alloc 8 ok"), std::string::npos) << b.out();
  ASSERT_TRUE(ListedPids().contains(static_cast<uint32_t>(b.pid())))
      << "tenant B is not served by the daemon";
  const unsigned char kB = static_cast<unsigned char>(b.pid() % 251 + 1);
  ASSERT_NE(kB, kA);
  EXPECT_EQ(a.Count(kB), 0u) << "tenant A reads tenant B's memory through a kept mapping";
  a.Fill(static_cast<unsigned char>(~kB));  // A writes where B's memory would be
  b.CloseStdin();
  EXPECT_EQ(b.Wait(20), 0) << b.out();
  EXPECT_NE(b.out().find("check ok"), std::string::npos)
      << "tenant A's writes reached tenant B's memory: " << b.out();
  EXPECT_TRUE(ListedPids().contains(static_cast<uint32_t>(getpid())))
      << "closing its side channel ended tenant A's session while it runs";
}

// The daemon stalls (SIGSTOP) longer than the shims' timeout, then goes on. Both tenants fall
// back meanwhile, register again into their own sessions once it answers, and no byte of either
// changes; the daemon lists both afterwards.
TEST_F(IsolationTest, ADaemonStallKeepsEveryTenantsSessionAndMemory) {
  StartShared();
  const std::string stalled = dir_.path() + "/stalled", resumed = dir_.path() + "/resumed";
  const std::string done = dir_.path() + "/done";
  const std::vector<std::string> steps = {
      TENANT_PROBE, "alloc:4", "await:" + stalled, "alloc:2", "await:" + resumed, "alloc:4",
      "check",      "hold",    "check",  "freeall", "info",  "await:" + done};
  auto env = TenantEnv("be", "a");
  env["MISSILE_DAEMON_TIMEOUT_MS"] = "1000";
  env["MISSILE_NO_DAEMON"] = "passthrough";
  env["MISSILE_REPORT"] = dir_.path() + "/report.%p";
  auto env_b = env;
  env_b["MISSILE_TENANT_NAME"] = "b";
  env_b.erase("MISSILE_REPORT");  // the other user may not write into the test's directory
  const std::string log_a = dir_.path() + "/a.err", log_b = dir_.path() + "/b.err";
  Child a, b;
  ASSERT_TRUE(a.Start(steps, env, log_a));
  ASSERT_TRUE(b.Start(AsOtherUser(steps), env_b, log_b));
  SayWhetherUidsDiffer();
  ASSERT_EQ(a.WaitForLine("awaiting"), "awaiting") << a.out();
  ASSERT_EQ(b.WaitForLine("awaiting"), "awaiting") << b.out();
  ASSERT_NE(a.out().find("alloc 4 ok"), std::string::npos) << a.out();
  ASSERT_NE(b.out().find("alloc 4 ok"), std::string::npos) << b.out();
  const uint64_t leased_before = Leased();
  ASSERT_EQ(leased_before, 2 * 4 * kMiB) << "both tenants are served by the daemon";

  ASSERT_EQ(kill(daemon_.pid(), SIGSTOP), 0);
  // The keepalive (1 s) and its timeout (1 s) pass: both shims give the daemon up.
  std::this_thread::sleep_for(std::chrono::milliseconds(3000));
  std::ofstream(stalled) << "";
  EXPECT_EQ(a.WaitForLine("alloc 2", 10).rfind("alloc 2 ok", 0), 0u) << a.out();
  EXPECT_EQ(b.WaitForLine("alloc 2", 10).rfind("alloc 2 ok", 0), 0u) << b.out();
  ASSERT_EQ(kill(daemon_.pid(), SIGCONT), 0);

  auto registered_again = [](const std::string& log) {
    return testing::ReadFile(log).find("registered again") != std::string::npos;
  };
  EXPECT_TRUE(Eventually([&] { return registered_again(log_a) && registered_again(log_b); },
                         std::chrono::milliseconds(15000)))
      << "a: " << testing::ReadFile(log_a) << "b: " << testing::ReadFile(log_b);
  std::ofstream(resumed) << "";
  ASSERT_EQ(a.WaitForLine("ready"), "ready") << a.out();
  ASSERT_EQ(b.WaitForLine("ready"), "ready") << b.out();
  EXPECT_NE(a.out().find("check ok"), std::string::npos) << a.out();
  EXPECT_NE(b.out().find("check ok"), std::string::npos) << b.out();
  EXPECT_EQ(a.out().find("alloc 4 err"), std::string::npos) << a.out();

  const std::set<uint32_t> listed = ListedPids();
  EXPECT_TRUE(listed.contains(static_cast<uint32_t>(a.pid()))) << "tenant A is not listed";
  EXPECT_TRUE(listed.contains(static_cast<uint32_t>(b.pid()))) << "tenant B is not listed";
  // The blocks from before the stall are still leased to their sessions, with the new ones.
  EXPECT_EQ(Leased(), leased_before + 2 * 4 * kMiB);
  const std::string daemon_log = testing::ReadFile(daemon_log_);
  EXPECT_EQ(daemon_log.find("returned to the pools"), std::string::npos) << daemon_log;
  EXPECT_NE(testing::ReadFile(log_a).find("while the session was down, 1 allocations (2097152 "
                                          "bytes) went to the driver directly"),
            std::string::npos)
      << testing::ReadFile(log_a);

  // Freeing everything gives every daemon block back while the processes live, those from
  // before the stall too: the shim returns them through the session it registered into again.
  a.CloseStdin();
  b.CloseStdin();
  ASSERT_EQ(a.WaitForLine("awaiting"), "awaiting") << a.out();
  ASSERT_EQ(b.WaitForLine("awaiting"), "awaiting") << b.out();
  EXPECT_EQ(LeasedWithin3s(0), 0u) << "blocks from before the stall were not given back";
  std::ofstream(done) << "";
  EXPECT_EQ(a.Wait(20), 0) << a.out();
  EXPECT_EQ(b.Wait(20), 0) << b.out();
  EXPECT_EQ(a.out().find("corrupt"), std::string::npos) << a.out();
  EXPECT_EQ(b.out().find("corrupt"), std::string::npos) << b.out();
  EXPECT_NE(testing::ReadFile(dir_.path() + "/report." + std::to_string(a.pid()))
                .find("1 allocations (2097152 bytes) went to the driver directly"),
            std::string::npos);
  EXPECT_EQ(LeasedWithin3s(0), 0u);
}

}  // namespace
}  // namespace missile::process_test
