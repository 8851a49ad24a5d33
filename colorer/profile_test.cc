#include "missile/colorer/profile.h"

#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"

namespace missile::colorer {
namespace {

constexpr uint64_t kChunk = uint64_t{2} << 20;

// A unique path under the test temp dir; removed at destruction.
class TempPath {
 public:
  explicit TempPath(const std::string& name)
      : path_(absl::StrCat(::testing::TempDir(), "/missile_profile_", ::getpid(), "_", name)) {
    std::remove(path_.c_str());
  }
  ~TempPath() {
    std::remove(path_.c_str());
    std::remove((path_ + ".tmp").c_str());
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
};

GpuColourProfile XorProfile() {
  GpuColourProfile p;
  p.gpu_name = "Test GPU \"quoted\"";
  p.uuid = "GPU-12345678-aaaa-bbbb-cccc-0123456789ab";
  p.driver_version = "580.65.06";
  p.tool_version = "missile-calibrate 0.1.0";
  p.date = "2025-06-01T12:00:00Z";
  p.granularity_bytes = kChunk;
  p.channel_map.kind = ChannelMapSpec::Kind::kXor;
  p.channel_map.masks = {kChunk | 0x100 | (uint64_t{1} << 40), 2 * kChunk};
  p.colours = 2;  // channel bit 0 varies inside a chunk (address bit 8)
  p.evidence = {{"stream_bw_all_chunks", 4.37, "TB/s"},
                {"reader_alone", 639, "GB/s"},
                {"tiny", 1e-9, ""},
                {"ratio", 0.1, "1"}};
  return p;
}

// A valid profile's text, to break one line at a time.
constexpr char kGood[] = R"(format_version = 1
gpu_name = "NVIDIA H200"
uuid = "GPU-x"
driver_version = "580"
tool_version = "t"
date = "2025-06-01"
granularity_bytes = 2097152
colours = 1

[channel_map]
kind = "uniform"
channels = 16

[[evidence]]
name = "interference"
value = 0.5
unit = "fraction"
)";

void ExpectRejected(const std::string& text, const std::string& key) {
  auto p = ParseProfile(text);
  ASSERT_FALSE(p.ok()) << "accepted:\n" << text;
  EXPECT_EQ(p.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(p.status().message().find(key), absl::string_view::npos)
      << "message does not name '" << key << "': " << p.status();
}

std::string Replace(const std::string& from, const std::string& to) {
  const std::string text = kGood;
  EXPECT_NE(text.find(from), std::string::npos) << from;
  return absl::StrReplaceAll(text, {{from, to}});
}

TEST(ProfileTest, DefaultIsOneUniformColour) {
  const GpuColourProfile p = DefaultProfile();
  EXPECT_TRUE(p.is_default);
  EXPECT_EQ(p.colours, 1);
  EXPECT_EQ(p.channel_map.kind, ChannelMapSpec::Kind::kUniform);
  EXPECT_EQ(p.granularity_bytes, kChunk);
  EXPECT_TRUE(ValidateProfile(p).ok());
  auto scheme = SchemeFromProfile(p);
  ASSERT_TRUE(scheme.ok());
  EXPECT_EQ(scheme->colour_count(), 1);
}

TEST(ProfileTest, GoodTextParses) {
  auto p = ParseProfile(kGood);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_FALSE(p->is_default);
  EXPECT_EQ(p->gpu_name, "NVIDIA H200");
  EXPECT_EQ(p->channel_map.channels, 16);
  ASSERT_EQ(p->evidence.size(), 1u);
  EXPECT_EQ(p->evidence[0], (EvidenceEntry{"interference", 0.5, "fraction"}));
  // Evidence is optional; an integer value is taken as a number.
  const std::string text = kGood;
  auto bare = ParseProfile(text.substr(0, text.find("[[evidence]]")));
  ASSERT_TRUE(bare.ok()) << bare.status();
  EXPECT_TRUE(bare->evidence.empty());
  auto integer = ParseProfile(Replace("value = 0.5", "value = 3"));
  ASSERT_TRUE(integer.ok()) << integer.status();
  EXPECT_EQ(integer->evidence[0].value, 3.0);
}

TEST(ProfileTest, SaveLoadRoundTrip) {
  std::vector<GpuColourProfile> profiles = {XorProfile(), DefaultProfile()};
  profiles[1].is_default = false;  // not saved: a loaded profile is never the default
  GpuColourProfile table = XorProfile();
  table.channel_map = {};
  table.channel_map.kind = ChannelMapSpec::Kind::kLookupTable;
  table.channel_map.granule_shift = 21;
  table.channel_map.table = {0, 1, 2, 3, 3, 2, 1, 0};
  table.colours = 4;
  table.evidence.clear();
  profiles.push_back(table);

  for (size_t i = 0; i < profiles.size(); ++i) {
    TempPath file(absl::StrCat("roundtrip", i, ".toml"));
    ASSERT_TRUE(SaveProfile(profiles[i], file.path()).ok());
    auto loaded = LoadProfile(file.path());
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(*loaded, profiles[i]) << *FormatProfile(profiles[i]);
  }
  // The default profile saves too, and loads back as a non-default one.
  TempPath file("default.toml");
  ASSERT_TRUE(SaveProfile(DefaultProfile(), file.path()).ok());
  auto loaded = LoadProfile(file.path());
  ASSERT_TRUE(loaded.ok());
  EXPECT_FALSE(loaded->is_default);
}

TEST(ProfileTest, FormattedTextIsReadable) {
  auto text = FormatProfile(XorProfile());
  ASSERT_TRUE(text.ok());
  EXPECT_NE(text->find("kind = 'xor'"), std::string::npos) << *text;
  EXPECT_NE(text->find("0x"), std::string::npos) << *text;  // masks in hex
  EXPECT_NE(text->find("[[evidence]]"), std::string::npos) << *text;
}

TEST(ProfileTest, RejectsMissingKeys) {
  for (const char* key : {"format_version", "gpu_name", "uuid", "driver_version", "tool_version",
                          "date", "granularity_bytes", "colours"}) {
    std::string text = kGood;
    const size_t at = text.find(absl::StrCat(key, " = "));
    ASSERT_NE(at, std::string::npos);
    text.erase(at, text.find('\n', at) - at + 1);
    ExpectRejected(text, key);
  }
  ExpectRejected(Replace("[channel_map]\nkind = \"uniform\"\nchannels = 16\n", ""), "channel_map");
  ExpectRejected(Replace("channels = 16\n", ""), "channel_map.channels");
  ExpectRejected(Replace("kind = \"uniform\"\n", ""), "channel_map.kind");
  ExpectRejected(Replace("unit = \"fraction\"\n", ""), "evidence[0].unit");
  ExpectRejected(Replace("value = 0.5\n", ""), "evidence[0].value");
}

TEST(ProfileTest, RejectsUnknownKeys) {
  ExpectRejected(Replace("colours = 1\n", "colours = 1\ncolors = 1\n"), "colors");
  ExpectRejected(Replace("channels = 16\n", "channels = 16\nmasks = [256]\n"), "channel_map.masks");
  ExpectRejected(Replace("unit = \"fraction\"\n", "unit = \"fraction\"\nnote = \"x\"\n"),
                 "evidence[0].note");
}

TEST(ProfileTest, RejectsWrongTypesAndValues) {
  ExpectRejected(Replace("colours = 1", "colours = 0"), "colours");
  ExpectRejected(Replace("colours = 1", "colours = 65"), "colours");
  ExpectRejected(Replace("colours = 1", "colours = \"1\""), "colours");
  ExpectRejected(Replace("colours = 1", "colours = 1.0"), "colours");
  ExpectRejected(Replace("date = \"2025-06-01\"", "date = 2025-06-01"), "date");
  ExpectRejected(Replace("gpu_name = \"NVIDIA H200\"", "gpu_name = 7"), "gpu_name");
  ExpectRejected(Replace("granularity_bytes = 2097152", "granularity_bytes = 3000000"),
                 "granularity_bytes");
  ExpectRejected(Replace("granularity_bytes = 2097152", "granularity_bytes = -1"),
                 "granularity_bytes");
  ExpectRejected(Replace("format_version = 1", "format_version = 2"), "format_version");
  ExpectRejected(Replace("[channel_map]\nkind = \"uniform\"\nchannels = 16\n", "channel_map = 3\n"),
                 "channel_map");
  ExpectRejected(Replace("kind = \"uniform\"", "kind = \"hash\""), "channel_map.kind");
  ExpectRejected(Replace("channels = 16", "channels = 0"), "channel_map.channels");
  ExpectRejected(Replace("value = 0.5", "value = \"0.5\""), "evidence[0].value");
  ExpectRejected(Replace("name = \"interference\"", "name = \"\""), "evidence[0].name");
  ExpectRejected(Replace("[[evidence]]", "[evidence]"), "evidence");
}

TEST(ProfileTest, RejectsMapsThatDisagreeWithColours) {
  // A uniform map gives one colour at 2 MiB whatever its channel count.
  ExpectRejected(Replace("colours = 1", "colours = 2"), "colours");
  const std::string uniform_map = "kind = \"uniform\"\nchannels = 16";
  const std::string xor_map = "kind = \"xor\"\nmasks = [0x200000, 0x400000]";
  auto four = ParseProfile(
      absl::StrReplaceAll(kGood, {{"colours = 1", "colours = 4"}, {uniform_map, xor_map}}));
  ASSERT_TRUE(four.ok()) << four.status();
  EXPECT_EQ(four->channel_map.masks, (std::vector<uint64_t>{kChunk, 2 * kChunk}));
  ExpectRejected(
      absl::StrReplaceAll(kGood, {{"colours = 1", "colours = 3"}, {uniform_map, xor_map}}),
      "colours");
  // Dependent masks, negative masks, table entries out of range.
  ExpectRejected(
      Replace("kind = \"uniform\"\nchannels = 16", "kind = \"xor\"\nmasks = [0x300, 0x500, 0x600]"),
      "channel_map");
  ExpectRejected(Replace("kind = \"uniform\"\nchannels = 16", "kind = \"xor\"\nmasks = [-256]"),
                 "channel_map.masks[0]");
  ExpectRejected(Replace("kind = \"uniform\"\nchannels = 16",
                         "kind = \"table\"\ngranule_shift = 21\ntable = [0, 64]"),
                 "channel_map.table[1]");
  ExpectRejected(Replace("kind = \"uniform\"\nchannels = 16",
                         "kind = \"table\"\ngranule_shift = 21\ntable = []"),
                 "channel_map");
}

TEST(ProfileTest, SyntaxErrorsAndFiles) {
  auto bad = ParseProfile("colours = = 1\n");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(bad.status().message().find("line 1"), absl::string_view::npos) << bad.status();

  TempPath missing("missing.toml");
  EXPECT_EQ(LoadProfile(missing.path()).status().code(), absl::StatusCode::kNotFound);

  TempPath broken("broken.toml");
  {
    std::ofstream out(broken.path());
    out << Replace("colours = 1", "colours = 0");
  }
  auto loaded = LoadProfile(broken.path());
  ASSERT_FALSE(loaded.ok());
  EXPECT_NE(loaded.status().message().find(broken.path()), absl::string_view::npos);
  EXPECT_NE(loaded.status().message().find("colours"), absl::string_view::npos);

  GpuColourProfile invalid = DefaultProfile();
  invalid.colours = 2;
  TempPath not_written("invalid.toml");
  EXPECT_FALSE(SaveProfile(invalid, not_written.path()).ok());
  EXPECT_FALSE(std::ifstream(not_written.path()).good());

  GpuColourProfile top_bit = XorProfile();
  top_bit.channel_map.masks.push_back(uint64_t{1} << 63);
  top_bit.colours = 2;
  auto status = SaveProfile(top_bit, not_written.path());
  EXPECT_NE(status.message().find("channel_map.masks[2]"), absl::string_view::npos) << status;
  EXPECT_FALSE(SaveProfile(DefaultProfile(), "/nonexistent-dir/profile.toml").ok());
}

}  // namespace
}  // namespace missile::colorer
