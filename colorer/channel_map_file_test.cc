#include "missile/colorer/channel_map_file.h"

#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "absl/strings/match.h"
#include "absl/strings/str_replace.h"
#include "gtest/gtest.h"

namespace missile::colorer {
namespace {

ChannelMapFile Example() {
  ChannelMapFile f;
  f.gpu_name = "NVIDIA H200";
  f.uuid = "GPU-f53a57c1-ba66-3d67-8dcd-7c80979db7ac";
  f.driver_version = "580.159.04 (CUDA 13.0)";
  f.tool_version = "missile-calibrate 0.1.0";
  f.date = "2026-12-01T21:40:00Z";
  f.source = "dram";
  f.method = "parity-subset bandwidth scan";
  f.fit.low_bit = 8;
  f.fit.high_bit = 21;
  f.fit.masks = Gf2Basis({0x1A500, 0x0C900, 0x12A00}).rows();
  f.fit.observations = 8191;
  f.fit.agreement = 0.999;
  f.fit.confidence = 0.875;
  f.verification_accuracy = 0.998;
  f.verification_observations = 8191;
  f.pair_accuracy = 1;
  f.pair_observations = 64;
  f.seconds = 97.5;
  return f;
}

std::string TempPath(const std::string& name) {
  return (std::filesystem::temp_directory_path() /
          (name + "." + std::to_string(::getpid()) + ".channels.toml"))
      .string();
}

TEST(ChannelMapFileTest, RoundTripsThroughAFile) {
  const ChannelMapFile f = Example();
  const std::string path = TempPath("roundtrip");
  ASSERT_TRUE(SaveChannelMapFile(f, path).ok());
  absl::StatusOr<ChannelMapFile> loaded = LoadChannelMapFile(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, f);
  std::remove(path.c_str());
  EXPECT_EQ(ChannelMapPath("/var/lib/missile/profiles", "GPU-1"),
            "/var/lib/missile/profiles/GPU-1.channels.toml");
}

TEST(ChannelMapFileTest, MissingFileIsNotFound) {
  EXPECT_EQ(LoadChannelMapFile("/nonexistent/GPU-x.channels.toml").status().code(),
            absl::StatusCode::kNotFound);
}

TEST(ChannelMapFileTest, BadValuesAreRejectedNamingTheKey) {
  absl::StatusOr<std::string> text = FormatChannelMapFile(Example());
  ASSERT_TRUE(text.ok());
  struct Case {
    std::string from, to, key;
  } cases[] = {
      {"channel_groups = 8", "channel_groups = 4", "channel_groups"},
      {"high_bit = 21", "high_bit = 15", "masks"},
      {"confidence = 0.875", "confidence = 1.5", "confidence"},
      {"source = 'dram'", "source = 3", "source"},
      {"seconds = 97.5", "seconds = -1.0", "seconds"},
      {"format_version = 1", "format_version = 2", "format_version"},
      {"pair_accuracy = 1.0", "pair_accuracy = 2.0", "pair_accuracy"},
  };
  for (const Case& c : cases) {
    ASSERT_TRUE(absl::StrContains(*text, c.from)) << c.from << " not in\n" << *text;
    const std::string bad = absl::StrReplaceAll(*text, {{c.from, c.to}});
    absl::StatusOr<ChannelMapFile> f = ParseChannelMapFile(bad);
    ASSERT_FALSE(f.ok()) << c.to;
    EXPECT_EQ(f.status().code(), absl::StatusCode::kInvalidArgument) << c.to;
    EXPECT_TRUE(absl::StrContains(f.status().message(), c.key)) << f.status();
  }
  EXPECT_FALSE(ParseChannelMapFile(*text + "extra = 1\n").ok());
  EXPECT_FALSE(ParseChannelMapFile("this is = = not toml").ok());

  ChannelMapFile unreduced = Example();
  unreduced.fit.masks = {0x1A500, 0x0C900};  // not in reduced form
  EXPECT_FALSE(ValidateChannelMapFile(unreduced).ok());
  EXPECT_FALSE(SaveChannelMapFile(unreduced, TempPath("bad")).ok());
  EXPECT_FALSE(std::filesystem::exists(TempPath("bad")));
}

TEST(ChannelMapFileTest, ExplainsColoursPerGranularity) {
  absl::StatusOr<std::string> two_mib = ExplainColours(Example(), uint64_t{2} << 20);
  ASSERT_TRUE(two_mib.ok());
  EXPECT_TRUE(absl::StrContains(*two_mib, "2 MiB chunks: 1 colour")) << *two_mib;
  EXPECT_TRUE(absl::StrContains(*two_mib, "8 groups")) << *two_mib;
  EXPECT_TRUE(absl::StrContains(*two_mib, "held-back accuracy 1.00")) << *two_mib;

  ChannelMapFile coarse = Example();
  coarse.fit.masks = Gf2Basis({0x100000, 0x80000}).rows();  // bits 19 and 20 only
  absl::StatusOr<std::string> small = ExplainColours(coarse, uint64_t{64} << 10);
  ASSERT_TRUE(small.ok());
  EXPECT_TRUE(absl::StrContains(*small, "64 KiB chunks: 4 colours")) << *small;
  EXPECT_FALSE(ExplainColours(Example(), 3000).ok());
}

}  // namespace
}  // namespace missile::colorer
