// Multi-process tests of missiled with real tenants: the daemon and the tenant programs run as
// separate processes over the real Unix sockets, on the driver test double (tests/fakecuda),
// whose VMM chunks really share memory across processes.
//
// The one fixture of every process test: a temporary directory, a missiled started on the test
// double with a config of the test's choosing, tenant environments, missilectl, and the admin
// and tenant gRPC stubs. Each test gets its own shared-memory name, so tests run in parallel.
// A test file adjusts it in its fixture's constructor: the test double's settings
// (`fake_settings_`, `extra_env_`), the log level, where missiled's stderr goes.
#ifndef MISSILE_TESTS_SUPPORT_DAEMON_PROCESS_FIXTURE_H_
#define MISSILE_TESTS_SUPPORT_DAEMON_PROCESS_FIXTURE_H_

#include <grpcpp/grpcpp.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <map>
#include <set>
#include <sstream>
#include <string>
#include <thread>

#include "gtest/gtest.h"
#include "missile/common/fd_passing.h"
#include "missile/v1/missile.grpc.pb.h"
#include "subprocess.h"

namespace missile::process_test {

namespace v1 = ::missile::v1;
using testing::Child;
using testing::ProcessResult;
using testing::TempDir;

constexpr uint64_t kMiB = 1 << 20;

// The physical addresses on the first line of `text` that has them.
inline std::set<std::string> PhysOf(const std::string& text) {
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
    std::map<std::string, std::string> env = {
        {"FAKECUDA_SHM", shm_}, {"FAKECUDA_TOTAL_MEM", "1G"}, {"LD_PRELOAD", "<unset>"}};
    for (const auto& [key, value] : fake_settings_) env[key] = value;
    for (const auto& [key, value] : extra_env_) env[key] = value;
    return env;
  }

  // Writes missiled.toml: the socket, the log level, extra_daemon_, the profile directory, then
  // `extra` (more sections). Its path.
  std::string WriteConfig(const std::string& extra) const {
    std::string config = dir_.path() + "/missiled.toml";
    std::ofstream out(config);
    out << "[daemon]\nsocket = \"" << socket_ << "\"\n";
    if (!log_level_.empty()) out << "log_level = \"" << log_level_ << "\"\n";
    out << extra_daemon_ << "\n"
        << "[gpu]\nprofile_dir = \"" << dir_.path() << "/profiles\"\n"
        << extra;
    out.close();
    chmod(config.c_str(), 0644);
    return config;
  }

  // missiled's environment: the test double's.
  std::map<std::string, std::string> DaemonEnv() const {
    auto env = FakeEnv();
    env["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
    return env;
  }

  // Writes the config (extra TOML appended to the defaults here) and starts missiled; returns
  // once its socket exists.
  void StartDaemon(const std::string& extra = "") {
    ASSERT_TRUE(daemon_.Start({MISSILED, "--config", WriteConfig(extra)}, DaemonEnv(), daemon_log_));
    ASSERT_TRUE(WaitForFile(socket_, 5)) << "missiled did not create " << socket_ << DaemonLog();
    // A channel of its own: one sharing gRPC's global subchannel pool would reuse the connection
    // to a daemon this test stopped, and report it connected.
    grpc::ChannelArguments args;
    args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
    channel_ = grpc::CreateCustomChannel("unix:" + socket_, grpc::InsecureChannelCredentials(), args);
    // The socket's file exists from bind(); a call made before missiled listens is refused
    // (seen on a loaded machine), so wait until the channel connects.
    ASSERT_TRUE(channel_->WaitForConnected(std::chrono::system_clock::now() +
                                           std::chrono::seconds(5)))
        << "missiled does not answer on " << socket_ << DaemonLog();
    admin_ = v1::Admin::NewStub(channel_);
    tenant_ = v1::Tenant::NewStub(channel_);
  }

  void StopDaemon() {
    if (daemon_.running()) {
      daemon_.Kill(SIGTERM);
      daemon_exit_ = daemon_.Wait(10);
    }
  }

  // Whether `path` exists within `seconds`.
  static bool WaitForFile(const std::string& path, double seconds) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(seconds);
    while (access(path.c_str(), F_OK) != 0) {
      if (std::chrono::steady_clock::now() > until) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(10));
    }
    return true;
  }

  // missiled's log, for a failure message ("" when it goes to the test's own stderr).
  std::string DaemonLog() const {
    if (daemon_log_.empty()) return "";
    std::ifstream in(daemon_log_);
    std::stringstream ss;
    ss << in.rdbuf();
    return "; its log:\n" + ss.str();
  }

#ifdef MISSILECTL
  // missilectl against this test's daemon.
  ProcessResult Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {MISSILECTL, "--socket", socket_});
    return testing::Run(args);
  }
#endif

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
  std::string extra_daemon_;      // more [daemon] keys
  std::string log_level_ = "debug";  // "" = missiled's default
  std::string daemon_log_;        // a file for missiled's stderr; "" = the test's own
  // The test double's settings for the daemon and every tenant. A shallow stream queue (GPUs
  // have a bounded command queue too) catches a shim that enqueues a long gated copy before the
  // daemon can grant any of it; the link rate is simulated PCIe bytes per microsecond.
  std::map<std::string, std::string> fake_settings_ = {{"FAKECUDA_PCIE_BYTES_PER_US", "100000"},
                                                       {"FAKECUDA_STREAM_DEPTH", "64"}};
  // More settings on top (FAKECUDA_DEVICES, ...).
  std::map<std::string, std::string> extra_env_;
  Child daemon_;
  int daemon_exit_ = 0;
  std::shared_ptr<grpc::Channel> channel_;
  std::unique_ptr<v1::Admin::Stub> admin_;
  std::unique_ptr<v1::Tenant::Stub> tenant_;
};


// The number after "key=" in a probe's output, or -1.
inline double Field(const std::string& out, const std::string& key) {
  size_t pos = out.find(key + "=");
  return pos == std::string::npos ? -1 : atof(out.c_str() + pos + key.size() + 1);
}

}  // namespace missile::process_test

#endif  // MISSILE_TESTS_SUPPORT_DAEMON_PROCESS_FIXTURE_H_
