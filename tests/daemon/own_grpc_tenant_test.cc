// Multi-process tests of missiled (see daemon_process_fixture.h). A tenant that brings its own
// gRPC and protobuf (own_grpc_probe, linked with Debian's shared libgrpc++ and libprotobuf) runs
// under libmissile.so: its own message, server and channel work, and so does the shim's session
// with the daemon (allocation served from the pool, copies through the PCIe scheduler).
#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

struct TenantSeen {
  bool listed = false;
  uint64_t used = 0;
  uint64_t h2d = 0;
  uint64_t d2h = 0;
};

TEST_F(DaemonTest, TenantWithItsOwnGrpcAndProtobufRunsUnderTheShim) {
  StartDaemon("");
  auto env = TenantEnv("ls", "owngrpc");
  const std::string report = dir_.path() + "/owngrpc.report";
  env["MISSILE_REPORT"] = report;
  Child t;
  ASSERT_TRUE(t.Start({OWN_GRPC_PROBE, dir_.path() + "/echo.sock"}, env,
                      dir_.path() + "/owngrpc.err"));
  ASSERT_EQ(t.WaitForLine("ready", 60), "ready")
      << t.out() << testing::ReadFile(dir_.path() + "/owngrpc.err");
  EXPECT_NE(t.out().find("proto ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("echo ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("cuda ok"), std::string::npos) << t.out();
  EXPECT_NE(t.out().find("echo again ok"), std::string::npos) << t.out();

  // The daemon served the tenant: its 16 MiB come from the pool, its copies were granted.
  TenantSeen seen;
  v1::ListTenantsResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
  ASSERT_TRUE(admin_->ListTenants(&ctx, v1::ListTenantsRequest(), &resp).ok());
  for (const v1::TenantInfo& info : resp.tenants()) {
    if (info.name() != "owngrpc") continue;
    seen.listed = true;
    EXPECT_EQ(info.pid(), static_cast<uint32_t>(t.pid()));
    for (const v1::Usage& u : info.usage()) seen.used += u.used_bytes();
    for (const v1::PcieUse& use : info.pcie()) {
      seen.h2d += use.h2d_bytes();
      seen.d2h += use.d2h_bytes();
    }
  }
  ASSERT_TRUE(seen.listed) << resp.DebugString();
  EXPECT_GE(seen.used, 16 * kMiB);
  EXPECT_GE(seen.h2d, 16 * kMiB);
  EXPECT_GE(seen.d2h, 16 * kMiB);
  EXPECT_EQ(Leased(), seen.used);

  t.CloseStdin();
  EXPECT_EQ(t.Wait(60), 0) << t.out() << testing::ReadFile(dir_.path() + "/owngrpc.err");
  EXPECT_NE(t.out().find("done ok"), std::string::npos) << t.out();
  const std::string text = testing::ReadFile(report);
  EXPECT_NE(text.find("# missiled: connected; "),
            std::string::npos) << text;
  EXPECT_EQ(text.find("# 0 host-device copies went through"), std::string::npos) << text;
  EXPECT_NE(text.find("host-device copies went through the PCIe scheduler"), std::string::npos)
      << text;
}

}  // namespace
}  // namespace missile::process_test
