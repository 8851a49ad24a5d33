// Multi-process tests of missiled (see daemon_process_fixture.h). The daemon's front doors: admin calls refused to a non-admin, malformed and oversized
// requests, and a bad configuration file.
#include "daemon_process_fixture.h"
#include "missile/colorer/channel_map_file.h"
#include "missile/colorer/profile.h"

namespace missile::process_test {
namespace {

// missile-calibrate --channel-map's file beside the profiles: missilectl status says why the GPU
// has the colours it has; a broken file is named there and changes nothing else.
constexpr char kFakeGpuUuid[] = "GPU-66616b65-6375-6461-2d67-707500000000";  // device 0

void WriteChannelMap(const std::string& dir) {
  colorer::ChannelMapFile map;
  map.gpu_name = "Fake GPU (missile test double)";
  map.uuid = kFakeGpuUuid;
  map.driver_version = "test double";
  map.tool_version = "test";
  map.date = "2026-12-01T00:00:00Z";
  map.source = "dram";
  map.method = "written by the test";
  map.fit.low_bit = 8;
  map.fit.high_bit = 21;
  map.fit.masks = colorer::Gf2Basis({0x1A500, 0x0C900}).rows();
  map.fit.confidence = 0.875;
  map.fit.agreement = 0.9375;
  map.verification_accuracy = 0.9375;
  mkdir(dir.c_str(), 0755);
  ASSERT_TRUE(colorer::SaveChannelMapFile(map, colorer::ChannelMapPath(dir, kFakeGpuUuid)).ok());
}

TEST_F(DaemonTest, StatusExplainsTheColoursByTheChannelMap) {
  WriteChannelMap(dir_.path() + "/profiles");
  StartDaemon();
  ProcessResult status = testing::Run({MISSILECTL, "--socket", socket_, "status"});
  EXPECT_EQ(status.exit_code, 0) << status.err;
  EXPECT_NE(status.out.find("channel map (dram, 4 groups over bits 8-20"), std::string::npos)
      << status.out;
  EXPECT_NE(status.out.find("2 MiB chunks: 1 colour; all 4 channel groups"), std::string::npos)
      << status.out;
}

TEST_F(DaemonTest, ABrokenChannelMapIsNamedAndIgnored) {
  mkdir((dir_.path() + "/profiles").c_str(), 0755);
  std::ofstream(colorer::ChannelMapPath(dir_.path() + "/profiles", kFakeGpuUuid))
      << "format_version = 1\nmasks = 3\n";
  StartDaemon();
  v1::StatusResponse st = Status();
  ASSERT_EQ(st.pools_size(), 1);
  EXPECT_NE(st.pools(0).colour_note().find("channel map not used"), std::string::npos)
      << st.pools(0).colour_note();
  EXPECT_EQ(st.pools(0).gpu().colours(), 1u);
}

TEST_F(DaemonTest, NonAdminCannotChangePolicy) {
  if (geteuid() != 0) GTEST_SKIP() << "needs root to run missilectl as another user";
  if (access("/usr/bin/setpriv", X_OK) != 0) GTEST_SKIP() << "needs setpriv (util-linux)";
  extra_daemon_ = "socket_group = \"nogroup\"\n";
  StartDaemon();
  Child t;
  ASSERT_TRUE(t.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "victim")));
  ASSERT_EQ(t.WaitForLine("ready"), "ready");
  ProcessResult denied = testing::Run(
      {"/usr/bin/setpriv", "--reuid=65534", "--regid=65534", "--clear-groups", MISSILECTL,
       "--socket", socket_, "set", "--name", "victim", "--priority", "-20"});
  EXPECT_EQ(denied.exit_code, 1) << denied.out << denied.err;
  EXPECT_NE(denied.err.find("PERMISSION_DENIED"), std::string::npos) << denied.err;
  // A non-admin may still read.
  ProcessResult read = testing::Run({"/usr/bin/setpriv", "--reuid=65534", "--regid=65534",
                                     "--clear-groups", MISSILECTL, "--socket", socket_, "tenants"});
  EXPECT_EQ(read.exit_code, 0) << read.err;
  EXPECT_NE(read.out.find("victim"), std::string::npos) << read.out;
  ProcessResult allowed = testing::Run(
      {MISSILECTL, "--socket", socket_, "set", "--name", "victim", "--priority", "-20"});
  EXPECT_EQ(allowed.exit_code, 0) << allowed.err;
  ProcessResult json = testing::Run({MISSILECTL, "--socket", socket_, "--json", "tenants"});
  EXPECT_NE(json.out.find("\"priority\":-20"), std::string::npos) << json.out;
  t.CloseStdin();
  t.Wait();
}

// long: every malformed request against one daemon and session, then one check that none of
// them changed anything.
TEST_F(DaemonTest, MalformedAndOversizedRequestsGetClearErrorsAndChangeNothing) {
  StartDaemon();
  auto call = [](auto fn) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(5));
    return fn(&ctx);
  };
  v1::RegisterRequest reg;
  v1::RegisterResponse reg_resp;
  reg.set_name("tester");
  reg.set_tenant_class(v1::BEST_EFFORT);
  for (uint32_t version : {0u, 2u}) {  // none sent, and a future major version
    reg.set_protocol_version(version);
    grpc::Status s = call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); });
    EXPECT_EQ(s.error_code(), grpc::StatusCode::FAILED_PRECONDITION) << s.error_message();
    EXPECT_NE(s.error_message().find("protocol version " + std::to_string(version) +
                                     ", missiled speaks 1"),
              std::string::npos)
        << s.error_message();
  }
  reg.set_protocol_version(1);
  const std::string long_name(5000, 'a');
  reg.set_name(long_name);
  grpc::Status too_long = call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); });
  EXPECT_EQ(too_long.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(too_long.error_message().size(), 200u) << "the name is not echoed in full";
  reg.set_name("");
  reg.set_tenant_class(v1::BEST_EFFORT);
  EXPECT_EQ(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  reg.set_name("ok-name");
  reg.set_tenant_class(v1::TENANT_CLASS_UNSPECIFIED);
  EXPECT_EQ(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  reg.set_name("bad name; rm -rf");
  reg.set_tenant_class(v1::BEST_EFFORT);
  EXPECT_EQ(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);
  reg.set_name("tester");
  ASSERT_TRUE(call([&](auto* c) { return tenant_->Register(c, reg, &reg_resp); }).ok());
  uint64_t session = reg_resp.session_id();

  auto allocate = [&](uint64_t sess, uint32_t gpu, v1::AllocateRequest::Shape shape, uint64_t bytes) {
    v1::AllocateRequest req;
    req.set_session_id(sess);
    req.set_gpu_index(gpu);
    req.set_shape(shape);
    req.set_bytes(bytes);
    v1::AllocateResponse resp;
    return call([&](auto* c) { return tenant_->Allocate(c, req, &resp); }).error_code();
  };
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 3 * kMiB), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 0), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, uint64_t{1} << 62),
            grpc::StatusCode::INVALID_ARGUMENT);  // larger than the whole pool
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 960 * kMiB),
            grpc::StatusCode::OK);  // the pool (972 MiB) holds it: this one is real
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::CHUNKS, 64 * kMiB),
            grpc::StatusCode::RESOURCE_EXHAUSTED);  // but not 64 MiB more
  EXPECT_EQ(allocate(session, 7, v1::AllocateRequest::CHUNKS, 2 * kMiB), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session, 0, v1::AllocateRequest::SHAPE_UNSPECIFIED, 2 * kMiB),
            grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_EQ(allocate(session + 1000, 0, v1::AllocateRequest::CHUNKS, 2 * kMiB),
            grpc::StatusCode::NOT_FOUND);
  v1::FreeRequest free_req;
  free_req.set_session_id(session);
  free_req.add_block_ids(123456);
  v1::FreeResponse free_resp;
  EXPECT_EQ(call([&](auto* c) { return tenant_->Free(c, free_req, &free_resp); }).error_code(),
            grpc::StatusCode::NOT_FOUND);
  free_req.clear_block_ids();
  EXPECT_EQ(call([&](auto* c) { return tenant_->Free(c, free_req, &free_resp); }).error_code(),
            grpc::StatusCode::INVALID_ARGUMENT);

  // Another process cannot use this session: a tenant's blocks belong to its process.
  Child other;
  ASSERT_TRUE(other.Start({TENANT_PROBE, "alloc:2", "hold"}, TenantEnv("be", "other")));
  ASSERT_EQ(other.WaitForLine("ready"), "ready");
  uint64_t leased = Leased();
  EXPECT_EQ(leased, 962 * kMiB);  // our 960 MiB and the other tenant's 2 MiB

  // An admin naming a tenant by a name no tenant can have is told so, without the name echoed.
  v1::SetPolicyRequest set;
  set.set_name(long_name);
  set.set_priority(0);
  v1::SetPolicyResponse set_resp;
  grpc::Status bad_target = call([&](auto* c) { return admin_->SetPolicy(c, set, &set_resp); });
  EXPECT_EQ(bad_target.error_code(), grpc::StatusCode::INVALID_ARGUMENT);
  EXPECT_LT(bad_target.error_message().size(), 200u) << bad_target.error_message().substr(0, 300);

  // Garbage on the gRPC socket and a forged side-channel hello do not hurt anyone.
  int sock = -1;
  ASSERT_TRUE(fdpass::ConnectUnix(socket_, &sock).ok());
  const char junk[] = "GET / HTTP/1.1\r\n\r\n\x00\xff\xfe garbage";
  ASSERT_GT(write(sock, junk, sizeof(junk)), 0);
  close(sock);
  ASSERT_TRUE(fdpass::ConnectUnix(socket_ + ".fd", &sock).ok());
  fdpass::Hello hello;
  hello.session_id = session;  // our own session, but the wrong token
  fdpass::Reply reply;
  ASSERT_TRUE(fdpass::SendMessage(sock, &hello, sizeof(hello)).ok());
  ASSERT_TRUE(fdpass::ReceiveMessage(sock, &reply, sizeof(reply)).ok());
  EXPECT_EQ(reply.status, static_cast<uint32_t>(absl::StatusCode::kPermissionDenied));
  close(sock);

  EXPECT_EQ(Leased(), leased);  // nothing changed
  other.CloseStdin();
  EXPECT_EQ(other.Wait(), 0);
  EXPECT_NE(other.out().find("alloc 2 ok"), std::string::npos) << other.out();
}

TEST_F(DaemonTest, BadConfigurationIsRejectedNamingTheKey) {
  std::string config = dir_.path() + "/bad.toml";
  std::ofstream(config) << "[daemon]\nsockt = \"/tmp/x\"\n";
  chmod(config.c_str(), 0644);
  auto env = FakeEnv();
  env["LD_LIBRARY_PATH"] = FAKECUDA_DIR;
  ProcessResult r = testing::Run({MISSILED, "--config", config}, env);
  EXPECT_EQ(r.exit_code, 2);
  EXPECT_NE(r.err.find("daemon.sockt"), std::string::npos) << r.err;
}

}  // namespace
}  // namespace missile::process_test
