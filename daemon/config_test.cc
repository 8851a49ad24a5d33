#include "daemon/config.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

#ifndef MISSILE_EXAMPLE_CONFIG
#error "MISSILE_EXAMPLE_CONFIG must name deploy/missiled.toml"
#endif

namespace missile::daemon {
namespace {

using ::testing::AllOf;
using ::testing::ElementsAre;
using ::testing::HasSubstr;
using ::testing::Not;
using ::testing::StartsWith;

DaemonConfig Parse(std::string_view text) {
  absl::StatusOr<DaemonConfig> config = ParseConfig(text);
  EXPECT_TRUE(config.ok()) << text << "\n" << config.status();
  return config.value_or(DaemonConfig{});
}

// The message of a config that must be rejected with InvalidArgument.
std::string Error(std::string_view text) {
  absl::StatusOr<DaemonConfig> config = ParseConfig(text);
  EXPECT_FALSE(config.ok()) << "accepted:\n" << text;
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument) << config.status();
  return std::string(config.status().message());
}

// A temporary file that goes away with the test.
class TempFile {
 public:
  explicit TempFile(std::string_view contents, mode_t mode = 0644) {
    std::string pattern = ::testing::TempDir() + "/missiled_config_XXXXXX";
    const int fd = mkstemp(pattern.data());
    EXPECT_GE(fd, 0);
    path_ = pattern;
    EXPECT_EQ(write(fd, contents.data(), contents.size()), static_cast<ssize_t>(contents.size()));
    EXPECT_EQ(fchmod(fd, mode), 0);
    close(fd);
  }
  ~TempFile() { unlink(path_.c_str()); }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

TEST(ConfigTest, Defaults) {
  const DaemonConfig config = Parse("");
  EXPECT_EQ(config, DaemonConfig{});
  EXPECT_EQ(config.daemon.socket, "/run/missile/missiled.sock");
  EXPECT_EQ(config.daemon.fd_socket, "");
  EXPECT_EQ(config.daemon.FdSocketPath(), "/run/missile/missiled.sock.fd");
  EXPECT_EQ(config.daemon.socket_group, "");
  EXPECT_EQ(config.daemon.socket_mode, 0660u);
  EXPECT_EQ(config.daemon.admin_group, "");
  EXPECT_EQ(config.daemon.log_level, "info");
  EXPECT_FALSE(config.gpu.devices.has_value());
  EXPECT_EQ(config.gpu.pool_limit, SizeOrFraction::Fraction(0.95));
  EXPECT_EQ(config.gpu.prealloc, SizeOrFraction::Bytes(0));
  EXPECT_EQ(config.gpu.cache_limit, 2 * kGiB);
  EXPECT_TRUE(config.gpu.scrub_on_release);
  EXPECT_EQ(config.gpu.profile_dir, "/var/lib/missile/profiles");
  EXPECT_EQ(config.gpu.ls_colours, 0);
  EXPECT_EQ(config.classes.ls.priority, -10);
  EXPECT_EQ(config.classes.be.priority, 10);
  for (const ClassSection* cls : {&config.classes.ls, &config.classes.be}) {
    EXPECT_EQ(cls->tenant_quota, SizeOrFraction::Fraction(1.0));
    EXPECT_EQ(cls->class_quota, SizeOrFraction::Fraction(1.0));
  }
  EXPECT_EQ(config.pcie.chunk, 2 * kMiB);
  EXPECT_EQ(config.pcie.max_inflight_chunks, 2);
  EXPECT_EQ(config.pcie.max_inflight_per_tenant, 2);
  EXPECT_EQ(config.pcie.bypass_below, 64 * kKiB);
  EXPECT_TRUE(config.pcie.ls_first);
  EXPECT_EQ(config.pcie.be_min_share_percent, 5);
  EXPECT_EQ(config.pcie.spin_us, 200);
  EXPECT_EQ(config.pcie.ls_spin_us, 20000);
  EXPECT_EQ(config.pcie.ls_quiet_ms, 1000);
  EXPECT_EQ(config.pcie.be_chunk, 16 * kMiB);
  // Empty tables change nothing.
  EXPECT_EQ(Parse("[daemon]\n[gpu]\n[classes]\n[classes.ls]\n[classes.be]\n[pcie]\n"),
            DaemonConfig{});
}

TEST(ConfigTest, ExampleFileParsesToTheDefaults) {
  absl::StatusOr<DaemonConfig> config = LoadConfig(MISSILE_EXAMPLE_CONFIG, /*must_exist=*/true);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config, DaemonConfig{}) << DescribeConfig(*config);
}

// The keys "section.key = ..." of a TOML file written with [section] headers.
std::set<std::string> ExampleKeys() {
  std::ifstream in(MISSILE_EXAMPLE_CONFIG);
  std::set<std::string> keys;
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '#') continue;
    if (line[0] == '[') {
      section = line.substr(1, line.find(']') - 1);
    } else if (size_t eq = line.find(" = "); eq != std::string::npos) {
      keys.insert(section + "." + line.substr(0, eq));
    }
  }
  return keys;
}

std::set<std::string> DescribedKeys(const DaemonConfig& config) {
  std::istringstream in(DescribeConfig(config));
  std::set<std::string> keys;
  std::string line;
  while (std::getline(in, line)) keys.insert(line.substr(0, line.find(" = ")));
  return keys;
}

TEST(ConfigTest, ExampleFileAndDescribeConfigListEveryKey) {
  const std::set<std::string> keys = ExampleKeys();
  EXPECT_EQ(keys.size(), 58u);
  EXPECT_EQ(keys, DescribedKeys(DaemonConfig{}));
}

TEST(ConfigTest, EveryKeySet) {
  const DaemonConfig config = Parse(R"(
[daemon]
socket = "/tmp/m.sock"
fd_socket = "/tmp/m-fd.sock"
socket_group = "gpu-users"
socket_mode = "600"
admin_group = "gpu-admins"
log_level = "debug"
[gpu]
devices = [1, 0, 3]
pool_limit = "120GiB"
prealloc = "10%"
cache_limit = 0
scrub_on_release = false
profile_dir = ""
ls_colours = 3
[classes.ls]
priority = -20
tenant_quota = "40 GiB"
class_quota = "80GiB"
[classes.be]
priority = 19
tenant_quota = "25%"
class_quota = "50%"
[pcie]
chunk = "4MiB"
be_chunk = "16MiB"
max_inflight_chunks = 4
max_inflight_per_tenant = 1
bypass_below = 0
ls_first = false
be_min_share_percent = 10
spin_us = 0
ls_spin_us = 500
ls_quiet_ms = 250
)");
  EXPECT_EQ(config.daemon.socket, "/tmp/m.sock");
  EXPECT_EQ(config.daemon.FdSocketPath(), "/tmp/m-fd.sock");
  EXPECT_EQ(config.daemon.socket_group, "gpu-users");
  EXPECT_EQ(config.daemon.socket_mode, 0600u);
  EXPECT_EQ(config.daemon.admin_group, "gpu-admins");
  EXPECT_EQ(config.daemon.log_level, "debug");
  EXPECT_THAT(config.gpu.devices.value_or(std::vector<int>{}), ElementsAre(1, 0, 3));
  EXPECT_EQ(config.gpu.pool_limit, SizeOrFraction::Bytes(120 * kGiB));
  EXPECT_EQ(config.gpu.prealloc, SizeOrFraction::Fraction(0.1));
  EXPECT_EQ(config.gpu.cache_limit, 0u);
  EXPECT_FALSE(config.gpu.scrub_on_release);
  EXPECT_EQ(config.gpu.profile_dir, "");
  EXPECT_EQ(config.gpu.ls_colours, 3);
  EXPECT_EQ(config.classes.ls.priority, -20);
  EXPECT_EQ(config.classes.ls.tenant_quota, SizeOrFraction::Bytes(40 * kGiB));
  EXPECT_EQ(config.classes.ls.class_quota, SizeOrFraction::Bytes(80 * kGiB));
  EXPECT_EQ(config.classes.be.priority, 19);
  EXPECT_EQ(config.classes.be.tenant_quota, SizeOrFraction::Fraction(0.25));
  EXPECT_EQ(config.classes.be.class_quota, SizeOrFraction::Fraction(0.5));
  EXPECT_EQ(config.pcie.chunk, 4 * kMiB);
  EXPECT_EQ(config.pcie.be_chunk, 16 * kMiB);
  EXPECT_EQ(config.pcie.max_inflight_chunks, 4);
  EXPECT_EQ(config.pcie.max_inflight_per_tenant, 1);
  EXPECT_EQ(config.pcie.bypass_below, 0u);
  EXPECT_FALSE(config.pcie.ls_first);
  EXPECT_EQ(config.pcie.be_min_share_percent, 10);
  EXPECT_EQ(config.pcie.spin_us, 0);
  EXPECT_EQ(config.pcie.ls_spin_us, 500);
  EXPECT_EQ(config.pcie.ls_quiet_ms, 250);

  // DescribeConfig's text is TOML that reads back to the same settings.
  EXPECT_EQ(Parse(DescribeConfig(config)), config);
}

TEST(ConfigTest, DevicesAllOrList) {
  EXPECT_FALSE(Parse("gpu.devices = \"all\"").gpu.devices.has_value());
  EXPECT_THAT(Parse("[gpu]\ndevices = [0]").gpu.devices.value_or(std::vector<int>{}),
              ElementsAre(0));
  EXPECT_THAT(Parse("[gpu]\ndevices = [0, 1]").gpu.devices.value_or(std::vector<int>{}),
              ElementsAre(0, 1));
  EXPECT_THAT(Error("[gpu]\ndevices = []"), HasSubstr("gpu.devices: must not be empty"));
  EXPECT_THAT(Error("[gpu]\ndevices = \"ALL\""),
              HasSubstr("gpu.devices: must be \"all\" or an array of CUDA device ordinals"));
  EXPECT_THAT(Error("[gpu]\ndevices = \"0,1\""), HasSubstr("got string \"0,1\""));
  EXPECT_THAT(Error("[gpu]\ndevices = 0"), HasSubstr("gpu.devices: must be \"all\""));
  EXPECT_THAT(Error("[gpu]\ndevices = [0, -1]"),
              HasSubstr("gpu.devices[1]: must be an integer in [0, 1023], got -1"));
  EXPECT_THAT(Error("[gpu]\ndevices = [0, \"1\"]"),
              HasSubstr("gpu.devices[1]: must be an integer in [0, 1023], got string \"1\""));
  EXPECT_THAT(Error("[gpu]\ndevices = [2, 1, 2]"), HasSubstr("gpu.devices: lists device 2 twice"));
}

TEST(ConfigTest, SizesAndPercentages) {
  DaemonConfig config = Parse("[gpu]\npool_limit = \"50%\"\nprealloc = \"8GiB\"");
  EXPECT_EQ(config.gpu.pool_limit, SizeOrFraction::Fraction(0.5));
  EXPECT_EQ(config.gpu.PoolLimitBytes(100 * kGiB), 50 * kGiB);
  EXPECT_EQ(config.gpu.PreallocBytes(100 * kGiB), 8 * kGiB);
  EXPECT_EQ(config.gpu.PreallocBytes(10 * kGiB), 5 * kGiB);  // capped at the pool

  config = Parse("[gpu]\npool_limit = \"1073741824B\"\nprealloc = \"100%\"\ncache_limit = \"1.5G\"");
  EXPECT_EQ(config.gpu.pool_limit, SizeOrFraction::Bytes(kGiB));
  EXPECT_EQ(config.gpu.PoolLimitBytes(80 * kGiB), kGiB);
  EXPECT_EQ(config.gpu.PoolLimitBytes(kMiB), kMiB);  // never more than the GPU has
  EXPECT_EQ(config.gpu.PreallocBytes(80 * kGiB), kGiB);
  EXPECT_EQ(config.gpu.cache_limit, kGiB + kGiB / 2);

  // The default pool limit, resolved on an H200 (143771 MiB as cuDeviceTotalMem reports it).
  EXPECT_EQ(DaemonConfig{}.gpu.PoolLimitBytes(143771 * kMiB), 143771 * kMiB * 95 / 100);

  config = Parse("[classes.be]\ntenant_quota = \"10GiB\"\nclass_quota = \"25%\"");
  EXPECT_EQ(config.classes.be.ResolveQuotas(100 * kGiB), (ClassQuotaBytes{10 * kGiB, 25 * kGiB}));
  // Mixed: the tenant quota is capped at the class quota once both are bytes.
  EXPECT_EQ(config.classes.be.ResolveQuotas(20 * kGiB), (ClassQuotaBytes{5 * kGiB, 5 * kGiB}));
  config = Parse("[classes.ls]\ntenant_quota = \"500GiB\"\nclass_quota = \"900GiB\"");
  EXPECT_EQ(config.classes.ls.ResolveQuotas(100 * kGiB),
            (ClassQuotaBytes{100 * kGiB, 100 * kGiB}));  // both capped at the pool
  EXPECT_EQ(DaemonConfig{}.classes.ls.ResolveQuotas(7 * kGiB),
            (ClassQuotaBytes{7 * kGiB, 7 * kGiB}));

  EXPECT_THAT(Error("[gpu]\npool_limit = \"150%\""),
              HasSubstr("gpu.pool_limit: invalid percentage \"150%\""));
  EXPECT_THAT(Error("[gpu]\npool_limit = \"0%\""), HasSubstr("gpu.pool_limit: invalid percentage"));
  EXPECT_THAT(Error("[gpu]\npool_limit = \"0\""), HasSubstr("gpu.pool_limit: must not be 0"));
  EXPECT_THAT(Error("[gpu]\npool_limit = 0.95"),
              HasSubstr("gpu.pool_limit: must be a size such as \"2GiB\" or a percentage such as "
                        "\"50%\", got float 0.95"));
  // A bare number is refused: 95 bytes or 95 %? (`pool_limit = 95` once read as 95 bytes.)
  EXPECT_THAT(Error("[gpu]\npool_limit = 95"),
              HasSubstr("gpu.pool_limit: a number without a unit is ambiguous"));
  EXPECT_THAT(Error("[gpu]\npool_limit = \"95\""),
              HasSubstr("gpu.pool_limit: a number without a unit is ambiguous"));
  EXPECT_THAT(Error("[gpu]\ncache_limit = 4096"),
              HasSubstr("gpu.cache_limit: a number without a unit is ambiguous"));
  EXPECT_EQ(Parse("[gpu]\ncache_limit = \"4096B\"").gpu.cache_limit, 4096u);
  EXPECT_THAT(Error("[gpu]\npool_limit = -1"), HasSubstr("gpu.pool_limit: must be a size"));
  EXPECT_THAT(Error("[gpu]\ncache_limit = \"10%\""),
              HasSubstr("gpu.cache_limit: invalid size \"10%\": unknown unit \"%\""));
  EXPECT_THAT(Error("[gpu]\ncache_limit = \"2 GB of RAM\""),
              HasSubstr("gpu.cache_limit: invalid size \"2 GB of RAM\""));
  EXPECT_THAT(Error("[gpu]\ncache_limit = true"),
              HasSubstr("gpu.cache_limit: must be a size such as \"2MiB\", got boolean true"));
  EXPECT_THAT(Error("[gpu]\nprealloc = \"99999999T\""),
              HasSubstr("gpu.prealloc: invalid size or percentage \"99999999T\": too large"));
}

TEST(ConfigTest, SocketMode) {
  EXPECT_EQ(Parse("[daemon]\nsocket_mode = \"0600\"").daemon.socket_mode, 0600u);
  EXPECT_EQ(Parse("[daemon]\nsocket_mode = \"770\"").daemon.socket_mode, 0770u);
  EXPECT_EQ(Parse("[daemon]\nsocket_mode = \"0664\"").daemon.socket_mode,
            0664u);  // o+r is harmless
  for (std::string_view bad : {"\"0o660\"", "\"9\"", "\"0968\"", "\"01777\"", "\"4660\"", "\"66\"",
                               "\"\"", "\"0x1b6\"", "\" 660\""}) {
    EXPECT_THAT(Error("[daemon]\nsocket_mode = " + std::string(bad)),
                HasSubstr("daemon.socket_mode: must be an octal string of permissions such as "
                          "\"0660\" (at most \"0777\")"))
        << bad;
  }
  EXPECT_THAT(Error("[daemon]\nsocket_mode = 0o660"),
              HasSubstr("daemon.socket_mode: must be an octal string of permissions such as "
                        "\"0660\" (at most \"0777\"), got integer 0o660"));
  for (std::string_view open : {"0666", "0662", "0002", "777"}) {
    EXPECT_THAT(Error("[daemon]\nsocket_mode = \"" + std::string(open) + "\""),
                HasSubstr("daemon.socket_mode: must not let others write (o+w)"))
        << open;
  }
}

TEST(ConfigTest, UnknownKeysAndTablesAreNamed) {
  EXPECT_THAT(Error("[daemon]\nsockt = \"/x\""),
              HasSubstr("unknown key 'daemon.sockt' (did you mean 'daemon.socket'?)"));
  EXPECT_THAT(Error("[daemon]\nverbose = true"),
              AllOf(HasSubstr("unknown key 'daemon.verbose'"), Not(HasSubstr("did you mean"))));
  EXPECT_THAT(Error("[deamon]\nsocket = \"/x\""),
              HasSubstr("unknown table 'deamon' (did you mean 'daemon'?)"));
  EXPECT_THAT(Error("socket = \"/x\""), HasSubstr("unknown key 'socket'"));
  EXPECT_THAT(Error("[classes.mid]\npriority = 0"), HasSubstr("unknown table 'classes.mid'"));
  EXPECT_THAT(Error("[classes.ls]\nquota = \"1G\""), HasSubstr("unknown key 'classes.ls.quota'"));
  EXPECT_THAT(Error("[pcie.extra]\nx = 1"), HasSubstr("unknown table 'pcie.extra'"));
  EXPECT_THAT(Error("[gpu]\ndevices = \"all\"\n[gpu.x]\n"), HasSubstr("unknown table 'gpu.x'"));
}

// Each bad value names its key (and where it is).
TEST(ConfigTest, EveryErrorNamesItsKey) {
  struct Case {
    std::string toml;
    std::string message;
  };
  const Case cases[] = {
      {"daemon = 1", "daemon: must be a table, got integer 1"},
      {"[[gpu]]\ndevices = \"all\"", "gpu: must be a table, got an array"},
      {"classes = \"x\"", "classes: must be a table, got string \"x\""},
      {"[classes]\nls = 3", "classes.ls: must be a table, got integer 3"},
      {"[daemon]\nsocket = \"run/missiled.sock\"",
       "daemon.socket: must be an absolute path, got \"run/missiled.sock\""},
      {"[daemon]\nsocket = \"\"", "daemon.socket: must be an absolute path, got \"\""},
      {"[daemon]\nsocket = 5", "daemon.socket: must be a string, got integer 5"},
      {"[daemon]\nsocket = \"/" + std::string(107, 'x') + "\"",
       "daemon.socket: must be at most 107 bytes long, got 108"},
      {"[daemon]\nfd_socket = \"fd.sock\"",
       "daemon.fd_socket: must be an absolute path or \"\", got \"fd.sock\""},
      {"[daemon]\nsocket_group = \"a:b\"", "daemon.socket_group: must be a group name"},
      {"[daemon]\nadmin_group = \" wheel\"", "daemon.admin_group: must be a group name"},
      {"[daemon]\nadmin_group = false", "daemon.admin_group: must be a string, got boolean false"},
      {"[daemon]\nlog_level = \"verbose\"",
       "daemon.log_level: must be one of trace, debug, info, warn, error, off, got \"verbose\""},
      {"[daemon]\nlog_level = \"INFO\"", "daemon.log_level: must be one of"},
      {"[gpu]\nscrub_on_release = \"yes\"",
       "gpu.scrub_on_release: must be true or false, got string \"yes\""},
      {"[gpu]\nprofile_dir = \"profiles\"",
       "gpu.profile_dir: must be an absolute path or \"\", got \"profiles\""},
      {"[gpu]\nls_colours = 64", "gpu.ls_colours: must be an integer in [0, 63], got 64"},
      {"[gpu]\nls_colours = -1", "gpu.ls_colours: must be an integer in [0, 63], got -1"},
      {"[gpu]\nls_colours = 1.0", "gpu.ls_colours: must be an integer in [0, 63], got float 1"},
      {"[classes.be]\npriority = 25",
       "classes.be.priority: must be an integer in [-20, 19], got 25"},
      {"[classes.ls]\npriority = -21",
       "classes.ls.priority: must be an integer in [-20, 19], got -21"},
      {"[classes.ls]\npriority = \"-10\"",
       "classes.ls.priority: must be an integer in [-20, 19], got string \"-10\""},
      {"[classes.ls]\npriority = 9999999999999",
       "classes.ls.priority: must be an integer in [-20, 19], got 9999999999999"},
      {"[classes.ls]\ntenant_quota = \"0\"", "classes.ls.tenant_quota: must not be 0"},
      {"[classes.be]\nclass_quota = \"lots\"",
       "classes.be.class_quota: invalid size or percentage"},
      {"[pcie]\nchunk = \"3000B\"",
       "pcie.chunk: must be a multiple of 4KiB in [64KiB, 64MiB], got 3000"},
      {"[pcie]\nchunk = \"32KiB\"",
       "pcie.chunk: must be a multiple of 4KiB in [64KiB, 64MiB], got 32KiB"},
      {"[pcie]\nchunk = \"128MiB\"", "pcie.chunk: must be a multiple of 4KiB"},
      {"[pcie]\nchunk = \"66KiB\"", "pcie.chunk: must be a multiple of 4KiB"},
      {"[pcie]\nchunk = \"2XB\"", "pcie.chunk: invalid size \"2XB\": unknown unit \"XB\""},
      {"[pcie]\nmax_inflight_chunks = 0",
       "pcie.max_inflight_chunks: must be an integer in [1, 64], got 0"},
      {"[pcie]\nmax_inflight_chunks = 65",
       "pcie.max_inflight_chunks: must be an integer in [1, 64], got 65"},
      {"[pcie]\nmax_inflight_per_tenant = 0",
       "pcie.max_inflight_per_tenant: must be an integer in [1, 64], got 0"},
      {"[pcie]\nbypass_below = \"1 KB\"\nchunk = [1]", "pcie.chunk: must be a size"},
      {"[pcie]\nls_first = 1", "pcie.ls_first: must be true or false, got integer 1"},
      {"[pcie]\nbe_min_share_percent = 51",
       "pcie.be_min_share_percent: must be an integer in [0, 50], got 51"},
      {"[pcie]\nbe_min_share_percent = \"5%\"",
       "pcie.be_min_share_percent: must be an integer in [0, 50]"},
      {"[pcie]\nbe_chunk = \"1MiB+1\"", "pcie.be_chunk: invalid size"},
      {"[pcie]\nbe_chunk = \"32KiB\"",
       "pcie.be_chunk: must be a multiple of 4KiB in [64KiB, 64MiB] or 0, got 32KiB"},
      {"[pcie]\nls_spin_us = -1", "pcie.ls_spin_us: must be an integer in [0, 1000000], got -1"},
      {"[pcie]\nls_quiet_ms = 600001",
       "pcie.ls_quiet_ms: must be an integer in [0, 600000], got 600001"},
      {"[pcie]\nspin_us = 100001", "pcie.spin_us: must be an integer in [0, 100000], got 100001"},
  };
  for (const Case& c : cases) {
    const std::string message = Error(c.toml);
    EXPECT_THAT(message, HasSubstr(c.message)) << c.toml;
    EXPECT_THAT(message, StartsWith("line ")) << c.toml;
  }
}

TEST(ConfigTest, CrossFieldRules) {
  EXPECT_THAT(Error("[gpu]\npool_limit = \"50%\"\nprealloc = \"60%\""),
              HasSubstr("line 3: gpu.prealloc: must be at most gpu.pool_limit (50%), got 60%"));
  EXPECT_THAT(Error("[gpu]\npool_limit = \"10GiB\"\nprealloc = \"11GiB\""),
              HasSubstr("gpu.prealloc: must be at most gpu.pool_limit (10GiB), got 11GiB"));
  Parse("[gpu]\npool_limit = \"10GiB\"\nprealloc = \"50%\"");  // mixed: settled at start
  EXPECT_THAT(Error("[gpu]\nprealloc = \"96%\""),
              HasSubstr("line 2: gpu.prealloc: must be at most gpu.pool_limit (95%), got 96%"));

  EXPECT_THAT(Error("[classes.be]\ntenant_quota = \"50%\"\nclass_quota = \"40%\""),
              HasSubstr("line 3: classes.be.class_quota: must be at least "
                        "classes.be.tenant_quota (50%), got 40%"));
  EXPECT_THAT(Error("[classes.ls]\ntenant_quota = \"8GiB\"\nclass_quota = \"4GiB\""),
              HasSubstr("classes.ls.class_quota: must be at least classes.ls.tenant_quota "
                        "(8GiB), got 4GiB"));
  EXPECT_THAT(Error("[classes.ls]\nclass_quota = \"40%\""),  // tenant_quota's default is 100%
              HasSubstr("line 2: classes.ls.class_quota: must be at least"));
  Parse("[classes.ls]\ntenant_quota = \"8GiB\"\nclass_quota = \"40%\"");   // mixed
  Parse("[classes.ls]\ntenant_quota = \"8GiB\"\nclass_quota = \"8GiB\"");  // equal

  EXPECT_THAT(Error("[pcie]\nmax_inflight_per_tenant = 3"),
              HasSubstr("line 2: pcie.max_inflight_per_tenant: must be at most "
                        "pcie.max_inflight_chunks (2), got 3"));
  Parse("[pcie]\nmax_inflight_chunks = 8\nmax_inflight_per_tenant = 8");
  EXPECT_THAT(Error("[pcie]\nmax_inflight_chunks = 1"),  // below the per-tenant default
              HasSubstr("line 2: pcie.max_inflight_per_tenant: must be at most "
                        "pcie.max_inflight_chunks (1), got 2"));

  EXPECT_THAT(Error("[pcie]\nbypass_below = \"4MiB\""),
              HasSubstr("line 2: pcie.bypass_below: must be at most pcie.chunk (2MiB), got 4MiB"));
  Parse("[pcie]\nbypass_below = \"2MiB\"");
  Parse("[pcie]\nchunk = \"8MiB\"\nbypass_below = \"4MiB\"");

  EXPECT_THAT(Error("[daemon]\nsocket = \"/run/a\"\nfd_socket = \"/run/a\""),
              HasSubstr("line 3: daemon.fd_socket: must differ from daemon.socket"));
  EXPECT_THAT(Error("[daemon]\nsocket = \"/" + std::string(105, 'x') + "\""),
              HasSubstr("line 2: daemon.fd_socket: daemon.socket + \".fd\" would be longer than "
                        "107 bytes: set daemon.fd_socket"));
  Parse("[daemon]\nsocket = \"/" + std::string(105, 'x') + "\"\nfd_socket = \"/run/fd\"");
}

TEST(ConfigTest, ReportsEveryProblemInFileOrder) {
  const std::string message = Error(R"([pcie]
chunk = "1KiB"
[daemon]
log_level = "loud"
sockt = "/x"
[classes.be]
priority = 99
)");
  EXPECT_EQ(message,
            "line 2: pcie.chunk: must be a multiple of 4KiB in [64KiB, 64MiB], got 1KiB\n"
            "line 4: daemon.log_level: must be one of trace, debug, info, warn, error, off, got "
            "\"loud\"\n"
            "line 5: unknown key 'daemon.sockt' (did you mean 'daemon.socket'?)\n"
            "line 7: classes.be.priority: must be an integer in [-20, 19], got 99");
}

TEST(ConfigTest, TomlSyntaxErrors) {
  EXPECT_THAT(Error("[daemon]\nsocket = \n"), StartsWith("line 2: invalid TOML at column"));
  EXPECT_THAT(Error("[daemon]\nsocket = \"/a\"\nsocket = \"/b\"\n"), StartsWith("line 3: "));
  EXPECT_THAT(Error("[daemon\n"), HasSubstr("invalid TOML"));
}

TEST(ConfigTest, DescribeConfig) {
  const std::string text = DescribeConfig(DaemonConfig{});
  EXPECT_THAT(text, StartsWith("daemon.socket = \"/run/missile/missiled.sock\"\n"));
  EXPECT_THAT(text, HasSubstr("\ndaemon.fd_socket = \"/run/missile/missiled.sock.fd\"  # "));
  EXPECT_THAT(text, HasSubstr("\ndaemon.socket_mode = \"0660\"\n"));
  EXPECT_THAT(text, HasSubstr("\ngpu.devices = \"all\"\n"));
  EXPECT_THAT(text, HasSubstr("\ngpu.pool_limit = \"95%\"\n"));
  EXPECT_THAT(text, HasSubstr("\ngpu.prealloc = \"0\"\n"));
  EXPECT_THAT(text, HasSubstr("\ngpu.cache_limit = \"2GiB\"\n"));
  EXPECT_THAT(text, HasSubstr("\nclasses.ls.priority = -10\n"));
  EXPECT_THAT(text, HasSubstr("\nclasses.be.class_quota = \"100%\"\n"));
  EXPECT_THAT(text, HasSubstr("\npcie.chunk = \"2MiB\"\n"));
  EXPECT_THAT(text, HasSubstr("\npcie.bypass_below = \"64KiB\"\n"));
  EXPECT_THAT(text, HasSubstr("\npcie.ls_first = true"));
  // Read back, only fd_socket differs: it is written resolved.
  DaemonConfig back = Parse(text);
  EXPECT_EQ(back.daemon.fd_socket, "/run/missile/missiled.sock.fd");
  back.daemon.fd_socket = "";
  EXPECT_EQ(back, DaemonConfig{});

  DaemonConfig odd;
  odd.gpu.devices = std::vector<int>{2, 5};
  odd.gpu.cache_limit = kGiB + 1;
  odd.daemon.socket_group = "it's \"quoted\"";
  EXPECT_THAT(DescribeConfig(odd), HasSubstr("\ngpu.devices = [2, 5]\n"));
  EXPECT_THAT(DescribeConfig(odd), HasSubstr("\ngpu.cache_limit = \"1073741825B\"\n"));
  EXPECT_EQ(Parse(DescribeConfig(odd)).daemon.socket_group, odd.daemon.socket_group);
}

TEST(LoadConfigTest, MissingFile) {
  const std::string missing = ::testing::TempDir() + "/no/such/missiled.toml";
  absl::StatusOr<DaemonConfig> config = LoadConfig(missing, /*must_exist=*/false);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_EQ(*config, DaemonConfig{});
  config = LoadConfig(missing, /*must_exist=*/true);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(missing));
}

TEST(LoadConfigTest, ReadsAFileAndNamesItInErrors) {
  TempFile good("[gpu]\ndevices = [1]\n");
  absl::StatusOr<DaemonConfig> config = LoadConfig(good.path(), /*must_exist=*/true);
  ASSERT_TRUE(config.ok()) << config.status();
  EXPECT_THAT(config->gpu.devices.value_or(std::vector<int>{}), ElementsAre(1));

  TempFile bad("\n[classes.be]\npriority = 25\n");
  config = LoadConfig(bad.path(), /*must_exist=*/false);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(config.status().message(),
            bad.path() + ":3: classes.be.priority: must be an integer in [-20, 19], got 25");

  TempFile syntax("a = = 1\n");
  config = LoadConfig(syntax.path(), /*must_exist=*/true);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(config.status().message()),
              StartsWith(syntax.path() + ":1: invalid TOML"));
}

TEST(LoadConfigTest, RejectsFilesOthersMayWriteAndNonFiles) {
  TempFile open("", 0666);
  absl::StatusOr<DaemonConfig> config = LoadConfig(open.path(), /*must_exist=*/true);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr("every user may write it (mode 0666)"));

  TempFile group_writable("", 0664);
  config = LoadConfig(group_writable.path(), /*must_exist=*/true);
  EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_THAT(std::string(config.status().message()),
              HasSubstr(group_writable.path() + ": its group may write it (mode 0664)"));

  TempFile mine("", 0644);
  EXPECT_TRUE(LoadConfig(mine.path(), /*must_exist=*/true).ok());
  if (geteuid() == 0) {  // only root can give a file away to test the owner check
    TempFile foreign("", 0644);
    ASSERT_EQ(chown(foreign.path().c_str(), 12345, static_cast<gid_t>(-1)), 0);
    config = LoadConfig(foreign.path(), /*must_exist=*/true);
    EXPECT_EQ(config.status().code(), absl::StatusCode::kFailedPrecondition);
    EXPECT_THAT(std::string(config.status().message()),
                HasSubstr(foreign.path() + ": owned by uid 12345, not by root or the daemon's"));
  }

  config = LoadConfig(::testing::TempDir(), /*must_exist=*/true);
  EXPECT_FALSE(config.ok());
  EXPECT_THAT(std::string(config.status().message()), HasSubstr(::testing::TempDir()));
}

TEST(ConfigTest, ComputeSection) {
  const DaemonConfig config = ParseConfig(R"(
[compute]
pacing = false
window_items = 3
window_us = 250
ls_idle_us = 0
ls_stale_ms = 50
max_hold_ms = 0
unknown_us = 10
share_slack_us = 500
ls_reserve_tpcs = 8
mps = "start"
mps_pipe_directory = "/run/mps"
mps_control = "/opt/cuda/bin/nvidia-cuda-mps-control"
)").value();
  const ComputeSection& c = config.compute;
  EXPECT_FALSE(c.pacing);
  EXPECT_EQ(c.window_items, 3);
  EXPECT_EQ(c.window_us, 250);
  EXPECT_EQ(c.ls_idle_us, 0);
  EXPECT_EQ(c.ls_stale_ms, 50);
  EXPECT_EQ(c.max_hold_ms, 0);
  EXPECT_EQ(c.unknown_us, 10);
  EXPECT_EQ(c.share_slack_us, 500);
  EXPECT_EQ(c.ls_reserve_tpcs, 8);
  EXPECT_EQ(c.mps, "start");
  EXPECT_EQ(c.mps_pipe_directory, "/run/mps");
  EXPECT_EQ(c.mps_log_directory, "/var/log/nvidia-mps");
  EXPECT_EQ(c.mps_control, "/opt/cuda/bin/nvidia-cuda-mps-control");
  // What DescribeConfig prints reads back to the same settings.
  EXPECT_EQ(ParseConfig(DescribeConfig(config)).value().compute, c);
}

TEST(ConfigTest, ComputeSectionRejectsBadValuesNamingTheKey) {
  auto error = [](std::string_view text) {
    absl::StatusOr<DaemonConfig> c = ParseConfig(text);
    return c.ok() ? std::string("accepted") : std::string(c.status().message());
  };
  EXPECT_THAT(error("[compute]\nwindow_items = 0"), HasSubstr("compute.window_items"));
  EXPECT_THAT(error("[compute]\nwindow_items = 5000"), HasSubstr("compute.window_items"));
  EXPECT_THAT(error("[compute]\nwindow_us = -1"), HasSubstr("compute.window_us"));
  EXPECT_THAT(error("[compute]\nls_stale_ms = 0"), HasSubstr("compute.ls_stale_ms"));
  EXPECT_THAT(error("[compute]\nls_reserve_tpcs = 128"), HasSubstr("compute.ls_reserve_tpcs"));
  EXPECT_THAT(error("[compute]\nls_reserve_tpcs = -1"), HasSubstr("compute.ls_reserve_tpcs"));
  EXPECT_THAT(error("[compute]\npacing = \"yes\""), HasSubstr("compute.pacing"));
  EXPECT_THAT(error("[compute]\nls_idle_us = 1.5"), HasSubstr("compute.ls_idle_us"));
  EXPECT_THAT(error("[compute]\nwindow = 4"), HasSubstr("compute.window"));  // unknown key
  EXPECT_THAT(error("[compute]\nmps = \"on\""), HasSubstr("compute.mps: must be"));
  EXPECT_THAT(error("[compute]\nmps_pipe_directory = \"tmp/mps\""),
              HasSubstr("compute.mps_pipe_directory"));
  EXPECT_THAT(error("[compute]\nmps_control = \"\""), HasSubstr("compute.mps_control"));
}

}  // namespace
}  // namespace missile::daemon
