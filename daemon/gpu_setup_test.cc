#include "gpu_setup.h"

#include <string>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

constexpr uint64_t kG = uint64_t{2} << 20;
constexpr uint64_t kGpuBytes = uint64_t{100} << 30;

DeviceInfo H200Like() {
  DeviceInfo d;
  d.uuid = "GPU-01234567-89ab-cdef-0123-456789abcdef";
  d.total_bytes = kGpuBytes;
  d.granularity = kG;
  return d;
}

colorer::GpuColourProfile TwoColourProfile() {
  colorer::GpuColourProfile p;
  p.colours = 2;
  p.channel_map.kind = colorer::ChannelMapSpec::Kind::kXor;
  p.channel_map.masks = {kG};
  return p;
}

TEST(GpuSetupTest, ProfilePathIsTheUuidInTheProfileDir) {
  GpuSection gpu;
  gpu.profile_dir = "/var/lib/missile/profiles";
  EXPECT_EQ(ProfilePath(gpu, "GPU-1"), "/var/lib/missile/profiles/GPU-1.toml");
}

TEST(GpuSetupTest, NoProfileMeansOneColour) {
  auto c = ChooseColourScheme(colorer::DefaultProfile(), "/p/GPU-1.toml", /*phys_visible=*/true);
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_FALSE(c->scheme.has_value());
  EXPECT_EQ(c->note,
            "no colour profile for this GPU (/p/GPU-1.toml): assuming one colour, no channel "
            "isolation");
}

TEST(GpuSetupTest, AOneColourProfileSaysSo) {
  colorer::GpuColourProfile p;  // calibrated: one colour at 2 MiB
  auto c = ChooseColourScheme(p, "/p/x.toml", true);
  ASSERT_TRUE(c.ok());
  EXPECT_FALSE(c->scheme.has_value());
  EXPECT_EQ(c->note, "one colour: calibration found no channel isolation at 2 MiB on this GPU");
}

TEST(GpuSetupTest, ColoursNeedVisiblePhysicalAddresses) {
  auto hidden = ChooseColourScheme(TwoColourProfile(), "/p/x.toml", /*phys_visible=*/false);
  ASSERT_TRUE(hidden.ok());
  EXPECT_FALSE(hidden->scheme.has_value());
  EXPECT_EQ(hidden->note,
            "profile reports 2 colours, but block physical addresses are not visible to user "
            "space on this driver: placing with one colour");

  auto visible = ChooseColourScheme(TwoColourProfile(), "/p/x.toml", /*phys_visible=*/true);
  ASSERT_TRUE(visible.ok()) << visible.status();
  ASSERT_TRUE(visible->scheme.has_value());
  EXPECT_EQ(visible->scheme->colour_count(), 2);
  EXPECT_NE(visible->note.find("2 colours from the profile"), std::string::npos);
}

TEST(GpuSetupTest, AChannelMapExplainsTheColourCount) {
  GpuSection gpu;
  gpu.profile_dir = "/var/lib/missile/profiles";
  EXPECT_EQ(ChannelMapPathFor(gpu, "GPU-1"), "/var/lib/missile/profiles/GPU-1.channels.toml");
  const std::string note =
      "one colour: calibration found no channel isolation at 2 MiB on this GPU";
  // No map file: the note stays as it is.
  EXPECT_EQ(AddChannelMapReason(note, absl::NotFoundError("no channel map"), kG), note);

  colorer::ChannelMapFile map;
  map.uuid = H200Like().uuid;
  map.source = "dram";
  map.fit.low_bit = 8;
  map.fit.high_bit = 21;
  map.fit.masks = colorer::Gf2Basis({0x1A500, 0x0C900}).rows();
  map.fit.confidence = 0.97;
  map.verification_accuracy = 0.99;
  const std::string explained = AddChannelMapReason(note, map, kG);
  EXPECT_EQ(explained.rfind(note, 0), 0u) << explained;
  EXPECT_NE(explained.find("2 MiB chunks: 1 colour; all 4 channel groups"), std::string::npos)
      << explained;

  // A broken file is named, and changes nothing else.
  const std::string broken =
      AddChannelMapReason(note, absl::InvalidArgumentError("x.channels.toml: bad masks"), kG);
  EXPECT_EQ(broken, note + "; channel map not used: x.channels.toml: bad masks");
}

TEST(GpuSetupTest, OneColourSchemeHasOneColour) {
  auto s = OneColourScheme();
  ASSERT_TRUE(s.ok());
  EXPECT_EQ(s->colour_count(), 1);
}

TEST(GpuSetupTest, LsColoursFromTheConfigOrHalf) {
  GpuSection gpu;
  EXPECT_FALSE(ColourPolicyOptionsFor(1, gpu).ls_colours.has_value());
  EXPECT_FALSE(ColourPolicyOptionsFor(1, gpu).ls_fraction.has_value());
  EXPECT_EQ(ColourPolicyOptionsFor(4, gpu).ls_fraction, 0.5);
  gpu.ls_colours = 3;
  EXPECT_EQ(ColourPolicyOptionsFor(4, gpu).ls_colours, 3);
  EXPECT_FALSE(ColourPolicyOptionsFor(4, gpu).ls_fraction.has_value());
  EXPECT_FALSE(ColourPolicyOptionsFor(1, gpu).ls_colours.has_value());
}

TEST(GpuSetupTest, PoolOptionsRoundToTheGranularity) {
  GpuSection gpu;
  gpu.pool_limit = SizeOrFraction::Bytes(10 * kG + 12345);
  gpu.cache_limit = kG;
  gpu.prealloc = SizeOrFraction::Bytes(3 * kG + 1);
  gpu.scrub_on_release = false;
  PoolOptions o = PoolOptionsFor(gpu, H200Like());
  EXPECT_EQ(o.granularity, kG);
  EXPECT_EQ(o.capacity_bytes, 10 * kG);
  // The cache keeps at least the preallocated blocks.
  EXPECT_EQ(o.cache_limit_bytes, 3 * kG);
  EXPECT_FALSE(o.scrub_on_release);
  EXPECT_EQ(PreallocBytesFor(gpu, H200Like()), 3 * kG);

  gpu.cache_limit = 8 * kG;
  EXPECT_EQ(PoolOptionsFor(gpu, H200Like()).cache_limit_bytes, 8 * kG);
  gpu.pool_limit = SizeOrFraction::Fraction(0.5);
  EXPECT_EQ(PoolOptionsFor(gpu, H200Like()).capacity_bytes, kGpuBytes / 2);
}

TEST(GpuSetupTest, ClassQuotasIndexedByClass) {
  ClassesSection classes;
  classes.ls.tenant_quota = SizeOrFraction::Bytes(4 * kG);
  classes.ls.class_quota = SizeOrFraction::Bytes(8 * kG);
  classes.be.tenant_quota = SizeOrFraction::Fraction(0.25);
  classes.be.class_quota = SizeOrFraction::Fraction(0.5);
  auto q = ClassQuotasFor(classes, 64 * kG);
  EXPECT_EQ(q[ClassIndex(colorer::TenantClass::kLatencySensitive)].tenant_quota_bytes, 4 * kG);
  EXPECT_EQ(q[ClassIndex(colorer::TenantClass::kLatencySensitive)].class_quota_bytes, 8 * kG);
  EXPECT_EQ(q[ClassIndex(colorer::TenantClass::kBestEffort)].tenant_quota_bytes, 16 * kG);
  EXPECT_EQ(q[ClassIndex(colorer::TenantClass::kBestEffort)].class_quota_bytes, 32 * kG);
}

TEST(GpuSetupTest, ArbiterOptionsFromPcie) {
  PcieSection pcie;
  pcie.chunk = 4 * kG;
  pcie.be_chunk = kG;  // below chunk: counts as chunk
  pcie.max_inflight_chunks = 3;
  pcie.max_inflight_per_tenant = 2;
  pcie.bypass_below = 65536;
  pcie.ls_first = false;
  pcie.spin_us = 7;
  pcie.ls_spin_us = 11;
  pcie.ls_quiet_ms = 13;
  pcie.be_min_share_percent = 20;
  CopyArbiter::Options o = ArbiterOptionsFor(pcie);
  EXPECT_DOUBLE_EQ(o.scheduler.be_min_share, 0.2);
  EXPECT_EQ(o.scheduler.chunk_bytes, 4 * kG);
  EXPECT_EQ(o.scheduler.be_chunk_bytes, 4 * kG);
  EXPECT_EQ(o.scheduler.max_inflight_chunks_total, 3u);
  EXPECT_EQ(o.scheduler.max_inflight_chunks_per_tenant, 2u);
  EXPECT_EQ(o.scheduler.min_bypass_bytes, 65536u);
  EXPECT_FALSE(o.scheduler.ls_first);
  EXPECT_EQ(o.spin_ns, 7000u);
  EXPECT_EQ(o.ls_spin_ns, 11000u);
  EXPECT_EQ(o.ls_quiet_ns, 13000000u);
  pcie.be_chunk = 0;  // 0: the LS chunk
  EXPECT_EQ(ArbiterOptionsFor(pcie).scheduler.be_chunk_bytes, 0u);
  pcie.be_chunk = 8 * kG;
  EXPECT_EQ(ArbiterOptionsFor(pcie).scheduler.be_chunk_bytes, 8 * kG);
  // The rest chunk: 64 MiB by default, never below the BE chunk, 0 (off) kept.
  EXPECT_EQ(ArbiterOptionsFor(pcie).scheduler.be_rest_chunk_bytes, 32 * kG);
  pcie.be_rest_chunk = 2 * kG;
  EXPECT_EQ(ArbiterOptionsFor(pcie).scheduler.be_rest_chunk_bytes, 8 * kG);
  pcie.be_rest_chunk = 0;
  EXPECT_EQ(ArbiterOptionsFor(pcie).scheduler.be_rest_chunk_bytes, 0u);
  EXPECT_EQ(ArbiterOptionsFor(pcie).ls_resting, nullptr) << "wired by OpenGpu";
}

TEST(GpuSetupTest, PacingSettingsInNanoseconds) {
  ComputeSection c;
  c.pacing = false;
  c.window_items = 5;
  c.window_us = 2;
  c.ls_idle_us = 3;
  c.ls_stale_ms = 4;
  c.max_hold_ms = 6;
  c.unknown_us = 7;
  c.share_slack_us = 8;
  c.refill_us = 9;
  PacingSettings s = PacingSettingsOf(c);
  EXPECT_FALSE(s.pacing);
  EXPECT_EQ(s.window_items, 5u);
  EXPECT_EQ(s.window_ns, 2000u);
  EXPECT_EQ(s.ls_idle_ns, 3000u);
  EXPECT_EQ(s.ls_stale_ns, 4000000u);
  EXPECT_EQ(s.max_hold_ns, 6000000u);
  EXPECT_EQ(s.unknown_ns, 7000u);
  EXPECT_EQ(s.share_slack_ns, 8000u);
  EXPECT_EQ(s.refill_ns, 9000u);
}

}  // namespace
}  // namespace missile::daemon
