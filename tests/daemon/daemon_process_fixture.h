// Multi-process tests of missiled with real tenants: the daemon and the tenant programs run as
// separate processes over the real Unix sockets, on the driver test double (tests/fakecuda),
// whose VMM chunks really share memory across processes.
//
// The fixture shared by the daemon_*_test files: a temporary directory, a missiled started on
// the test double with a config of the test's choosing, tenant environments, and the admin
// and tenant gRPC stubs. Each test gets its own shared-memory name, so tests run in parallel.
#ifndef MISSILE_TESTS_DAEMON_DAEMON_PROCESS_FIXTURE_H_
#define MISSILE_TESTS_DAEMON_DAEMON_PROCESS_FIXTURE_H_

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
#include "missile/colorer/profile.h"
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
    // A shallow stream queue (GPUs have a bounded command queue too) catches a shim that
    // enqueues a long gated copy before the daemon can grant any of it.
    std::map<std::string, std::string> env = {
        {"FAKECUDA_SHM", shm_}, {"FAKECUDA_TOTAL_MEM", "1G"},
        {"FAKECUDA_PCIE_BYTES_PER_US", link_rate_}, {"FAKECUDA_STREAM_DEPTH", "64"},
        {"LD_PRELOAD", "<unset>"}};
    for (const auto& [key, value] : extra_env_) env[key] = value;
    return env;
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
    ASSERT_TRUE(daemon_.Start({MISSILED, "--config", config}, env, daemon_log_));
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
  std::string daemon_log_;  // a file for missiled's stderr; "" = the test's own
  // More test-double settings for the daemon and every tenant (FAKECUDA_DEVICES, ...).
  std::map<std::string, std::string> extra_env_;
  std::string link_rate_ = "100000";  // simulated PCIe bytes per microsecond
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

#endif  // MISSILE_TESTS_DAEMON_DAEMON_PROCESS_FIXTURE_H_
