#include "run_args.h"

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
using ::testing::ElementsAre;
using ::testing::HasSubstr;
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
  EXPECT_FALSE(a->quota_bytes.has_value());
  EXPECT_FALSE(a->socket.has_value());
}

TEST(RunArgsTest, Help) {
  absl::StatusOr<RunArgs> a = ParseRunArgs({"--name", "j", "--help"});
  ASSERT_TRUE(a.ok());
  EXPECT_TRUE(a->help);
  EXPECT_THAT(kRunUsage, HasSubstr("usage: missile-run"));
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
