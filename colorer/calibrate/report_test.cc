#include "report.h"

#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <limits>
#include <memory>

#include "absl/strings/str_cat.h"
#include "gtest/gtest.h"
#include "missile/colorer/channel_map.h"
#include "missile/colorer/colour_scheme.h"

namespace missile::calibrate {
namespace {

constexpr uint64_t kChunk = uint64_t{2} << 20;

TEST(FormatUuid, LikeNvidiaSmi) {
  const std::array<uint8_t, 16> b = {0x4e, 0x04, 0xfc, 0x3b, 0x9f, 0xb0, 0xc1, 0xd2,
                                     0xe3, 0xf4, 0x05, 0x16, 0x27, 0x38, 0x49, 0x5a};
  EXPECT_EQ(FormatUuid(b), "GPU-4e04fc3b-9fb0-c1d2-e3f4-05162738495a");
}

TEST(DriverVersion, FromProcAndCudaVersion) {
  const char proc[] =
      "NVRM version: NVIDIA UNIX x86_64 Kernel Module  580.159.04  Thu Oct 30 2025\n"
      "GCC version:  gcc version 12.2.0\n";
  EXPECT_EQ(KernelModuleVersion(proc), "580.159.04");
  EXPECT_EQ(KernelModuleVersion("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  "
                                "575.57.08  Release Build"),
            "575.57.08");
  EXPECT_EQ(KernelModuleVersion(""), "");
  EXPECT_EQ(KernelModuleVersion("garbage\n"), "");
  EXPECT_EQ(FormatDriverVersion(13000, "580.159.04"), "580.159.04 (CUDA 13.0)");
  EXPECT_EQ(FormatDriverVersion(12080, ""), "CUDA 12.8");
}

TEST(IsoDateUtc, Format) {
  EXPECT_EQ(IsoDateUtc(0), "1970-01-01T00:00:00Z");
  EXPECT_EQ(IsoDateUtc(1796126400), "2026-12-01T12:00:00Z");
}

TEST(ProfilePath, JoinsOnce) {
  EXPECT_EQ(ProfilePath("/var/lib/missile/profiles", "GPU-x"),
            "/var/lib/missile/profiles/GPU-x.toml");
  EXPECT_EQ(ProfilePath("/tmp/p//", "GPU-x"), "/tmp/p/GPU-x.toml");
  EXPECT_EQ(ProfilePath("/", "GPU-x"), "/GPU-x.toml");
}

TEST(MapForColours, GivesExactlyThatManyColours) {
  for (int colours : {1, 2, 3, 7, 64}) {
    absl::StatusOr<colorer::ChannelMapSpec> spec = MapForColours(colours, kChunk);
    ASSERT_TRUE(spec.ok()) << spec.status();
    absl::StatusOr<std::unique_ptr<colorer::ChannelMap>> map = colorer::MakeChannelMap(*spec);
    ASSERT_TRUE(map.ok()) << map.status();
    absl::StatusOr<int> n = colorer::DistinguishableColours(**map, kChunk);
    ASSERT_TRUE(n.ok()) << n.status();
    EXPECT_EQ(*n, colours);
  }
  EXPECT_EQ(MapForColours(1, kChunk)->kind, colorer::ChannelMapSpec::Kind::kUniform);
  EXPECT_EQ(MapForColours(1, kChunk)->channels, 1);
  EXPECT_FALSE(MapForColours(0, kChunk).ok());
  EXPECT_FALSE(MapForColours(65, kChunk).ok());
  EXPECT_FALSE(MapForColours(2, 3 << 20).ok());
}

TEST(Evidence, KeepsFiniteNamedEntries) {
  Evidence e;
  EXPECT_TRUE(e.Add("bw_all", 4370.5, "GB/s"));
  EXPECT_FALSE(e.Add("nan", std::numeric_limits<double>::quiet_NaN(), "x"));
  EXPECT_FALSE(e.Add("inf", std::numeric_limits<double>::infinity(), "x"));
  EXPECT_FALSE(e.Add("", 1, "x"));
  ASSERT_EQ(e.entries().size(), 1u);
  EXPECT_DOUBLE_EQ(e.Find("bw_all"), 4370.5);
  EXPECT_TRUE(std::isnan(e.Find("missing")));
}

GpuIdentity H200() {
  return {"NVIDIA H200", "GPU-4e04fc3b-0000-1111-2222-333344445555", "580.159.04 (CUDA 13.0)",
          kChunk};
}

Verdict VerdictOf(int colours) {
  Verdict v;
  v.colours = colours;
  v.reason = "test";
  return v;
}

TEST(BuildProfile, SaveLoadRoundTrip) {
  Evidence e;
  e.Add("bw_all", 4370, "GB/s");
  e.Add("split_even_odd_slowdown", 0.497, "fraction");
  e.Add("latency_constant_block", 256, "bytes");
  for (int colours : {1, 4}) {
    absl::StatusOr<colorer::GpuColourProfile> p = BuildProfile(
        H200(), VerdictOf(colours), e, "2026-11-29T12:00:00Z", "missile-calibrate 0.1.0");
    ASSERT_TRUE(p.ok()) << p.status();
    EXPECT_EQ(p->colours, colours);
    EXPECT_FALSE(p->is_default);
    EXPECT_EQ(p->evidence, e.entries());
    const std::string path =
        absl::StrCat(::testing::TempDir(), "/calibrate_report_", ::getpid(), "_", colours, ".toml");
    ASSERT_TRUE(colorer::SaveProfile(*p, path).ok());
    absl::StatusOr<colorer::GpuColourProfile> loaded = colorer::LoadProfile(path);
    ASSERT_TRUE(loaded.ok()) << loaded.status();
    EXPECT_EQ(*loaded, *p);
    absl::StatusOr<colorer::ColourScheme> scheme = colorer::SchemeFromProfile(*loaded);
    ASSERT_TRUE(scheme.ok()) << scheme.status();
    EXPECT_EQ(scheme->colour_count(), colours);
    std::remove(path.c_str());
  }
}

TEST(BuildProfile, RejectsWhatTheDaemonWouldReject) {
  GpuIdentity odd = H200();
  odd.granularity_bytes = 3 << 20;
  EXPECT_FALSE(BuildProfile(odd, VerdictOf(1), Evidence(), "d", "t").ok());
  EXPECT_FALSE(BuildProfile(H200(), VerdictOf(0), Evidence(), "d", "t").ok());
}

TEST(Printing, TableAndJson) {
  Evidence e;
  e.Add("bw_all", 4370, "GB/s");
  e.Add("weird \"name\"", 1, "x\n");
  absl::StatusOr<colorer::GpuColourProfile> p =
      BuildProfile(H200(), VerdictOf(1), e, "2026-11-29T12:00:00Z", "missile-calibrate 0.1.0");
  ASSERT_TRUE(p.ok());
  Verdict v = VerdictOf(1);
  v.reason = "1 colour: because";
  const std::string table = FormatTable(*p, v);
  EXPECT_NE(table.find("bw_all"), std::string::npos);
  EXPECT_NE(table.find("4370.0000"), std::string::npos);
  EXPECT_NE(table.find("verdict: 1 colour(s) at 2 MiB granularity. 1 colour: because"),
            std::string::npos);
  const std::string json = SummaryJson(*p, v, "/p/GPU-x.toml");
  EXPECT_EQ(json.front(), '{');
  EXPECT_EQ(json.back(), '}');
  EXPECT_NE(json.find("\"colours\":1"), std::string::npos);
  EXPECT_NE(json.find("\"uuid\":\"GPU-4e04fc3b-0000-1111-2222-333344445555\""), std::string::npos);
  EXPECT_NE(json.find("\"profile_path\":\"/p/GPU-x.toml\""), std::string::npos);
  EXPECT_NE(json.find("{\"name\":\"bw_all\",\"value\":4370,\"unit\":\"GB/s\"}"), std::string::npos);
  EXPECT_NE(json.find("weird \\\"name\\\""), std::string::npos);
  EXPECT_NE(json.find("\"unit\":\"x\\n\""), std::string::npos);
}

}  // namespace
}  // namespace missile::calibrate
