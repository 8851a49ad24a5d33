#include "config.h"

#include <map>
#include <string>

#include "gtest/gtest.h"

namespace missile::shim {
namespace {

Config Parse(std::map<std::string, std::string> env) {
  return ParseConfig([&env](const char* name) -> const char* {
    auto it = env.find(name);
    return it == env.end() ? nullptr : it->second.c_str();
  });
}

TEST(ConfigTest, DefaultsWhenUnset) {
  Config c = Parse({});
  EXPECT_FALSE(c.disabled);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_TRUE(c.real_driver_path.empty());
  EXPECT_TRUE(c.report.empty());
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigTest, ReadsEveryVariable) {
  Config c = Parse({{"MISSILE_DISABLE", "1"},
                    {"MISSILE_LOG_LEVEL", "debug"},
                    {"MISSILE_REAL_LIBCUDA", "/opt/driver/libcuda.so.1"},
                    {"MISSILE_REPORT", "/tmp/r-%p.txt"}});
  EXPECT_TRUE(c.disabled);
  EXPECT_EQ(c.log_level, LogLevel::kDebug);
  EXPECT_EQ(c.real_driver_path, "/opt/driver/libcuda.so.1");
  EXPECT_EQ(c.report, "/tmp/r-%p.txt");
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigTest, BadValuesWarnAndKeepDefaults) {
  Config c = Parse({{"MISSILE_DISABLE", "maybe"},
                    {"MISSILE_LOG_LEVEL", "loud"},
                    {"MISSILE_REAL_LIBCUDA", "relative/libcuda.so.1"}});
  EXPECT_FALSE(c.disabled);
  EXPECT_EQ(c.log_level, LogLevel::kWarn);
  EXPECT_TRUE(c.real_driver_path.empty());
  ASSERT_EQ(c.warnings.size(), 3u);
  EXPECT_NE(c.warnings[0].find("MISSILE_DISABLE"), std::string::npos);
  EXPECT_NE(c.warnings[1].find("MISSILE_LOG_LEVEL"), std::string::npos);
  EXPECT_NE(c.warnings[2].find("MISSILE_REAL_LIBCUDA"), std::string::npos);
}

TEST(ConfigTest, DisableAcceptsExplicitNo) {
  EXPECT_FALSE(Parse({{"MISSILE_DISABLE", "0"}}).disabled);
  EXPECT_TRUE(Parse({{"MISSILE_DISABLE", "0"}}).warnings.empty());
}

TEST(ConfigTest, TenantSettings) {
  Config c = Parse({{"MISSILE_SOCKET", "/tmp/s.sock"},
                    {"MISSILE_TENANT_NAME", "web"},
                    {"MISSILE_TENANT_CLASS", "ls"},
                    {"MISSILE_QUOTA", "8GiB"},
                    {"MISSILE_BLOCKS", "chunks"},
                    {"MISSILE_LS_MARKS", "every"},
                    {"MISSILE_NO_DAEMON", "refuse"}});
  EXPECT_EQ(c.socket_path, "/tmp/s.sock");
  EXPECT_EQ(c.tenant_name, "web");
  EXPECT_TRUE(c.latency_sensitive);
  EXPECT_EQ(c.quota_bytes, uint64_t{8} << 30);
  EXPECT_EQ(c.blocks, Config::Blocks::kChunks);
  EXPECT_TRUE(c.ls_marks_every);
  EXPECT_FALSE(Parse({}).ls_marks_every);
  EXPECT_FALSE(Parse({{"MISSILE_LS_MARKS", "waits"}}).ls_marks_every);
  EXPECT_TRUE(c.refuse_without_daemon);
  EXPECT_TRUE(c.warnings.empty());
}

TEST(ConfigTest, BadTenantSettingsWarnAndKeepDefaults) {
  Config c = Parse({{"MISSILE_TENANT_CLASS", "gold"},
                    {"MISSILE_QUOTA", "lots"},
                    {"MISSILE_BLOCKS", "huge"},
                    {"MISSILE_LS_MARKS", "sometimes"},
                    {"MISSILE_NO_DAEMON", "maybe"}});
  EXPECT_FALSE(c.latency_sensitive);
  EXPECT_EQ(c.quota_bytes, 0u);
  EXPECT_EQ(c.blocks, Config::Blocks::kAuto);
  EXPECT_FALSE(c.ls_marks_every);
  EXPECT_FALSE(c.refuse_without_daemon);
  EXPECT_EQ(c.warnings.size(), 5u);
}

TEST(ConfigTest, DaemonTimeoutIsBoundedMilliseconds) {
  EXPECT_EQ(Parse({}).daemon_timeout_ms, 5000);
  EXPECT_EQ(Parse({{"MISSILE_DAEMON_TIMEOUT_MS", "250"}}).daemon_timeout_ms, 250);
  for (const char* bad : {"0", "99", "600001", "5s", "-1", "x"}) {
    Config c = Parse({{"MISSILE_DAEMON_TIMEOUT_MS", bad}});
    EXPECT_EQ(c.daemon_timeout_ms, 5000) << bad;
    EXPECT_EQ(c.warnings.size(), 1u) << bad;
  }
}

TEST(ConfigTest, KubernetesIdentity) {
  Config c = Parse({{"MISSILE_K8S_POD", "web-7d4b9c-x2x9z"},
                    {"MISSILE_K8S_NAMESPACE", "prod"},
                    {"MISSILE_K8S_CONTAINER", "server"}});
  EXPECT_EQ(c.k8s, (K8sIdentity{"web-7d4b9c-x2x9z", "prod", "server"}));
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_TRUE(Parse({}).k8s.empty());
}

TEST(ConfigTest, BadKubernetesFieldsAreDroppedWithAWarningOthersKept) {
  Config c = Parse({{"MISSILE_K8S_POD", std::string(254, 'p')},
                    {"MISSILE_K8S_NAMESPACE", "prod"},
                    {"MISSILE_K8S_CONTAINER", "srv\"} 1"}});
  EXPECT_EQ(c.k8s, (K8sIdentity{"", "prod", ""}));
  ASSERT_EQ(c.warnings.size(), 2u);
  EXPECT_EQ(c.warnings[0],
            "MISSILE_K8S_POD: pod: 254 characters, more than 253; not sent to missiled");
  EXPECT_EQ(c.warnings[1],
            "MISSILE_K8S_CONTAINER: container 'srv\\\"} 1' has a character other than letters, "
            "digits, '-', '_' and '.'; not sent to missiled");
}

TEST(ConfigTest, KubernetesDevicesAreSplitAndSent) {
  const std::string gpu = "GPU-00000000-1111-2222-3333-444444444444";
  Config c = Parse({{"MISSILE_K8S_DEVICES", gpu + "-ls-0," + gpu + "-ls-3"}});
  EXPECT_EQ(c.k8s_devices, (std::vector<std::string>{gpu + "-ls-0", gpu + "-ls-3"}));
  EXPECT_TRUE(c.warnings.empty());
  EXPECT_EQ(Parse({{"MISSILE_K8S_DEVICES", "a-1"}}).k8s_devices,
            std::vector<std::string>{"a-1"});
  EXPECT_TRUE(Parse({}).k8s_devices.empty());
}

TEST(ConfigTest, BadKubernetesDevicesAreDroppedWithAWarning) {
  std::string many;
  for (int i = 0; i < 65; ++i) many += (i ? ",d-" : "d-") + std::to_string(i);
  for (const std::string& bad :
       {std::string("a-1,b_2"), std::string("a-1,,b-2"), std::string("a-1,"),
        std::string(129, 'x'), many}) {
    Config c = Parse({{"MISSILE_K8S_DEVICES", bad}, {"MISSILE_K8S_POD", "web"}});
    EXPECT_TRUE(c.k8s_devices.empty()) << bad;
    EXPECT_EQ(c.k8s.pod, "web") << "the other fields stay";
    ASSERT_EQ(c.warnings.size(), 1u) << bad;
    EXPECT_EQ(c.warnings[0].rfind("MISSILE_K8S_DEVICES: ", 0), 0u) << c.warnings[0];
    EXPECT_NE(c.warnings[0].find("not sent to missiled"), std::string::npos) << c.warnings[0];
  }
}

TEST(ConfigTest, ReportPathExpandsPid) {
  EXPECT_EQ(ExpandReportPath("/tmp/r-%p.txt", 42), "/tmp/r-42.txt");
  EXPECT_EQ(ExpandReportPath("/tmp/r.txt", 42), "/tmp/r.txt");
  EXPECT_EQ(ExpandReportPath("%p%p%", 7), "77%");
}

}  // namespace
}  // namespace missile::shim
