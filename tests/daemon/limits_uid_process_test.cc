// Multi-process tests of what one uid may hold of missiled ([limits]: connections, sessions,
// idle connections) and of the one-daemon-per-socket lock. The daemon runs as root; the hostile
// tenant runs as another uid (nobody, through setpriv, with group root so that it may open the
// test's 0660 sockets), since root is never held to the per-uid limits. Skipped when the test
// does not run as root (it cannot switch uid then); CI runs it as root.
#include <dirent.h>
#include <grpcpp/grpcpp.h>
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <memory>
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
using Clock = std::chrono::steady_clock;

constexpr char kNobody[] = "65534";
constexpr char kOtherUser[] = "65533";

long OpenDescriptors(int pid) {
  DIR* d = opendir(("/proc/" + std::to_string(pid) + "/fd").c_str());
  if (d == nullptr) return -1;
  long n = 0;
  while (dirent* e = readdir(d)) {
    if (e->d_name[0] != '.') ++n;
  }
  closedir(d);
  return n;
}

bool Registered(const std::string& line) { return line.rfind("register ok ", 0) == 0; }

class LimitsUidTest : public process_test::DaemonTest {
 protected:
  LimitsUidTest() {
    fake_settings_.clear();
    log_level_ = "info";
    daemon_log_ = dir_.path() + "/missiled.err";
  }
  void SetUp() override {
    if (geteuid() != 0) GTEST_SKIP() << "needs root to run tenants as other uids";
    DaemonTest::SetUp();
  }
  void TearDown() override {
    for (auto& c : clients_) {
      if (c->running()) c->Kill(SIGKILL);
    }
    DaemonTest::TearDown();
  }

  std::vector<std::string> DaemonArgv() const { return {MISSILED, "--config", config_}; }

  // Starts missiled with `limits` as its [limits] section; waits for its descriptor socket too.
  void StartDaemon(const std::string& limits) {
    config_ = WriteConfig("[limits]\n" + limits);
    ASSERT_TRUE(daemon_.Start(DaemonArgv(), DaemonEnv(), daemon_log_));
    // The descriptor socket comes up first, the gRPC socket after it (daemon/main.cc).
    ASSERT_TRUE(WaitForFile(socket_ + ".fd", 5)) << "missiled did not start" << DaemonLog();
    ASSERT_TRUE(WaitForFile(socket_, 5)) << "missiled did not start" << DaemonLog();
    admin_ = v1::Admin::NewStub(
        grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials()));
  }

  // Root's Status call on a fresh connection, as missilectl makes it.
  grpc::Status AdminStatus() {
    auto admin = v1::Admin::NewStub(
        grpc::CreateChannel("unix:" + socket_, grpc::InsecureChannelCredentials()));
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    v1::StatusResponse resp;
    return admin->Status(&ctx, v1::StatusRequest(), &resp);
  }

  // limits_client as `uid` (group root), kept until the test ends.
  Child* StartClient(const std::string& uid, const std::vector<std::string>& args) {
    std::vector<std::string> argv = {"/usr/bin/setpriv", "--reuid=" + uid, "--regid=0",
                                     "--clear-groups", LIMITS_CLIENT};
    argv.insert(argv.end(), args.begin(), args.end());
    clients_.push_back(std::make_unique<Child>());
    EXPECT_TRUE(clients_.back()->Start(argv, {}));
    return clients_.back().get();
  }
  std::string Register(const std::string& uid, const std::string& name) {
    return StartClient(uid, {"register", socket_, name})->WaitForLine("register", 15);
  }

  std::string config_;
  std::vector<std::unique_ptr<Child>> clients_;
};

// One uid opens far more gRPC connections than its cap on a daemon whose descriptor table
// could not hold them all: the connections beyond the cap are closed at once, so another uid
// still registers and root's Status still answers.
TEST_F(LimitsUidTest, ConnectionFloodOfOneUidLeavesOthersServed) {
  StartDaemon("max_connections_per_uid = 16\nmax_sessions_per_uid = 4\nadmin_reserve_fds = 64\n");
  ASSERT_TRUE(AdminStatus().ok());
  // Room for 300 more descriptors, 64 of them kept for root: without a cap the flood below
  // fills the table.
  const long fds = OpenDescriptors(daemon_.pid());
  const rlim_t limit = static_cast<rlim_t>(fds + 300);
  rlimit lim{limit, limit};
  ASSERT_EQ(prlimit(daemon_.pid(), RLIMIT_NOFILE, &lim, nullptr), 0);
  Child* flood = StartClient(kNobody, {"flood", socket_, "1000"});
  ASSERT_NE(flood->WaitForLine("opened", 60), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(500));
  const long held = OpenDescriptors(daemon_.pid());
  RecordProperty("daemon_descriptors_before", std::to_string(fds));
  RecordProperty("daemon_descriptors_with_1000_connections_of_one_uid", std::to_string(held));
  // 16 connections, two descriptors each, and what the daemon holds anyway.
  EXPECT_LE(held, fds + 2 * 16 + 8);
  const std::string other = Register(kOtherUser, "other");
  EXPECT_TRUE(Registered(other)) << other << testing::ReadFile(daemon_log_);
  EXPECT_TRUE(AdminStatus().ok());
  EXPECT_NE(testing::ReadFile(daemon_log_).find("too many connections of this uid"),
            std::string::npos);
}

// Two uids, each within its own cap, together reach the total cap and then the descriptors
// kept for administrators: their further connections are closed at once, and root's Status
// still answers.
TEST_F(LimitsUidTest, RootGetsThroughWhenOtherUidsFillTheTable) {
  StartDaemon("max_connections = 100\nadmin_reserve_fds = 64\n");
  ASSERT_TRUE(AdminStatus().ok());
  // Room for 150 more descriptors; each uid may hold 64 connections (two descriptors each).
  const long fds = OpenDescriptors(daemon_.pid());
  const rlim_t limit = static_cast<rlim_t>(fds + 150);
  rlimit lim{limit, limit};
  ASSERT_EQ(prlimit(daemon_.pid(), RLIMIT_NOFILE, &lim, nullptr), 0);
  Child* a = StartClient(kNobody, {"flood", socket_, "64"});
  ASSERT_NE(a->WaitForLine("opened", 60), "");
  Child* b = StartClient(kOtherUser, {"flood", socket_, "64"});
  ASSERT_NE(b->WaitForLine("opened", 60), "");
  std::this_thread::sleep_for(std::chrono::milliseconds(300));
  const long held = OpenDescriptors(daemon_.pid());
  RecordProperty("daemon_descriptors_of_150_with_2x64_connections", std::to_string(held - fds));
  EXPECT_LT(held, static_cast<long>(limit) - 16);
  EXPECT_TRUE(AdminStatus().ok());
  EXPECT_NE(testing::ReadFile(daemon_log_).find("kept for administrators"), std::string::npos);
}

// A connection that registers no session and makes no call is closed after idle_timeout_ms; a
// tenant's connection, with its session and Watch stream, stays however long it is quiet.
TEST_F(LimitsUidTest, IdleConnectionsWithoutASessionAreClosed) {
  StartDaemon("idle_timeout_ms = 1000\n");
  auto tenant_env = FakeEnv();
  tenant_env["LD_PRELOAD"] = MISSILE_SHIM;
  tenant_env["MISSILE_REAL_LIBCUDA"] = FAKECUDA_LIB;
  tenant_env["MISSILE_SOCKET"] = socket_;
  tenant_env["MISSILE_TENANT_CLASS"] = "be";
  tenant_env["MISSILE_NO_DAEMON"] = "refuse";
  Child tenant;
  ASSERT_TRUE(tenant.Start({TENANT_PROBE, "alloc:4", "hold", "alloc:4", "check"}, tenant_env));
  ASSERT_EQ(tenant.WaitForLine("ready"), "ready");
  Child* idle = StartClient(kNobody, {"flood", socket_, "10"});
  ASSERT_EQ(idle->WaitForLine("opened"), "opened 10");
  const auto start = Clock::now();
  EXPECT_EQ(idle->WaitForLine("closed 10", 5), "closed 10");
  RecordProperty("idle_closed_after_s",
                 std::to_string(std::chrono::duration<double>(Clock::now() - start).count()));
  std::this_thread::sleep_for(std::chrono::milliseconds(1000));
  // Quiet for more than twice the timeout, the tenant still has its session.
  tenant.CloseStdin();
  EXPECT_EQ(tenant.Wait(), 0);
  EXPECT_EQ(tenant.out().find("alloc 4 err"), std::string::npos) << tenant.out();
  EXPECT_NE(tenant.out().find("check ok"), std::string::npos) << tenant.out();
}

// Past max_sessions_per_uid a uid's Register fails with RESOURCE_EXHAUSTED, while another uid
// still registers.
TEST_F(LimitsUidTest, SessionsPerUidAreCapped) {
  StartDaemon("max_sessions_per_uid = 3\n");
  for (int i = 0; i < 3; ++i) {
    const std::string line = Register(kNobody, "t" + std::to_string(i));
    EXPECT_TRUE(Registered(line)) << i << ": " << line;
  }
  const std::string refused = Register(kNobody, "t3");
  EXPECT_EQ(refused.rfind("register err 8 ", 0), 0u) << refused;  // RESOURCE_EXHAUSTED
  EXPECT_NE(refused.find("limits.max_sessions_per_uid"), std::string::npos) << refused;
  const std::string other = Register(kOtherUser, "other");
  EXPECT_TRUE(Registered(other)) << other;
  // One of the three ends: its uid may register again.
  clients_[0]->CloseStdin();
  EXPECT_EQ(clients_[0]->Wait(), 0);
  auto until = Clock::now() + std::chrono::seconds(5);
  std::string again;
  do {
    again = Register(kNobody, "t4");
  } while (!Registered(again) && Clock::now() < until);
  EXPECT_TRUE(Registered(again)) << again;
}

// A second missiled on the same socket refuses to start, naming the first, and changes
// nothing: the first keeps its sockets and answers.
TEST_F(LimitsUidTest, SecondDaemonOnTheSameSocketRefuses) {
  StartDaemon("");
  struct stat before {};
  ASSERT_EQ(stat(socket_.c_str(), &before), 0);
  ProcessResult second = testing::Run(DaemonArgv(), DaemonEnv(), 10);
  EXPECT_FALSE(second.timed_out) << "the second daemon kept running";
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.err.find("another missiled (pid " + std::to_string(daemon_.pid()) + ")"),
            std::string::npos)
      << second.err;
  struct stat after {};
  ASSERT_EQ(stat(socket_.c_str(), &after), 0) << "the socket is gone";
  EXPECT_EQ(after.st_ino, before.st_ino) << "the socket was replaced";
  EXPECT_EQ(access((socket_ + ".fd").c_str(), F_OK), 0);
  EXPECT_EQ(access((socket_ + ".lock").c_str(), F_OK), 0);
  EXPECT_TRUE(AdminStatus().ok());
  EXPECT_TRUE(daemon_.running());
}

}  // namespace
}  // namespace missile
