#include "logger.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <memory>
#include <sstream>
#include <string>

#include "absl/container/flat_hash_set.h"
#include "gtest/gtest.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_policy.h"
#include "missile/colorer/colour_scheme.h"
#include "spdlog/sinks/ostream_sink.h"
#include "vram_pool.h"

namespace missile::daemon {
namespace {

constexpr uint64_t kG = uint64_t{2} << 20;

// Blocks whose scrub always fails: the pool logs a warning on each release.
class FailingScrubSource : public BlockSource {
 public:
  absl::StatusOr<PhysicalBlock> Create(uint64_t bytes) override {
    return PhysicalBlock{next_++, bytes, colorer::ColourSet::Single(0)};
  }
  void Destroy(const PhysicalBlock&) override {}
  absl::Status Scrub(const PhysicalBlock&) override {
    return absl::UnavailableError("fake: scrub failed");
  }

 private:
  uint64_t next_ = 1;
};

colorer::ColourPolicy OneColourPolicy() {
  auto map = colorer::UniformChannelMap::Create(1);
  EXPECT_TRUE(map.ok());
  auto scheme = colorer::ColourScheme::EvenSplit(
      std::shared_ptr<const colorer::ChannelMap>(*std::move(map)), 1);
  EXPECT_TRUE(scheme.ok());
  auto policy = colorer::ColourPolicy::Create(*scheme);
  EXPECT_TRUE(policy.ok());
  return *policy;
}

// Captures what every daemon logger writes, and puts the level back afterwards.
class LoggerTest : public ::testing::Test {
 protected:
  void SetUp() override {
    saved_level_ = GetLogLevel();
    SetLogSinkForTesting(std::make_shared<spdlog::sinks::ostream_sink_mt>(out_, true));
  }
  void TearDown() override {
    SetLogSinkForTesting(nullptr);
    SetLogLevel(saved_level_);
  }

  // Leases a block and frees it; the failing scrub makes the pool warn.
  void ReleaseOneBlock(VramPool& pool, SessionId session) {
    ASSERT_TRUE(pool.AddTenant(session, colorer::TenantClass::kBestEffort, 0).ok());
    auto leases = pool.AllocateChunks(session, 1);
    ASSERT_TRUE(leases.ok()) << leases.status();
    ASSERT_TRUE(pool.Free(session, {(*leases)[0].id}).ok());
  }

  std::ostringstream out_;
  spdlog::level::level_enum saved_level_ = spdlog::level::info;
};

TEST_F(LoggerTest, OneLoggerPerComponent) {
  EXPECT_EQ(GetLogger(kPoolLog), GetLogger(kPoolLog));
  EXPECT_NE(GetLogger(kPoolLog), GetLogger(kCopyLog));
  EXPECT_EQ(GetLogger(kCoreLog)->name(), "missiled");
  EXPECT_EQ(GetLogger(kPoolLog)->name(), "missiled.pool");
}

TEST_F(LoggerTest, LevelReachesLoggersMadeBeforeAndAfter) {
  auto before = GetLogger("made-before");
  SetLogLevel(spdlog::level::debug);
  EXPECT_EQ(before->level(), spdlog::level::debug);
  EXPECT_EQ(GetLogger("made-after")->level(), spdlog::level::debug);
  SetLogLevel(spdlog::level::err);
  EXPECT_EQ(before->level(), spdlog::level::err);
  EXPECT_EQ(GetLogger(kCopyLog)->level(), spdlog::level::err);
}

// The level set in one place decides what the pool component writes.
TEST_F(LoggerTest, LevelReachesThePoolsLogger) {
  FailingScrubSource source;
  PoolOptions options;
  options.granularity = kG;
  options.capacity_bytes = 4 * kG;
  options.cache_limit_bytes = 4 * kG;
  const QuotaPolicy quota{4 * kG, 4 * kG};
  auto pool = VramPool::Create(options, &source, OneColourPolicy(), quota, quota);
  ASSERT_TRUE(pool.ok()) << pool.status();

  SetLogLevel(spdlog::level::err);
  ReleaseOneBlock(**pool, 1);
  EXPECT_EQ(out_.str().find("scrubbing block"), std::string::npos) << out_.str();

  SetLogLevel(spdlog::level::warn);
  ReleaseOneBlock(**pool, 2);
  EXPECT_NE(out_.str().find("missiled warning: scrubbing block"), std::string::npos) << out_.str();
}

// Each line starts with its syslog priority while journal prefixes are on, and with none after.
TEST_F(LoggerTest, JournalPrefixesCarryTheSyslogPriority) {
  SetLogLevel(spdlog::level::debug);
  UseJournalPrefixes(true);
  GetLogger(kCoreLog)->warn("w");
  GetLogger(kPoolLog)->error("e");
  GetLogger("journal-test-new")->info("i");  // a logger made while prefixes are on
  GetLogger(kCoreLog)->debug("d");
  UseJournalPrefixes(false);
  GetLogger(kCoreLog)->info("plain");
  EXPECT_EQ(out_.str(),
            "<4>missiled warning: w\n<3>missiled error: e\n<6>missiled info: i\n"
            "<7>missiled debug: d\nmissiled info: plain\n");
}

TEST(JournalStreamTest, MatchesOnlyTheDescriptorsOwnDeviceAndInode) {
  char path[] = "/tmp/missile-journal-test-XXXXXX";
  int fd = mkstemp(path);
  ASSERT_GE(fd, 0);
  unlink(path);
  struct stat st{};
  ASSERT_EQ(fstat(fd, &st), 0);
  const std::string same = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino);
  const std::string other = std::to_string(st.st_dev) + ":" + std::to_string(st.st_ino + 1);
  EXPECT_TRUE(StderrIsJournal(same.c_str(), fd));
  EXPECT_FALSE(StderrIsJournal(other.c_str(), fd)) << "stderr redirected after systemd set it";
  EXPECT_FALSE(StderrIsJournal(nullptr, fd)) << "not under systemd";
  EXPECT_FALSE(StderrIsJournal("", fd));
  EXPECT_FALSE(StderrIsJournal("garbage", fd));
  EXPECT_FALSE(StderrIsJournal((same + "x").c_str(), fd));
  EXPECT_FALSE(StderrIsJournal(same.c_str(), -1)) << "a closed descriptor";
  close(fd);
}

TEST(JournalStreamTest, SyslogPriorities) {
  EXPECT_EQ(SyslogPriority(spdlog::level::trace), 7);
  EXPECT_EQ(SyslogPriority(spdlog::level::debug), 7);
  EXPECT_EQ(SyslogPriority(spdlog::level::info), 6);
  EXPECT_EQ(SyslogPriority(spdlog::level::warn), 4);
  EXPECT_EQ(SyslogPriority(spdlog::level::err), 3);
  EXPECT_EQ(SyslogPriority(spdlog::level::critical), 2);
}

TEST(ParseLogLevelTest, NamesAndRejects) {
  EXPECT_EQ(*ParseLogLevel("trace"), spdlog::level::trace);
  EXPECT_EQ(*ParseLogLevel("warn"), spdlog::level::warn);
  EXPECT_EQ(*ParseLogLevel("off"), spdlog::level::off);
  EXPECT_EQ(ParseLogLevel("loud").status().code(), absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace missile::daemon
