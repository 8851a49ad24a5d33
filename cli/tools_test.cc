// End-to-end tests of the built tools and of the Admin client against an in-process fake
// missiled (no real daemon, no GPU).
#include <fcntl.h>
#include <grp.h>
#include <spawn.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ctl_args.h"
#include "ctl_client.h"
#include "gmock/gmock.h"
#include "grpcpp/security/server_credentials.h"
#include "grpcpp/server.h"
#include "grpcpp/server_builder.h"
#include "gtest/gtest.h"
#include "missile/v1/missile.grpc.pb.h"
#include "missile/version.h"

extern char** environ;

namespace missile::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

class TempDir {
 public:
  TempDir() {
    std::string tmpl = (fs::temp_directory_path() / "missile-cli-test.XXXXXX").string();
    if (mkdtemp(tmpl.data()) != nullptr) path_ = tmpl;
  }
  ~TempDir() {
    std::error_code ec;
    fs::remove_all(path_, ec);
  }
  const fs::path& path() const { return path_; }

 private:
  fs::path path_;
};

struct Result {
  int exit_code = -1;
  std::string out;
  std::string err;
};

std::string ReadFile(const fs::path& p) {
  std::ifstream in(p);
  std::stringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Runs argv with the test's environment minus LD_PRELOAD and MISSILE_* (plus `extra_env`, which
// replaces a variable of the same name), capturing stdout and stderr.
Result Spawn(const std::vector<std::string>& argv, const std::vector<std::string>& extra_env = {}) {
  TempDir dir;
  fs::path out = dir.path() / "out", err = dir.path() / "err";
  posix_spawn_file_actions_t actions;
  posix_spawn_file_actions_init(&actions);
  posix_spawn_file_actions_addopen(&actions, 1, out.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_addopen(&actions, 2, err.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  std::vector<std::string> env_strings;
  for (char** e = environ; *e != nullptr; ++e) {
    std::string_view entry(*e);
    if (entry.starts_with("LD_PRELOAD=") || entry.starts_with("MISSILE_")) continue;
    const std::string_view name = entry.substr(0, entry.find('=') + 1);
    if (std::any_of(extra_env.begin(), extra_env.end(),
                    [&](const std::string& e) { return e.starts_with(name); })) {
      continue;
    }
    env_strings.emplace_back(entry);
  }
  env_strings.insert(env_strings.end(), extra_env.begin(), extra_env.end());
  std::vector<char*> c_argv, c_env;
  for (const std::string& a : argv) c_argv.push_back(const_cast<char*>(a.c_str()));
  c_argv.push_back(nullptr);
  for (const std::string& e : env_strings) c_env.push_back(const_cast<char*>(e.c_str()));
  c_env.push_back(nullptr);
  Result r;
  pid_t pid;
  int rc = posix_spawn(&pid, c_argv[0], &actions, nullptr, c_argv.data(), c_env.data());
  posix_spawn_file_actions_destroy(&actions);
  if (rc != 0) {
    ADD_FAILURE() << "posix_spawn " << argv[0] << ": " << rc;
    return r;
  }
  int status = 0;
  waitpid(pid, &status, 0);
  r.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : 128 + WTERMSIG(status);
  r.out = ReadFile(out);
  r.err = ReadFile(err);
  return r;
}

// Exactly one line, starting with `prefix`.
void ExpectOneLine(const std::string& text, const std::string& prefix) {
  EXPECT_THAT(text, StartsWith(prefix));
  EXPECT_EQ(std::count(text.begin(), text.end(), '\n'), 1) << text;
}

TEST(MissileRunBinaryTest, ChildSeesTheTenantEnvironment) {
  TempDir dir;
  fs::path shim = dir.path() / "libmissile.so";
  std::ofstream(shim) << "a stand-in: ld.so warns that it cannot preload it, and goes on";
  Result r = Spawn({MISSILE_RUN_BIN, "--name", "e2e.job", "--class", "ls", "--quota", "512MiB",
                    "--socket", "/tmp/x.sock", "--no-daemon", "refuse", "--report", "stderr",
                    "--shim", shim.string(), "--", "/usr/bin/env"},
                   {"LD_PRELOAD=/lib/other.so"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nLD_PRELOAD=" + shim.string() + ":/lib/other.so\n"));
  EXPECT_THAT(r.out, HasSubstr("\nMISSILE_TENANT_NAME=e2e.job\n"));
  EXPECT_THAT(r.out, HasSubstr("\nMISSILE_TENANT_CLASS=ls\n"));
  EXPECT_THAT(r.out, HasSubstr("\nMISSILE_QUOTA=536870912\n"));
  EXPECT_THAT(r.out, HasSubstr("\nMISSILE_SOCKET=/tmp/x.sock\n"));
  EXPECT_THAT(r.out, HasSubstr("\nMISSILE_NO_DAEMON=refuse\n"));
  EXPECT_THAT(r.out, HasSubstr("\nMISSILE_REPORT=stderr\n"));
}

TEST(MissileRunBinaryTest, ArgumentsPassUnchanged) {
  TempDir dir;
  fs::path shim = dir.path() / "libmissile.so";
  std::ofstream(shim) << "x";
  Result r = Spawn({MISSILE_RUN_BIN, "--name", "j", "--class", "be", "--shim", shim.string(), "--",
                    "/bin/echo", "--name", "a  b", "--", ""});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "--name a  b -- \n");
}

TEST(MissileRunBinaryTest, BestEffortUnderMpsGetsTheMpsClientEnvironment) {
  TempDir dir;
  fs::path shim = dir.path() / "libmissile.so";
  std::ofstream(shim) << "x";
  // A stand-in for the MPS control daemon: its pipe directory with a `control` socket.
  std::string control = (dir.path() / "control").string();
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(control.size(), sizeof(addr.sun_path));
  control.copy(addr.sun_path, control.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  const std::string pipe_dir = "CUDA_MPS_PIPE_DIRECTORY=" + dir.path().string();
  Result r = Spawn({MISSILE_RUN_BIN, "--name", "j", "--class", "be", "--be-sm-percent", "40",
                    "--shim", shim.string(), "--", "/usr/bin/env"},
                   {pipe_dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nCUDA_MPS_CLIENT_PRIORITY=1\n"));
  EXPECT_THAT(r.out, HasSubstr("\nCUDA_MPS_ACTIVE_THREAD_PERCENTAGE=40\n"));
  // A priority already chosen is kept.
  r = Spawn({MISSILE_RUN_BIN, "--name", "j", "--class", "be", "--shim", shim.string(), "--",
             "/usr/bin/env"},
            {pipe_dir, "CUDA_MPS_CLIENT_PRIORITY=0"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("\nCUDA_MPS_CLIENT_PRIORITY=0\n"));
  // An LS tenant is left alone.
  r = Spawn({MISSILE_RUN_BIN, "--name", "j", "--class", "ls", "--shim", shim.string(), "--",
             "/usr/bin/env"},
            {pipe_dir});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, Not(HasSubstr("CUDA_MPS_CLIENT_PRIORITY")));
  close(fd);
}

TEST(MissileRunBinaryTest, Failures) {
  TempDir dir;
  fs::path shim = dir.path() / "libmissile.so";
  std::ofstream(shim) << "x";
  Result r = Spawn({MISSILE_RUN_BIN, "--name", "j", "--class", "be", "--shim", shim.string(), "--",
                    "/nonexistent/program"});
  EXPECT_EQ(r.exit_code, 127);
  ExpectOneLine(r.err, "missile-run: cannot run /nonexistent/program: No such file or directory");

  r = Spawn({MISSILE_RUN_BIN, "--name", "bad name", "--class", "be", "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneLine(r.err, "missile-run: --name: ");

  r = Spawn({MISSILE_RUN_BIN, "--name", "j", "--class", "be", "--shim",
             (dir.path() / "absent.so").string(), "--", "/bin/true"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneLine(r.err, "missile-run: --shim ");

  r = Spawn({MISSILE_RUN_BIN, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("usage: missile-run"));
}

// Every tool prints the same version line and exits 0, without a daemon.
TEST(ToolsTest, VersionOnEveryTool) {
  const std::string version = std::string(" ") + kVersion + "\n";
  std::vector<std::pair<std::string, std::string>> tools = {
      {MISSILECTL_BIN, "missilectl"}, {MISSILE_RUN_BIN, "missile-run"}, {MISSILED_BIN, "missiled"}};
#ifdef MISSILE_CALIBRATE_BIN
  tools.emplace_back(MISSILE_CALIBRATE_BIN, "missile-calibrate");
#endif
  for (const auto& [bin, name] : tools) {
    Result r = Spawn({bin, "--version"}, {std::string("LD_LIBRARY_PATH=") + FAKECUDA_DIR});
    EXPECT_EQ(r.exit_code, 0) << name << ": " << r.err;
    EXPECT_EQ(r.out, name + version);
    EXPECT_EQ(r.err, "") << name;
  }
  // Wherever it appears among the other arguments.
  Result r = Spawn({MISSILECTL_BIN, "--socket", "/nonexistent", "--version"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, "missilectl" + version);
}

// missiled loads the driver only to serve: on a machine without libcuda.so.1 it still prints
// its help and version and checks a configuration, and serving fails with a clear error.
TEST(MissiledBinaryTest, RunsWithoutTheDriver) {
  if (access("/usr/bin/readelf", X_OK) == 0) {
    Result elf = Spawn({"/usr/bin/readelf", "-d", MISSILED_BIN});
    ASSERT_EQ(elf.exit_code, 0) << elf.err;
    EXPECT_THAT(elf.out, HasSubstr("(NEEDED)"));
    EXPECT_THAT(elf.out, Not(HasSubstr("libcuda"))) << "missiled must not link the driver";
  }
  // An empty search path: the driver test double is out of reach, and so is any libcuda.so.1
  // outside the ld.so cache.
  const std::vector<std::string> no_driver = {"LD_LIBRARY_PATH="};
  Result r = Spawn({MISSILED_BIN, "--version"}, no_driver);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_EQ(r.out, std::string("missiled ") + kVersion + "\n");
  r = Spawn({MISSILED_BIN, "--help"}, no_driver);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, StartsWith("usage: missiled"));
  r = Spawn({MISSILED_BIN, "--check-config", "--config", MISSILE_EXAMPLE_CONFIG}, no_driver);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("gpu.pool_limit = \"95%\""));
  r = Spawn({MISSILED_BIN, "--check-config", "--log-level", "loud"}, no_driver);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  // "--flag=value" as well as "--flag value"; a mistyped flag names the nearest one.
  r = Spawn({MISSILED_BIN, "--check-config", "--config=" MISSILE_EXAMPLE_CONFIG}, no_driver);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  r = Spawn({MISSILED_BIN, "--check-config", "--log-level=loud"}, no_driver);
  EXPECT_EQ(r.exit_code, 2) << r.err;
  EXPECT_THAT(r.err, HasSubstr("--log-level: 'loud'"));
  r = Spawn({MISSILED_BIN, "--confg", "x"}, no_driver);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_THAT(r.err, StartsWith("missiled: unknown option '--confg'; did you mean '--config'?\n"));
  // A group that does not exist stops missiled at start: --check-config must not pass it.
  TempDir groups;
  const fs::path with_group = groups.path() / "missiled.toml";
  for (const std::string key : {"socket_group", "admin_group"}) {
    std::ofstream(with_group) << "[daemon]\n" << key << " = \"no-such-group-missile\"\n";
    chmod(with_group.c_str(), 0644);
    r = Spawn({MISSILED_BIN, "--check-config", "--config", with_group.string()}, no_driver);
    EXPECT_EQ(r.exit_code, 2) << key;
    EXPECT_EQ(r.err, "missiled: daemon." + key +
                         ": no group named 'no-such-group-missile' on this machine: create it "
                         "(groupadd --system no-such-group-missile) or name another\n");
    EXPECT_EQ(r.out, "");
  }
  const group* gid0 = getgrgid(0);  // a group every machine has
  const std::string root_group = gid0 != nullptr ? gid0->gr_name : "root";
  std::ofstream(with_group) << "[daemon]\nsocket_group = \"" << root_group << "\"\n";
  r = Spawn({MISSILED_BIN, "--check-config", "--config", with_group.string()}, no_driver);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("daemon.socket_group = \"" + root_group + "\""));

  // Serving needs the driver: one clear error, exit status 1, no socket left behind. (Where a
  // libcuda.so.1 is in the ld.so cache, a GPU machine, the daemon would start: not tested here.)
  if (access("/dev/nvidiactl", F_OK) == 0) return;
  TempDir dir;
  const std::string socket = (dir.path() / "missiled.sock").string();
  const fs::path config = dir.path() / "missiled.toml";
  std::ofstream(config) << "[daemon]\nsocket = \"" << socket << "\"\n";
  chmod(config.c_str(), 0644);
  r = Spawn({MISSILED_BIN, "--config", config.string()}, no_driver);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("cannot load the CUDA driver (libcuda.so.1: "));
  EXPECT_THAT(r.err, HasSubstr("missiled needs the NVIDIA driver to serve"));
  EXPECT_FALSE(fs::exists(socket));
}

TEST(MissilectlBinaryTest, MissingSocketFailsFastInOneLine) {
  Result r = Spawn({MISSILECTL_BIN, "--socket", "/nonexistent", "status"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "missilectl: cannot reach missiled at /nonexistent: no such socket; is missiled "
            "running? check 'systemctl status missiled' (or give --socket PATH)\n");
  EXPECT_EQ(r.out, "");

  // $MISSILE_SOCKET is the default.
  r = Spawn({MISSILECTL_BIN, "tenants"}, {"MISSILE_SOCKET=/nonexistent/env.sock"});
  EXPECT_EQ(r.exit_code, 1);
  ExpectOneLine(r.err, "missilectl: cannot reach missiled at /nonexistent/env.sock: ");
}

TEST(MissilectlBinaryTest, NobodyListeningFailsInOneLine) {
  TempDir dir;
  std::string path = (dir.path() / "dead.sock").string();
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(path.size(), sizeof(addr.sun_path));
  path.copy(addr.sun_path, path.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);  // never listens
  Result r = Spawn({MISSILECTL_BIN, "--socket", path, "status"});
  close(fd);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "missilectl: cannot reach missiled at " + path +
                       ": nothing listens on the socket; is missiled running? check 'systemctl "
                       "status missiled'\n");

  std::ofstream(dir.path() / "plain") << "x";
  r = Spawn({MISSILECTL_BIN, "--socket", (dir.path() / "plain").string(), "status"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr(": not a socket\n"));
}

TEST(MissilectlBinaryTest, UsageErrorsAndHelp) {
  Result r = Spawn({MISSILECTL_BIN, "frobnicate"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneLine(r.err, "missilectl: unknown command 'frobnicate'");

  r = Spawn({MISSILECTL_BIN, "stauts"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "missilectl: unknown command 'stauts'; did you mean 'status'?\n");

  r = Spawn({MISSILECTL_BIN, "status", "--jsn"});
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_EQ(r.err, "missilectl: status: unknown option '--jsn'; did you mean '--json'?\n");

  r = Spawn({MISSILECTL_BIN, "set", "--pid", "1"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneLine(r.err, "missilectl: set: nothing to change");

  r = Spawn({MISSILECTL_BIN, "set", "--window-us", "5000000"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneLine(r.err, "missilectl: --window-us: '5000000' is not microseconds in [0, 1000000]");

  r = Spawn({MISSILECTL_BIN, "set", "--name", "web", "--pacing", "off"});
  EXPECT_EQ(r.exit_code, 2);
  ExpectOneLine(r.err, "missilectl: set: --pacing changes the daemon's pacing");

  r = Spawn({MISSILECTL_BIN, "--help"});
  EXPECT_EQ(r.exit_code, 0);
  EXPECT_THAT(r.out, StartsWith("usage: missilectl"));
  EXPECT_THAT(r.out, HasSubstr("--window-us N"));
  EXPECT_EQ(r.err, "");
}

// A missiled stand-in with canned answers; SetPolicy refuses like a non-admin caller.
class FakeAdmin final : public v1::Admin::Service {
 public:
  grpc::Status Status(grpc::ServerContext*, const v1::StatusRequest*,
                      v1::StatusResponse* resp) override {
    resp->set_version("9.9.9");
    resp->set_uptime_s(61);
    v1::PoolStatus* p = resp->add_pools();
    p->mutable_gpu()->set_name("Fake GPU");
    p->add_colours()->set_reserved_for("shared");
    p->set_colour_note("no channel isolation on this GPU at 2 MiB: every block spans all channels");
    return grpc::Status::OK;
  }
  grpc::Status ListTenants(grpc::ServerContext*, const v1::ListTenantsRequest*,
                           v1::ListTenantsResponse* resp) override {
    v1::TenantInfo* t = resp->add_tenants();
    t->set_pid(42);
    t->set_name("fake");
    t->set_tenant_class(v1::BEST_EFFORT);
    return grpc::Status::OK;
  }
  grpc::Status SetPolicy(grpc::ServerContext*, const v1::SetPolicyRequest* req,
                         v1::SetPolicyResponse* resp) override {
    last_request = *req;
    if (req->name() == "allowed") {
      resp->set_tenants_changed(2);
      return grpc::Status::OK;
    }
    return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                        "uid 1000 may not change policy: root or the admin group only");
  }
  // Applies the window and pacing switch to a default policy, like missiled would.
  grpc::Status SetPacing(grpc::ServerContext*, const v1::SetPacingRequest* req,
                         v1::SetPacingResponse* resp) override {
    last_pacing = *req;
    if (req->has_max_hold_ms()) {
      return grpc::Status(grpc::StatusCode::PERMISSION_DENIED,
                          "uid 1000 may not change pacing: root or the admin group only");
    }
    v1::PacingPolicy before;
    before.set_pacing(true);
    before.set_window_items(8);
    before.set_window_us(100);
    before.set_ls_stale_ms(200);
    *resp->mutable_previous() = before;
    *resp->mutable_pacing() = before;
    if (req->has_pacing()) resp->mutable_pacing()->set_pacing(req->pacing());
    if (req->has_window_us()) resp->mutable_pacing()->set_window_us(req->window_us());
    return grpc::Status::OK;
  }
  v1::SetPolicyRequest last_request;
  v1::SetPacingRequest last_pacing;
};

class FakeDaemonTest : public ::testing::Test {
 protected:
  void SetUp() override {
    socket_ = (dir_.path() / "missiled.sock").string();
    grpc::ServerBuilder builder;
    builder.AddListeningPort("unix:" + socket_, grpc::InsecureServerCredentials());
    builder.RegisterService(&service_);
    server_ = builder.BuildAndStart();
    ASSERT_NE(server_, nullptr);
  }
  void TearDown() override {
    if (server_) server_->Shutdown();
  }

  absl::StatusOr<std::string> Ctl(std::vector<std::string> args) {
    args.insert(args.begin(), {"--socket", socket_});
    absl::StatusOr<CtlArgs> parsed = ParseCtlArgs(args, kDefaultSocket);
    if (!parsed.ok()) return parsed.status();
    return RunCtl(*parsed);
  }

  TempDir dir_;
  std::string socket_;
  FakeAdmin service_;
  std::unique_ptr<grpc::Server> server_;
};

TEST_F(FakeDaemonTest, Status) {
  absl::StatusOr<std::string> out = Ctl({"status"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, StartsWith("missiled 9.9.9, up 1m01s"));
  EXPECT_THAT(*out, HasSubstr("colours: 1 (no channel isolation on this GPU at 2 MiB"));
}

TEST_F(FakeDaemonTest, TenantsAsJson) {
  absl::StatusOr<std::string> out = Ctl({"tenants", "--json"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("\"tenant_class\":\"BEST_EFFORT\""));
  EXPECT_THAT(*out, HasSubstr("\"pid\":42"));
}

TEST_F(FakeDaemonTest, SetSendsTheRequestAndReportsTheCount) {
  absl::StatusOr<std::string> out = Ctl({"set", "--name", "allowed", "--weight", "7"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out, "changed 2 tenant(s)\n");
  EXPECT_EQ(service_.last_request.name(), "allowed");
  EXPECT_EQ(service_.last_request.weight(), 7u);
  EXPECT_FALSE(service_.last_request.has_priority());
}

TEST_F(FakeDaemonTest, SetPacingSendsOnlyWhatWasGivenAndPrintsTheChange) {
  absl::StatusOr<std::string> out = Ctl({"set", "--window-us", "300", "--pacing", "off"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_EQ(*out,
            "pacing: on -> off\n"
            "window_us: 100 -> 300\n"
            "pacing: off, window 8 items / 300 us, LS idle 0 us, stale 200 ms, no max hold, "
            "unknown 0 us, share slack 0 us, refill 0 us\n");
  EXPECT_TRUE(service_.last_pacing.has_window_us());
  EXPECT_EQ(service_.last_pacing.window_us(), 300u);
  EXPECT_TRUE(service_.last_pacing.has_pacing());
  EXPECT_FALSE(service_.last_pacing.pacing());
  EXPECT_FALSE(service_.last_pacing.has_window_items());
  EXPECT_FALSE(service_.last_pacing.has_ls_stale_ms());

  out = Ctl({"--json", "set", "--window-us", "100"});
  ASSERT_TRUE(out.ok()) << out.status();
  EXPECT_THAT(*out, HasSubstr("\"previous\":{"));
  EXPECT_THAT(*out, HasSubstr("\"window_us\":\"100\","));

  out = Ctl({"set", "--max-hold-ms", "5"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().message(),
            "PERMISSION_DENIED: uid 1000 may not change pacing: root or the admin group only");
}

TEST_F(FakeDaemonTest, GrpcErrorsCarryTheCodeName) {
  absl::StatusOr<std::string> out = Ctl({"set", "--pid", "9", "--priority", "3"});
  ASSERT_FALSE(out.ok());
  EXPECT_EQ(out.status().code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(out.status().message(),
            "PERMISSION_DENIED: uid 1000 may not change policy: root or the admin group only");
}

TEST_F(FakeDaemonTest, BinaryAgainstTheFake) {
  Result r = Spawn({MISSILECTL_BIN, "--socket", socket_, "set", "--pid", "9", "--weight", "3"});
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err,
            "missilectl: PERMISSION_DENIED: uid 1000 may not change policy: root or the admin "
            "group only\n");
  r = Spawn({MISSILECTL_BIN, "--socket", socket_, "tenants"});
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_THAT(r.out, HasSubstr("42   fake  be"));
}

// A user outside the socket's group is told which group to join, never root's: that group is
// the socket's when daemon.socket_group is unset, and only an administrator can change it.
// Needs root (to run missilectl as nobody through setpriv).
TEST_F(FakeDaemonTest, PermissionDeniedNamesTheGroupToJoin) {
  if (geteuid() != 0 || access("/usr/bin/setpriv", X_OK) != 0) {
    GTEST_SKIP() << "needs root and /usr/bin/setpriv";
  }
  ASSERT_EQ(chown(socket_.c_str(), 0, 0), 0);
  ASSERT_EQ(chmod(socket_.c_str(), 0660), 0);
  ASSERT_EQ(chmod(dir_.path().c_str(), 0755), 0);
  const std::vector<std::string> as_nobody = {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                              "--clear-groups", MISSILECTL_BIN, "--socket",
                                              socket_, "status"};
  Result r = Spawn(as_nobody);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "missilectl: cannot reach missiled at " + socket_ + ": permission denied (" +
                       socket_ + " is group 'root', mode 0660); an administrator must set " +
                       "daemon.socket_group (e.g. to 'missile') in missiled.toml, restart " +
                       "missiled and add this user to that group (usermod -aG missile USER); " +
                       "or run as root\n");
  EXPECT_THAT(r.err, Not(HasSubstr("join the group 'root'")));
  // A group of its own (gid 1, 'daemon' on Debian): joining it is the answer.
  const gid_t gid = 1;
  const group* gr = getgrgid(gid);
  const std::string name = gr != nullptr ? gr->gr_name : "1";
  ASSERT_EQ(chown(socket_.c_str(), 0, gid), 0);
  r = Spawn(as_nobody);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "missilectl: cannot reach missiled at " + socket_ + ": permission denied (" +
                       socket_ + " is group '" + name + "', mode 0660); join the group '" + name +
                       "' (usermod -aG " + name + " USER, then log in again) or run as root\n");
  // A mode without group write: joining the group would not help.
  ASSERT_EQ(chmod(socket_.c_str(), 0600), 0);
  r = Spawn(as_nobody);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_THAT(r.err, HasSubstr("mode 0600); only its owner (uid 0) or root may connect\n"));
  // The directory above the socket is closed to the caller.
  ASSERT_EQ(chmod(dir_.path().c_str(), 0750), 0);
  r = Spawn(as_nobody);
  EXPECT_EQ(r.exit_code, 1);
  EXPECT_EQ(r.err, "missilectl: cannot reach missiled at " + socket_ + ": permission denied (" +
                       dir_.path().string() + " is group 'root', mode 0750); an administrator " +
                       "must let others search it (chmod o+x " + dir_.path().string() +
                       ") or move daemon.socket; or run as root\n");
  ASSERT_EQ(chmod(dir_.path().c_str(), 0700), 0);
}

// The same without root: the hint is chosen from the file's group and mode alone.
TEST(PermissionHintTest, NeverSuggestsJoiningRootsGroup) {
  struct stat st {};
  st.st_mode = S_IFSOCK | 0660;
  st.st_gid = 0;
  std::string hint = PermissionHint("/run/missile/missiled.sock", st);
  EXPECT_THAT(hint, HasSubstr("an administrator must set daemon.socket_group (e.g. to 'missile')"));
  EXPECT_THAT(hint, Not(HasSubstr("join the group")));
  st.st_mode = S_IFDIR | 0750;
  hint = PermissionHint("/run/missile", st);
  EXPECT_THAT(hint, HasSubstr("chmod o+x /run/missile"));
  EXPECT_THAT(hint, Not(HasSubstr("join the group")));
  st.st_mode = S_IFSOCK | 0660;
  st.st_gid = 4242424;  // no such group: named by number
  EXPECT_THAT(PermissionHint("/s", st), HasSubstr("join the group '4242424' (usermod -aG 4242424"));
}

TEST(RpcErrorMessageTest, Codes) {
  EXPECT_EQ(RpcErrorMessage(grpc::Status(grpc::StatusCode::UNAVAILABLE, "broken\npipe"), "/s"),
            "cannot reach missiled at /s: broken pipe; is missiled running? check 'systemctl "
            "status missiled'");
  EXPECT_EQ(RpcErrorMessage(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         "failed to connect to all addresses; last error: "
                                         "UNKNOWN: unix:/s: Connection refused"),
                            "/s"),
            "cannot reach missiled at /s: nothing listens on the socket; is missiled running? "
            "check 'systemctl status missiled'");
  EXPECT_EQ(RpcErrorMessage(grpc::Status(grpc::StatusCode::CANCELLED, "CANCELLED"), "/s"),
            "missiled at /s ended the call: it is stopping or restarting; check 'systemctl "
            "status missiled'");
  EXPECT_EQ(RpcErrorMessage(grpc::Status(grpc::StatusCode::DEADLINE_EXCEEDED, "x"), "/s"),
            "cannot reach missiled at /s: no answer within 5 s");
  EXPECT_EQ(RpcErrorMessage(grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "bad"), "/s"),
            "INVALID_ARGUMENT: bad");
  EXPECT_EQ(RpcErrorMessage(grpc::Status(grpc::StatusCode::NOT_FOUND, "no tenant"), "/s"),
            "NOT_FOUND: no tenant");
}

}  // namespace
}  // namespace missile::cli
