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

TEST(ConfigTest, ReportPathExpandsPid) {
  EXPECT_EQ(ExpandReportPath("/tmp/r-%p.txt", 42), "/tmp/r-42.txt");
  EXPECT_EQ(ExpandReportPath("/tmp/r.txt", 42), "/tmp/r.txt");
  EXPECT_EQ(ExpandReportPath("%p%p%", 7), "77%");
}

}  // namespace
}  // namespace missile::shim
