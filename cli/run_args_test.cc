#include "run_args.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::cli {
namespace {

namespace fs = std::filesystem;
using ::testing::Contains;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Key;
using ::testing::Not;
using ::testing::Pair;

std::string Error(std::vector<std::string> args) {
  absl::StatusOr<RunArgs> parsed = ParseRunArgs(args);
  EXPECT_FALSE(parsed.ok());
  if (parsed.ok()) return "";
  EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(parsed.status().message().find('\n'), std::string::npos);
  return std::string(parsed.status().message());
}

TEST(TenantNameTest, Rules) {
  EXPECT_TRUE(ValidateTenantName("a").ok());
  EXPECT_TRUE(ValidateTenantName("Train-job_2.v1").ok());
  EXPECT_TRUE(ValidateTenantName(std::string(64, 'x')).ok());
  EXPECT_FALSE(ValidateTenantName("").ok());
  EXPECT_FALSE(ValidateTenantName(std::string(65, 'x')).ok());
  for (const char* bad : {"a b", "a/b", "a:b", "naïve", "a\nb", "$x"}) {
    EXPECT_FALSE(ValidateTenantName(bad).ok()) << bad;
  }
}

TEST(RunArgsTest, AllOptions) {
  absl::StatusOr<RunArgs> a = ParseRunArgs(
      {"--name", "job", "--class=ls", "--quota", "1.5G", "--socket", "/s.sock", "--shim", "/x.so",
       "--no-daemon", "refuse", "--report", "stderr", "--", "python3", "-u", "--name", "--"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->help);
  EXPECT_EQ(a->name, "job");
  EXPECT_EQ(a->tenant_class, "ls");
  EXPECT_EQ(a->quota_bytes, uint64_t{3} << 29);
  EXPECT_EQ(a->socket, "/s.sock");
  EXPECT_EQ(a->shim, "/x.so");
  EXPECT_EQ(a->no_daemon, "refuse");
  EXPECT_EQ(a->report, "stderr");
  // Everything after the first "--" belongs to the program, untouched.
  EXPECT_THAT(a->command, ElementsAre("python3", "-u", "--name", "--"));
}

TEST(RunArgsTest, ProgramWithoutDashDash) {
  absl::StatusOr<RunArgs> a = ParseRunArgs({"--name", "j", "--class", "be", "prog", "--x"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_THAT(a->command, ElementsAre("prog", "--x"));
  a = ParseRunArgs({"--name", "j", "--class", "be", "--", "-x", "--class", "ls"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->tenant_class, "be");
  EXPECT_THAT(a->command, ElementsAre("-x", "--class", "ls"));
  EXPECT_FALSE(a->quota_bytes.has_value());
  EXPECT_FALSE(a->socket.has_value());
}

TEST(RunArgsTest, Help) {
  absl::StatusOr<RunArgs> a = ParseRunArgs({"--name", "j", "--help"});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->help);
  EXPECT_THAT(kRunUsage, HasSubstr("usage: missile-run"));
}

TEST(RunArgsTest, Version) {
  absl::StatusOr<RunArgs> a = ParseRunArgs({"--version"});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->version);
  EXPECT_THAT(kRunUsage, HasSubstr("--version"));
}

TEST(RunArgsTest, Errors) {
  EXPECT_THAT(Error({"--class", "be", "--", "p"}), HasSubstr("--name NAME is required"));
  EXPECT_THAT(Error({"--name", "j", "--", "p"}), HasSubstr("--class ls|be is required"));
  EXPECT_THAT(Error({"--name", "j", "--class", "gold", "--", "p"}),
              HasSubstr("--class: 'gold' is not ls or be"));
  EXPECT_THAT(Error({"--name", "a b", "--class", "be", "--", "p"}), HasSubstr("--name:"));
  EXPECT_THAT(Error({"--name", std::string(65, 'n'), "--class", "be", "--", "p"}),
              HasSubstr("1 to 64"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--quota", "lots", "--", "p"}),
              HasSubstr("--quota:"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--quota", "0", "--", "p"}),
              HasSubstr("--quota: must be more than 0"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--no-daemon", "maybe", "--", "p"}),
              HasSubstr("--no-daemon: 'maybe' is not passthrough or refuse"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--"}), HasSubstr("no program to run"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be"}), HasSubstr("no program to run"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--", ""}), HasSubstr("empty program"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--gpu", "0", "--", "p"}),
              HasSubstr("unknown option '--gpu'"));
  EXPECT_THAT(Error({"--name", "j", "--name", "k", "--class", "be", "--", "p"}),
              HasSubstr("--name given twice"));
  EXPECT_THAT(Error({"--name", "j", "--class"}), HasSubstr("--class needs a value"));
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--socket=", "--", "p"}),
              HasSubstr("--socket: empty value"));
  for (const char* bad : {"0", "101", "-5", "50%", "x", ""}) {
    EXPECT_THAT(Error({"--name", "j", "--class", "be", "--be-sm-percent", bad, "--", "p"}),
                HasSubstr("--be-sm-percent")) << bad;
  }
  EXPECT_THAT(Error({"--name", "j", "--class", "be", "--be-sm-percent", "20x", "--", "p"}),
              HasSubstr("--be-sm-percent: '20x' is not a percentage in [1, 100]"));
  EXPECT_THAT(Error({"--name", "j", "--class", "ls", "--be-sm-percent", "50", "--", "p"}),
              HasSubstr("--be-sm-percent applies to --class be only"));
}

TEST(RunArgsTest, BeSmPercent) {
  absl::StatusOr<RunArgs> a =
      ParseRunArgs({"--name", "j", "--class", "be", "--be-sm-percent=25", "--", "p"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->be_sm_percent, 25u);
  for (const char* edge : {"1", "100"}) {
    EXPECT_TRUE(ParseRunArgs({"--name", "j", "--class", "be", "--be-sm-percent", edge, "p"}).ok());
  }
  EXPECT_FALSE(ParseRunArgs({"--name", "j", "--class", "be", "p"})->be_sm_percent.has_value());
  EXPECT_THAT(kRunUsage, HasSubstr("--be-sm-percent N"));
  EXPECT_THAT(kRunUsage, HasSubstr("only meaningful under MPS"));
}

RunArgs Minimal() {
  RunArgs a;
  a.name = "job";
  a.tenant_class = "be";
  a.command = {"prog"};
  return a;
}

TEST(RunEnvTest, MinimalSetsPreloadNameAndClass) {
  EXPECT_THAT(BuildRunEnv(Minimal(), "/lib/libmissile.so", nullptr),
              ElementsAre(Pair("LD_PRELOAD", "/lib/libmissile.so"),
                          Pair("MISSILE_TENANT_NAME", "job"), Pair("MISSILE_TENANT_CLASS", "be")));
}

TEST(RunEnvTest, EverythingGiven) {
  RunArgs a = Minimal();
  a.quota_bytes = uint64_t{8} << 30;
  a.socket = "/s.sock";
  a.no_daemon = "refuse";
  a.report = "/tmp/r.%p";
  EXPECT_THAT(BuildRunEnv(a, "/m.so", ""),
              ElementsAre(Pair("LD_PRELOAD", "/m.so"), Pair("MISSILE_TENANT_NAME", "job"),
                          Pair("MISSILE_TENANT_CLASS", "be"), Pair("MISSILE_QUOTA", "8589934592"),
                          Pair("MISSILE_SOCKET", "/s.sock"), Pair("MISSILE_NO_DAEMON", "refuse"),
                          Pair("MISSILE_REPORT", "/tmp/r.%p")));
}

TEST(RunEnvTest, BestEffortUnderMpsRunsBelowNormalPriority) {
  MpsState running;
  running.control_running = true;
  EXPECT_THAT(BuildRunEnv(Minimal(), "/m.so", nullptr, running),
              ElementsAre(Pair("LD_PRELOAD", "/m.so"), Pair("MISSILE_TENANT_NAME", "job"),
                          Pair("MISSILE_TENANT_CLASS", "be"),
                          Pair("CUDA_MPS_CLIENT_PRIORITY", "1")));
  // Without MPS, or with a priority the user chose, nothing is added.
  EXPECT_THAT(BuildRunEnv(Minimal(), "/m.so", nullptr, MpsState()),
              Not(Contains(Key("CUDA_MPS_CLIENT_PRIORITY"))));
  MpsState chosen = running;
  chosen.priority_set = true;
  EXPECT_THAT(BuildRunEnv(Minimal(), "/m.so", nullptr, chosen),
              Not(Contains(Key("CUDA_MPS_CLIENT_PRIORITY"))));
  // An LS tenant keeps normal priority.
  RunArgs ls = Minimal();
  ls.tenant_class = "ls";
  EXPECT_THAT(BuildRunEnv(ls, "/m.so", nullptr, running),
              Not(Contains(Key("CUDA_MPS_CLIENT_PRIORITY"))));
}

TEST(RunEnvTest, BeSmPercentSetsTheActiveThreadPercentage) {
  RunArgs a = Minimal();
  a.be_sm_percent = 30;
  MpsState running;
  running.control_running = true;
  EXPECT_THAT(BuildRunEnv(a, "/m.so", nullptr, running),
              ElementsAre(Pair("LD_PRELOAD", "/m.so"), Pair("MISSILE_TENANT_NAME", "job"),
                          Pair("MISSILE_TENANT_CLASS", "be"), Pair("CUDA_MPS_CLIENT_PRIORITY", "1"),
                          Pair("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30")));
  // Set even where no MPS daemon runs now (MPS reads it only when the client connects).
  EXPECT_THAT(BuildRunEnv(a, "/m.so", nullptr, MpsState()),
              Contains(Pair("CUDA_MPS_ACTIVE_THREAD_PERCENTAGE", "30")));
}

TEST(DetectMpsTest, LooksForTheControlSocketInThePipeDirectory) {
  std::vector<std::string> asked;
  auto only = [&asked](std::string path) {
    return [&asked, path](const std::string& p) {
      asked.push_back(p);
      return p == path;
    };
  };
  MpsState m = DetectMps(nullptr, nullptr, only("/tmp/nvidia-mps/control"));
  EXPECT_TRUE(m.control_running);
  EXPECT_FALSE(m.priority_set);
  EXPECT_THAT(asked, ElementsAre("/tmp/nvidia-mps/control"));
  // $CUDA_MPS_PIPE_DIRECTORY moves it; an empty value is the default.
  EXPECT_FALSE(DetectMps("/run/mps", nullptr, only("/tmp/nvidia-mps/control")).control_running);
  EXPECT_TRUE(DetectMps("/run/mps", nullptr, only("/run/mps/control")).control_running);
  EXPECT_TRUE(DetectMps("", nullptr, only("/tmp/nvidia-mps/control")).control_running);
  EXPECT_TRUE(DetectMps(nullptr, "0", only("")).priority_set);
  EXPECT_FALSE(DetectMps(nullptr, "", only("")).priority_set);
}

TEST(DetectMpsTest, RealSocketOnly) {
  std::string tmpl = (fs::temp_directory_path() / "missile-mps-test.XXXXXX").string();
  ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
  const fs::path dir = tmpl;
  const std::string control = (dir / "control").string();
  EXPECT_FALSE(DetectMps(dir.c_str(), nullptr).control_running);  // nothing there
  std::ofstream(control) << "a plain file";
  EXPECT_FALSE(IsSocket(control));
  EXPECT_FALSE(DetectMps(dir.c_str(), nullptr).control_running);
  fs::remove(control);
  int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  ASSERT_GE(fd, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  ASSERT_LT(control.size(), sizeof(addr.sun_path));
  control.copy(addr.sun_path, control.size());
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  EXPECT_TRUE(IsSocket(control));
  EXPECT_TRUE(DetectMps(dir.c_str(), nullptr).control_running);
  close(fd);
  fs::remove_all(dir);
}

TEST(RunEnvTest, ShimIsPrependedToExistingPreload) {
  auto preload = [](const char* existing) {
    return BuildRunEnv(Minimal(), "/m.so", existing)[0].second;
  };
  EXPECT_EQ(preload("/a.so"), "/m.so:/a.so");
  EXPECT_EQ(preload("/a.so:/b.so"), "/m.so:/a.so:/b.so");
  EXPECT_EQ(preload("/a.so /b.so"), "/m.so:/a.so:/b.so");  // ld.so also splits at spaces
  EXPECT_EQ(preload("/a.so:/m.so"), "/m.so:/a.so");        // no second copy of the shim
  EXPECT_EQ(preload("::"), "/m.so");
}

class ShimLookupTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = (fs::temp_directory_path() / "missile-run-test.XXXXXX").string();
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    root_ = tmpl;
    fs::create_directories(root_ / "bin");
    fs::create_directories(root_ / "lib");
    fs::create_directories(root_ / "libintercept");
    exe_ = (root_ / "bin" / "missile-run").string();
  }
  void TearDown() override { fs::remove_all(root_); }

  std::string Touch(const fs::path& p) {
    std::ofstream(p) << "not really a library";
    return p.string();
  }

  fs::path root_;
  std::string exe_;
};

TEST_F(ShimLookupTest, CandidatesInOrder) {
  EXPECT_THAT(ShimCandidates("/opt/missile/bin/missile-run"),
              ElementsAre("/opt/missile/lib/missile/libmissile.so", "/opt/missile/lib/libmissile.so",
                          "/opt/missile/bin/libmissile.so",
                          "/opt/missile/libintercept/libmissile.so"));
}

TEST_F(ShimLookupTest, SearchOrder) {
  std::string env = Touch(root_ / "env.so");
  EXPECT_EQ(FindShim(std::nullopt, exe_, env.c_str()).value(), env);  // nothing next to the binary
  std::string intercept = Touch(root_ / "libintercept" / "libmissile.so");
  EXPECT_EQ(FindShim(std::nullopt, exe_, env.c_str()).value(), intercept);
  std::string same_dir = Touch(root_ / "bin" / "libmissile.so");
  EXPECT_EQ(FindShim(std::nullopt, exe_, env.c_str()).value(), same_dir);
  std::string lib = Touch(root_ / "lib" / "libmissile.so");
  EXPECT_EQ(FindShim(std::nullopt, exe_, env.c_str()).value(), lib);
  std::string explicit_shim = Touch(root_ / "mine.so");
  EXPECT_EQ(FindShim(explicit_shim, exe_, env.c_str()).value(), explicit_shim);
}

TEST_F(ShimLookupTest, MissingShims) {
  absl::StatusOr<std::string> s = FindShim(std::nullopt, exe_, nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(s.status().message(), HasSubstr("give --shim PATH"));
  EXPECT_THAT(s.status().message(), HasSubstr((root_ / "lib" / "libmissile.so").string()));

  std::string absent = (root_ / "absent.so").string();
  s = FindShim(absent, exe_, nullptr);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(s.status().message(), HasSubstr("--shim " + absent + ": no such file"));

  // An explicit --shim that is missing is an error even when another shim exists.
  Touch(root_ / "lib" / "libmissile.so");
  EXPECT_FALSE(FindShim(absent, exe_, nullptr).ok());

  fs::remove(root_ / "lib" / "libmissile.so");
  s = FindShim(std::nullopt, exe_, absent.c_str());
  EXPECT_THAT(s.status().message(), HasSubstr("MISSILE_SHIM=" + absent + ": no such file"));

  // A directory is not a shim.
  EXPECT_FALSE(FindShim((root_ / "lib").string(), exe_, nullptr).ok());
}

TEST_F(ShimLookupTest, RelativeShimBecomesAbsolute) {
  std::string shim = Touch(root_ / "rel.so");
  fs::path old = fs::current_path();
  fs::current_path(root_);
  absl::StatusOr<std::string> s = FindShim(std::string("./rel.so"), exe_, nullptr);
  fs::current_path(old);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_EQ(*s, shim);
}

TEST_F(ShimLookupTest, PathsLdPreloadCannotCarry) {
  std::string spaced = Touch(root_ / "my shim.so");
  absl::StatusOr<std::string> s = FindShim(spaced, exe_, nullptr);
  EXPECT_FALSE(s.ok());
  EXPECT_THAT(s.status().message(), HasSubstr("LD_PRELOAD cannot carry"));
  std::string colon = Touch(root_ / "a:b.so");
  EXPECT_FALSE(FindShim(colon, exe_, nullptr).ok());
}

}  // namespace
}  // namespace missile::cli
