// DaemonCore's registration with a PodIdentityResolver (a fake here; pod_resources_test.cc
// tests the kubelet's): the resolver's answer replaces the tenant's claim; no devices, a
// resolver error or bad device IDs keep the claim, and the registration goes through.
#include <signal.h>
#include <sys/wait.h>
#include <unistd.h>

#include <memory>
#include <string>
#include <vector>

#include "core.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

class FakeResolver : public PodIdentityResolver {
 public:
  absl::StatusOr<K8sIdentity> Resolve(const std::vector<std::string>& device_ids) override {
    asked.push_back(device_ids);
    return answer;
  }
  absl::StatusOr<K8sIdentity> answer = K8sIdentity{"web-7f9c", "shop", "server"};
  std::vector<std::vector<std::string>> asked;
};

class CorePodIdentityTest : public ::testing::Test {
 protected:
  void SetUp() override {
    resolver_ = std::make_shared<FakeResolver>();
    CoreOptions options;
    options.pod_resolver = resolver_;
    core_ = std::make_unique<DaemonCore>(options, std::vector<Gpu>());
    ASSERT_TRUE(core_->Start().ok());
    for (int i = 0; i < 2; ++i) {
      pid_t pid = fork();
      if (pid == 0) {
        pause();
        _exit(0);
      }
      ASSERT_GT(pid, 0);
      pids_.push_back(pid);
    }
  }
  void TearDown() override {
    core_.reset();
    for (pid_t pid : pids_) {
      kill(pid, SIGKILL);
      waitpid(pid, nullptr, 0);
    }
  }

  K8sIdentity RegisteredAs(int child, const K8sIdentity& claimed,
                           const std::vector<std::string>& devices) {
    absl::StatusOr<SessionInfo> info = core_->Register(
        PeerCredentials{pids_[child], 1000, 1000}, "t", TenantClass::kBestEffort, 0, claimed,
        devices);
    EXPECT_TRUE(info.ok()) << info.status();
    return info.ok() ? info->k8s : K8sIdentity{};
  }

  std::shared_ptr<FakeResolver> resolver_;
  std::unique_ptr<DaemonCore> core_;
  std::vector<pid_t> pids_;
};

const K8sIdentity kClaimed{"claimed-pod", "claimed-ns", "claimed-ctr"};
const std::string kSlot = "GPU-00000000-1111-2222-3333-444444444444-ls-1";

TEST_F(CorePodIdentityTest, TheResolversAnswerReplacesTheClaim) {
  EXPECT_EQ(RegisteredAs(0, kClaimed, {kSlot}), (K8sIdentity{"web-7f9c", "shop", "server"}));
  ASSERT_EQ(resolver_->asked.size(), 1u);
  EXPECT_EQ(resolver_->asked[0], std::vector<std::string>{kSlot});
  ASSERT_EQ(core_->ListSessions().size(), 1u);
  EXPECT_EQ(core_->ListSessions()[0].k8s.pod, "web-7f9c");
  // A tenant that claimed nothing gets the kubelet's identity too.
  EXPECT_EQ(RegisteredAs(1, {}, {kSlot}).k8s_namespace, "shop");
}

TEST_F(CorePodIdentityTest, WithoutDevicesTheResolverIsNotAsked) {
  EXPECT_EQ(RegisteredAs(0, kClaimed, {}), kClaimed);
  EXPECT_TRUE(resolver_->asked.empty());
}

TEST_F(CorePodIdentityTest, AResolverErrorKeepsTheClaimAndRegisters) {
  resolver_->answer = absl::DeadlineExceededError("kubelet too slow");
  EXPECT_EQ(RegisteredAs(0, kClaimed, {kSlot}), kClaimed);
  resolver_->answer = absl::NotFoundError("no container holds them");
  EXPECT_EQ(RegisteredAs(1, kClaimed, {kSlot}), kClaimed);
  EXPECT_EQ(core_->ListSessions().size(), 2u);
}

TEST_F(CorePodIdentityTest, DeviceIdsOutOfBoundsAreNotLookedUp) {
  EXPECT_EQ(RegisteredAs(0, kClaimed, {"bad,id"}), kClaimed);
  EXPECT_EQ(RegisteredAs(1, kClaimed, std::vector<std::string>(65, kSlot)), kClaimed);
  EXPECT_TRUE(resolver_->asked.empty());
}

TEST(ResolveTenantIdentityTest, NotesADisagreementOrAFailure) {
  FakeResolver resolver;
  TenantIdentityOutcome agreed =
      ResolveTenantIdentity(&resolver, {"web-7f9c", "shop", "server"}, {kSlot});
  EXPECT_TRUE(agreed.note.empty()) << agreed.note;
  TenantIdentityOutcome differs = ResolveTenantIdentity(&resolver, kClaimed, {kSlot});
  EXPECT_FALSE(differs.failed);
  EXPECT_NE(differs.note.find("claimed pod claimed-ns/claimed-pod"), std::string::npos)
      << differs.note;
  EXPECT_NE(differs.note.find("kubelet says shop/web-7f9c container server"), std::string::npos)
      << differs.note;
  resolver.answer = absl::UnavailableError("connection refused");
  TenantIdentityOutcome failed = ResolveTenantIdentity(&resolver, kClaimed, {kSlot});
  EXPECT_TRUE(failed.failed);
  EXPECT_EQ(failed.identity, kClaimed);
  EXPECT_NE(failed.note.find("connection refused"), std::string::npos) << failed.note;
  EXPECT_EQ(ResolveTenantIdentity(nullptr, kClaimed, {kSlot}).identity, kClaimed);
}

}  // namespace
}  // namespace missile::daemon
