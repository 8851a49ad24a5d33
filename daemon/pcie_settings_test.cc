// Every line of pcie_settings.inc reaches each place generated from it, and the places written
// by hand (the example configuration, the operations guide) list it with its default and range.
#include "missile/common/pcie_settings.h"

#include <algorithm>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "daemon/config.h"
#include "gmock/gmock.h"
#include "gpu_setup.h"
#include "gtest/gtest.h"
#include "missile/common/quote.h"
#include "reload.h"

namespace missile::daemon {
namespace {

using settings::kPcieSettings;
using settings::Setting;
using settings::Unit;
using ::testing::Contains;
using ::testing::HasSubstr;
using ::testing::IsEmpty;
using ::testing::Not;

std::string Error(const std::string& text) {
  absl::StatusOr<DaemonConfig> c = ParseConfig(text);
  return c.ok() ? std::string("accepted") : std::string(c.status().message());
}

// `v` as the file writes it: true or false, a quoted size, a number.
std::string AsToml(const Setting& s, int64_t v) {
  if (s.unit == Unit::kBool) return v ? "true" : "false";
  if (s.unit == Unit::kBytes) return QuoteString(FormatSizeExact(static_cast<uint64_t>(v)));
  return absl::StrCat(v);
}

// The other keys that the rules between keys (config_checks.cc) need beside any value of `s`.
std::string Beside(const Setting& s) {
  const std::string key = s.key;
  if (key == "bypass_below") return "\nchunk = \"64MiB\"\nbe_chunk = \"64MiB\"";
  if (key == "max_inflight_per_tenant") return "\nmax_inflight_chunks = 64";
  if (key == "max_inflight_chunks") return "\nmax_inflight_per_tenant = 1";
  return "";
}

std::string Toml(const Setting& s, int64_t v) {
  return absl::StrCat("[pcie]\n", s.key, " = ", AsToml(s, v), Beside(s));
}

// The range as the guide and the example file write it, joined by `to`: "64KiB to 64MiB".
std::string Range(const Setting& s, const char* to) {
  if (s.unit == Unit::kBool) return "";
  if (s.unit == Unit::kBytes) {
    return absl::StrCat(FormatSizeExact(static_cast<uint64_t>(s.min)), to,
                        FormatSizeExact(static_cast<uint64_t>(s.max)));
  }
  return absl::StrCat(s.min, to, s.max);
}

// The value of `s` as DescribeConfig prints it, note and all.
std::string Described(const DaemonConfig& c, const Setting& s) {
  const std::string text = DescribeConfig(c);
  const std::string prefix = absl::StrCat("\n", s.section, ".", s.key, " = ");
  const size_t at = text.find(prefix);
  if (at == std::string::npos) return "missing";
  const size_t begin = at + prefix.size();
  return text.substr(begin, text.find('\n', begin) - begin);
}

std::string ReadFile(const char* path) {
  std::ifstream in(path);
  EXPECT_TRUE(in.good()) << path;
  return std::string((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
}

TEST(PcieSettingsTest, TheTableIsWellFormed) {
  for (const Setting& s : kPcieSettings) {
    SCOPED_TRACE(s.key);
    EXPECT_EQ(std::string(s.section), "pcie");
    EXPECT_LE(s.min, s.default_value);
    EXPECT_LE(s.default_value, s.max);
    EXPECT_GE(s.multiple, 1);
    EXPECT_EQ(s.min % s.multiple, 0);
    EXPECT_EQ(s.max % s.multiple, 0);
    EXPECT_EQ(s.default_value % s.multiple, 0);
    if (s.unit != Unit::kBytes) {
      EXPECT_EQ(s.multiple, 1);  // only sizes check it
    }
    if (s.zero != nullptr) {
      EXPECT_GT(s.min, 0);  // else 0 is in range anyway
    }
    EXPECT_EQ(s.flag, nullptr);
    EXPECT_THAT(std::string(s.help), Not(IsEmpty()));
  }
}

TEST(PcieSettingsTest, EveryEntryParsesAtItsBoundsAndDescribesItself) {
  for (const Setting& s : kPcieSettings) {
    SCOPED_TRACE(s.key);
    for (int64_t v : {s.min, s.max}) {
      absl::StatusOr<DaemonConfig> c = ParseConfig(Toml(s, v));
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(Described(*c, s), AsToml(s, v));
    }
    EXPECT_EQ(Described(DaemonConfig{}, s), AsToml(s, s.default_value));
    if (s.zero != nullptr) {
      absl::StatusOr<DaemonConfig> c = ParseConfig(Toml(s, 0));
      ASSERT_TRUE(c.ok()) << c.status();
      EXPECT_EQ(Described(*c, s), absl::StrCat(AsToml(s, 0), "  # ", s.zero));
    }
  }
}

TEST(PcieSettingsTest, OutOfRangeIsRefusedNamingTheKey) {
  for (const Setting& s : kPcieSettings) {
    SCOPED_TRACE(s.key);
    const std::string name = absl::StrCat("pcie.", s.key, ": must be ");
    if (s.unit == Unit::kBool) {
      EXPECT_THAT(Error(absl::StrCat("[pcie]\n", s.key, " = 2")), HasSubstr(name));
      continue;
    }
    const std::string in = absl::StrCat(" in [", Range(s, ", "), "]");
    EXPECT_THAT(Error(Toml(s, s.max + s.multiple)), HasSubstr(name + "a"));
    EXPECT_THAT(Error(Toml(s, s.max + s.multiple)), HasSubstr(in));
    if (s.min > 0) {
      EXPECT_THAT(Error(Toml(s, s.min - s.multiple)), HasSubstr(in));
    } else if (s.unit != Unit::kBytes) {
      EXPECT_THAT(Error(Toml(s, -1)), HasSubstr(in));
    }
    if (s.multiple > 1) {
      EXPECT_THAT(Error(Toml(s, s.default_value + s.multiple / 2)),
                  HasSubstr(absl::StrCat(name, "a multiple of ",
                                         FormatSizeExact(static_cast<uint64_t>(s.multiple)))));
    }
  }
}

// None is live: each GPU's copy arbiter is made at start, so a reload names a change as taking
// effect at the next start.
TEST(PcieSettingsTest, AReloadLeavesEveryEntryToTheNextStart) {
  for (const Setting& s : kPcieSettings) {
    SCOPED_TRACE(s.key);
    EXPECT_FALSE(s.live);
    const int64_t other = s.default_value == s.max ? s.min : s.max;
    absl::StatusOr<DaemonConfig> next = ParseConfig(Toml(s, other));
    ASSERT_TRUE(next.ok()) << next.status();
    const ReloadPlan plan = PlanReload(DaemonConfig{}, *next);
    EXPECT_THAT(plan.restart_keys, Contains(absl::StrCat("pcie.", s.key)));
    EXPECT_THAT(plan.live_keys, IsEmpty());
  }
}

// Each entry's default reaches the copy arbiter as the scheduler's and the arbiter's own.
TEST(PcieSettingsTest, DefaultsReachTheArbiter) {
  const CopyArbiter::Options o = ArbiterOptionsFor(PcieSection{});
  EXPECT_EQ(o.scheduler.chunk_bytes, 2 * kMiB);
  EXPECT_EQ(o.scheduler.be_chunk_bytes, 16 * kMiB);
  EXPECT_EQ(o.scheduler.max_inflight_chunks_total, 2u);
  EXPECT_EQ(o.scheduler.max_inflight_chunks_per_tenant, 2u);
  EXPECT_EQ(o.scheduler.min_bypass_bytes, 64 * kKiB);
  EXPECT_TRUE(o.scheduler.ls_first);
  EXPECT_DOUBLE_EQ(o.scheduler.be_min_share, 0.05);
  EXPECT_EQ(o.spin_ns, 200'000u);
  EXPECT_EQ(o.ls_spin_ns, 20'000'000u);
  EXPECT_EQ(o.ls_quiet_ns, 1'000'000'000u);
}

// deploy/missiled.toml sets each key of [pcie] to its default, after a comment that gives its
// range as "min..max".
TEST(PcieSettingsTest, ExampleConfigListsEveryEntry) {
  const std::string file = ReadFile(MISSILE_EXAMPLE_CONFIG);
  const size_t begin = file.find("\n[pcie]\n");
  ASSERT_NE(begin, std::string::npos);
  const std::string section = file.substr(begin, file.find("\n[", begin + 1) - begin);
  std::vector<std::string> lines = absl::StrSplit(section, '\n');
  for (const Setting& s : kPcieSettings) {
    SCOPED_TRACE(s.key);
    const std::string line = absl::StrCat(s.key, " = ", AsToml(s, s.default_value));
    auto at = std::find(lines.begin(), lines.end(), line);
    ASSERT_NE(at, lines.end()) << line;
    std::string above;  // the comment lines just above the key
    for (auto it = at; it != lines.begin() && !(it - 1)->empty() && (it - 1)->front() == '#'; --it) {
      above = *(it - 1) + "\n" + above;
    }
    EXPECT_THAT(above, Not(IsEmpty()));
    EXPECT_THAT(above, HasSubstr(Range(s, "..")));
  }
  absl::StatusOr<DaemonConfig> c = ParseConfig(file);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->pcie, PcieSection{});
}

// docs/operations.md's configuration table has a row for each key with its default and range.
TEST(PcieSettingsTest, OperationsGuideListsEveryEntry) {
  const std::string doc = ReadFile(MISSILE_OPERATIONS_DOC);
  for (const Setting& s : kPcieSettings) {
    SCOPED_TRACE(s.key);
    const std::string key = absl::StrCat("`pcie.", s.key, "`");
    const size_t row = doc.find(absl::StrCat("| ", key, " | `", AsToml(s, s.default_value), "` |"));
    ASSERT_NE(row, std::string::npos);
    const std::string text = doc.substr(row, doc.find('\n', row) - row);
    if (s.unit != Unit::kBool) {
      EXPECT_THAT(text, HasSubstr(Range(s, " to ")));
    }
  }
}

}  // namespace
}  // namespace missile::daemon
