// missilectl top: its options, and the frame it draws from two samples of the daemon (rates
// from the byte counters, shares and pacing figures per class).
#include "ctl_top.h"

#include <string>
#include <vector>

#include "ctl_args.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::cli {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

absl::StatusOr<CtlArgs> Parse(std::vector<std::string> args) {
  return ParseCtlArgs(args, "/default.sock");
}

TEST(CtlTopArgsTest, IntervalAndOnce) {
  absl::StatusOr<CtlArgs> a = Parse({"top"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->command, CtlCommand::kTop);
  EXPECT_EQ(a->top.interval_s, 1.0);
  EXPECT_FALSE(a->top.once);
  a = Parse({"--socket", "/s", "top", "--interval", "0.5", "--once"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->top.interval_s, 0.5);
  EXPECT_TRUE(a->top.once);
  EXPECT_EQ(a->socket, "/s");
  a = Parse({"top", "--interval=2"});
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->top.interval_s, 2.0);
}

TEST(CtlTopArgsTest, RefusesBadOptions) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"top", "--interval", "0"}, {"top", "--interval", "abc"},
        {"top", "--interval", "4000"}, {"top", "--interval"}, {"top", "extra"},
        {"top", "--once=1"}}) {
    absl::StatusOr<CtlArgs> a = Parse(args);
    EXPECT_FALSE(a.ok()) << args.back();
    EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  }
  EXPECT_THAT(Parse({"top", "--intreval", "1"}).status().message(),
              HasSubstr("did you mean '--interval'"));
  EXPECT_THAT(Parse({"top", "--interval", "0"}).status().message(),
              HasSubstr("is not seconds in [0.1, 3600]"));
}

// missiled stopping under a running view cancels the call in flight: top printed "CANCELLED:
// CANCELLED". It says the daemon went away, for a cancelled call or no daemon left to call.
TEST(TopEndedMessageTest, TheDaemonWentAway) {
  const std::string went_away =
      "missiled went away (/run/m.sock): it stopped or restarted while top ran; check "
      "'systemctl status missiled'";
  EXPECT_EQ(TopEndedMessage(grpc::Status(grpc::StatusCode::CANCELLED, "CANCELLED"), "/run/m.sock"),
            went_away);
  EXPECT_EQ(TopEndedMessage(grpc::Status(grpc::StatusCode::UNAVAILABLE,
                                         "failed to connect to all addresses; last error: "
                                         "UNKNOWN: unix:/run/m.sock: Connection refused"),
                            "/run/m.sock"),
            went_away);
  // Anything else is the daemon's own answer, as for the other commands.
  EXPECT_EQ(TopEndedMessage(grpc::Status(grpc::StatusCode::PERMISSION_DENIED, "no"), "/s"),
            "PERMISSION_DENIED: no");
}

TopSample Sample(double at_s, uint64_t h2d_bytes) {
  TopSample s;
  s.at_s = at_s;
  s.status.set_version("1.0");
  s.status.set_uptime_s(65);
  s.status.set_tenants(2);
  v1::PoolStatus* p = s.status.add_pools();
  p->mutable_gpu()->set_index(0);
  p->mutable_gpu()->set_name("Fake\nGPU");
  p->set_capacity_bytes(uint64_t{1} << 30);
  p->set_leased_bytes(uint64_t{48} << 20);
  p->set_tenants(2);
  v1::TenantInfo* web = s.tenants.add_tenants();
  web->set_session_id(7);
  web->set_pid(100);
  web->set_name("web");
  web->set_tenant_class(v1::LATENCY_SENSITIVE);
  v1::Usage* u = web->add_usage();
  u->set_used_bytes(uint64_t{16} << 20);
  u->set_quota_bytes(uint64_t{512} << 20);
  v1::PcieUse* pcie = web->add_pcie();
  pcie->set_h2d_bytes(h2d_bytes);
  pcie->set_h2d_share(0.25);
  v1::ComputeUse* c = web->add_compute();
  c->set_ls_busy_share(0.4);
  v1::TenantInfo* batch = s.tenants.add_tenants();
  batch->set_session_id(8);
  batch->set_pid(200);
  batch->set_name("batch");
  batch->set_tenant_class(v1::BEST_EFFORT);
  batch->add_usage()->set_used_bytes(uint64_t{32} << 20);
  v1::ComputeUse* bc = batch->add_compute();
  bc->set_held_ms(1500);
  bc->set_held_share(0.35);
  return s;
}

TEST(CtlTopFrameTest, FirstFrameHasNoRates) {
  std::string frame = FormatTopFrame(Sample(10, 0), nullptr, 1.0);
  EXPECT_THAT(frame, HasSubstr("missiled 1.0, up 1m05s, tenants: 2; every 1.0 s; q quits"));
  EXPECT_THAT(frame, HasSubstr("Fake?GPU"));  // control characters never reach the terminal
  EXPECT_THAT(frame, HasSubstr("48.0 MiB / 1.0 GiB"));
  EXPECT_THAT(frame, HasSubstr("16.0 MiB / 512.0 MiB"));
  EXPECT_THAT(frame, Not(HasSubstr("/s ")));
}

TEST(CtlTopFrameTest, RatesSharesAndPacingPerClass) {
  TopSample before = Sample(10, 0);
  TopSample now = Sample(12, uint64_t{8} << 20);  // 8 MiB in 2 s
  std::string frame = FormatTopFrame(now, &before, 2.0);
  std::string web_row, batch_row;
  for (size_t pos = 0, end; pos < frame.size(); pos = end + 1) {
    end = frame.find('\n', pos);
    std::string line = frame.substr(pos, end - pos);
    if (line.find(" web ") != std::string::npos) web_row = line;
    if (line.find(" batch ") != std::string::npos) batch_row = line;
  }
  EXPECT_THAT(web_row, HasSubstr("4.0 MiB/s")) << frame;
  EXPECT_THAT(web_row, HasSubstr("25%")) << frame;
  EXPECT_THAT(web_row, HasSubstr("40%")) << frame;  // LS busy
  EXPECT_THAT(batch_row, HasSubstr("1.5 s")) << frame;  // BE held
  EXPECT_THAT(batch_row, HasSubstr("35%")) << frame;
}

TEST(CtlTopFrameTest, NoTenants) {
  TopSample s = Sample(1, 0);
  s.tenants.clear_tenants();
  EXPECT_THAT(FormatTopFrame(s, nullptr, 1.0), HasSubstr("no tenants"));
}

}  // namespace
}  // namespace missile::cli
