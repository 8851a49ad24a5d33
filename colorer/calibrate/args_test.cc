#include "args.h"

#include "gtest/gtest.h"

namespace missile::calibrate {
namespace {

TEST(ParseArgs, Defaults) {
  absl::StatusOr<CalibrateArgs> a = ParseArgs({});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->out_dir, "/var/lib/missile/profiles");
  EXPECT_EQ(a->chunks, 4096u);
  EXPECT_EQ(a->sample, 64u);
  EXPECT_EQ(a->seed, 1u);
  EXPECT_EQ(a->device, 0);
  EXPECT_FALSE(a->quick || a->json || a->help);
}

TEST(ParseArgs, QuickChangesDefaultsButExplicitValuesWin) {
  absl::StatusOr<CalibrateArgs> a = ParseArgs({"--quick"});
  ASSERT_TRUE(a.ok());
  EXPECT_EQ(a->chunks, 1024u);
  EXPECT_EQ(a->sample, 16u);
  a = ParseArgs({"--chunks=2048", "--quick", "--sample", "32"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->chunks, 2048u);
  EXPECT_EQ(a->sample, 32u);
}

TEST(ParseArgs, ChannelMapNeedsOnlyAFewChunks) {
  absl::StatusOr<CalibrateArgs> a = ParseArgs({"--channel-map", "--quick"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->channel_map);
  EXPECT_TRUE(a->quick);
  EXPECT_EQ(a->chunks, kMinChunks);
  EXPECT_FALSE(ParseArgs({"--channel-map=yes"}).ok());
  EXPECT_FALSE(ParseArgs({})->channel_map);
}

TEST(ParseArgs, AllFlags) {
  absl::StatusOr<CalibrateArgs> a =
      ParseArgs({"--out", "/tmp/p", "--seed=42", "--device", "1", "--json", "--chunks", "100"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->out_dir, "/tmp/p");
  EXPECT_EQ(a->seed, 42u);
  EXPECT_EQ(a->device, 1);
  EXPECT_TRUE(a->json);
  EXPECT_EQ(a->chunks, 100u);
  EXPECT_TRUE(ParseArgs({"-h"})->help);
}

TEST(ParseArgs, ErrorsNameTheFlag) {
  struct Case {
    std::vector<std::string> args;
    std::string needle;
  } cases[] = {
      {{"--bogus"}, "--bogus"},
      {{"--chunks"}, "--chunks needs a value"},
      {{"--chunks=2048", "--sampel", "32"}, "did you mean '--sample'?"},
      {{"--chunks", "x"}, "not a number"},
      {{"--chunks", "8"}, "outside [16, 65536]"},
      {{"--chunks", "-5"}, "--chunks"},
      {{"--sample", "1"}, "--sample"},
      {{"--chunks", "16", "--sample", "32"}, "exceeds --chunks"},
      {{"--quick=yes"}, "takes no value"},
      {{"--out="}, "empty directory"},
      {{"--device", "99999"}, "--device"},
  };
  for (const Case& c : cases) {
    absl::StatusOr<CalibrateArgs> a = ParseArgs(c.args);
    ASSERT_FALSE(a.ok()) << c.args[0];
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(a.status().message().find(c.needle), absl::string_view::npos) << a.status();
  }
}

TEST(MakePlan, QuickIsSmaller) {
  const Plan full = MakePlan(*ParseArgs({}));
  const Plan quick = MakePlan(*ParseArgs({"--quick"}));
  EXPECT_EQ(full.chunks, 4096u);
  EXPECT_EQ(full.half_seeds.size(), 3u);
  EXPECT_LT(quick.max_oracle_calls, full.max_oracle_calls);
  EXPECT_LT(quick.target_ms, full.target_ms);
  EXPECT_LE(quick.latency_chunks, full.latency_chunks);
  EXPECT_FALSE(Usage().empty());
}

TEST(ParseArgs, Version) {
  absl::StatusOr<CalibrateArgs> a = ParseArgs({"--version"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_TRUE(a->version);
  EXPECT_FALSE(ParseArgs({"--version=1"}).ok());
}

}  // namespace
}  // namespace missile::calibrate
