// The pods MutatePod refuses, each with the message the pod's author sees.
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "pod_mutation.h"
#include "test_pods.h"

namespace missile::webhook {
namespace {

using test_pods::Annotated;
using test_pods::ReplicaPod;

// The message of MutatePod's refusal of `pod` ("" when it was not refused).
std::string Refusal(const Json& pod) {
  absl::StatusOr<Json> patch = MutatePod(MutationConfig(), pod, "shop");
  if (patch.ok()) return "";
  EXPECT_EQ(patch.status().code(), absl::StatusCode::kInvalidArgument);
  return std::string(patch.status().message());
}

Json WithSlots(Json pod, const std::string& resource) {
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{resource, "1"}}}};
  return pod;
}

TEST(MutatePodRefusalTest, WrongAnnotations) {
  EXPECT_EQ(Refusal(ReplicaPod("gpu")), "missile.io/class: 'gpu' is not ls or be");
  EXPECT_THAT(Refusal(Annotated(ReplicaPod(), "missile.io/quota", "8")),
              ::testing::StartsWith("missile.io/quota: '8' has no unit"));
  EXPECT_THAT(Refusal(Annotated(ReplicaPod(), "missile.io/tenant", "a b")),
              ::testing::StartsWith("missile.io/tenant: tenant name 'a b' may hold only"));
  EXPECT_THAT(Refusal(Annotated(ReplicaPod(), "missile.io/containers", "ap")),
              ::testing::StartsWith("missile.io/containers: 'ap' is not in spec.containers"));
}

TEST(MutatePodRefusalTest, SlotsOfTheOtherClass) {
  EXPECT_EQ(Refusal(WithSlots(ReplicaPod("ls"), "missile.io/be")),
            "container 'app' asks for missile.io/be slots but missile.io/class is ls");
  EXPECT_EQ(Refusal(WithSlots(ReplicaPod("be"), "missile.io/ls")),
            "container 'app' asks for missile.io/ls slots but missile.io/class is be");
  EXPECT_EQ(Refusal(WithSlots(ReplicaPod("ls"), "missile.io/ls")), "");
  Json both = WithSlots(ReplicaPod("ls"), "missile.io/ls");
  both["spec"]["containers"][0]["resources"]["limits"]["missile.io/be"] = "1";
  EXPECT_EQ(Refusal(both), "container 'app' asks for both missile.io/ls and missile.io/be");
}

TEST(MutatePodRefusalTest, QuotaNextToSlots) {
  EXPECT_EQ(
      Refusal(Annotated(WithSlots(ReplicaPod("be"), "missile.io/be"), "missile.io/quota", "4GiB")),
      "missile.io/quota is not for container 'app', which asks for missile.io/be slots: "
      "its quota comes from the slots");
}

TEST(MutatePodRefusalTest, LdPreloadFromValueFrom) {
  Json pod = ReplicaPod();
  pod["spec"]["containers"][0]["env"] =
      Json::array({{{"name", "LD_PRELOAD"},
                    {"valueFrom", {{"configMapKeyRef", {{"name", "c"}, {"key", "k"}}}}}}});
  EXPECT_EQ(Refusal(pod),
            "container 'app' sets LD_PRELOAD with valueFrom, to which the shim "
            "/opt/missile/shim/libmissile.so cannot be prepended: give LD_PRELOAD a plain value "
            "or leave it out");
}

TEST(MutatePodRefusalTest, VolumeOfTheWebhooksNameThatIsSomethingElse) {
  Json pod = ReplicaPod();
  pod["spec"]["volumes"] = Json::array({{{"name", "missile-shim"}, {"emptyDir", Json::object()}}});
  EXPECT_EQ(Refusal(pod),
            "the pod's volume 'missile-shim' is not hostPath /opt/missile/shim, which the "
            "webhook mounts under that name: rename it");
  pod["spec"]["volumes"][0] = {{"name", "missile-socket"}, {"hostPath", {{"path", "/run"}}}};
  EXPECT_EQ(Refusal(pod),
            "the pod's volume 'missile-socket' is not hostPath /run/missile, which the webhook "
            "mounts under that name: rename it");
}

TEST(MutatePodRefusalTest, MountsInTheWay) {
  Json pod = ReplicaPod();
  pod["spec"]["containers"][0]["volumeMounts"] =
      Json::array({{{"name", "missile-shim"}, {"mountPath", "/shim"}}});
  EXPECT_EQ(Refusal(pod),
            "container 'app' mounts volume 'missile-shim' at /shim, not at /opt/missile/shim");
  pod["spec"]["containers"][0]["volumeMounts"] =
      Json::array({{{"name", "sockets"}, {"mountPath", "/run/missile"}}});
  EXPECT_EQ(Refusal(pod),
            "container 'app' mounts volume 'sockets' at /run/missile, where the webhook mounts "
            "volume 'missile-socket'");
}

TEST(MutatePodRefusalTest, ARefusalInTheLastContainerRefusesThePod) {
  Json pod = ReplicaPod();
  pod["spec"]["containers"].push_back(
      {{"name", "late"}, {"resources", {{"limits", {{"missile.io/be", "1"}}}}}});
  EXPECT_EQ(Refusal(pod),
            "container 'late' asks for missile.io/be slots but missile.io/class is ls");
}

}  // namespace
}  // namespace missile::webhook
