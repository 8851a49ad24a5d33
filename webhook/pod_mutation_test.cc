// The patches MutatePod writes, applied to the pod they were written for (nlohmann's
// json::patch, an RFC 6902 implementation), compared with the pod expected.
#include "pod_mutation.h"

#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "test_pods.h"

namespace missile::webhook {
namespace {

using test_pods::Annotated;
using test_pods::ReplicaPod;

// The pod after its patch; the patch must be a valid one for it.
Json Mutated(const Json& pod, const MutationConfig& config = MutationConfig()) {
  absl::StatusOr<Json> patch = MutatePod(config, pod, "shop");
  EXPECT_TRUE(patch.ok()) << patch.status();
  if (!patch.ok()) return pod;
  EXPECT_TRUE(patch->is_array());
  return pod.patch(*patch);
}

Json Env(const std::string& name, const std::string& value) {
  return Json{{"name", name}, {"value", value}};
}

Json FieldEnv(const std::string& name, const std::string& path) {
  return Json{{"name", name}, {"valueFrom", {{"fieldRef", {{"fieldPath", path}}}}}};
}

Json IdentityEnv(const std::string& tenant, const std::string& container) {
  return Json::array({Env("MISSILE_TENANT_NAME", tenant),
                      FieldEnv("MISSILE_K8S_POD", "metadata.name"),
                      FieldEnv("MISSILE_K8S_NAMESPACE", "metadata.namespace"),
                      Env("MISSILE_K8S_CONTAINER", container)});
}

TEST(MutatePodTest, PlainPodGetsEverythingTheDevicePluginWouldGive) {
  Json expected = ReplicaPod();
  Json& app = expected["spec"]["containers"][0];
  app["env"] = Json::array({Env("LD_PRELOAD", "/opt/missile/shim/libmissile.so")});
  app["volumeMounts"] = Json::array(
      {{{"name", "missile-shim"}, {"mountPath", "/opt/missile/shim"}, {"readOnly", true}},
       {{"name", "missile-socket"}, {"mountPath", "/run/missile"}}});
  app["env"].push_back(Env("MISSILE_TENANT_CLASS", "ls"));
  app["env"].push_back(Env("MISSILE_SOCKET", "/run/missile/missiled.sock"));
  for (const Json& e : IdentityEnv("shop.web", "app")) app["env"].push_back(e);
  expected["spec"]["volumes"] =
      Json::array({{{"name", "missile-shim"},
                    {"hostPath", {{"path", "/opt/missile/shim"}, {"type", "Directory"}}}},
                   {{"name", "missile-socket"},
                    {"hostPath", {{"path", "/run/missile"}, {"type", "Directory"}}}}});
  expected["spec"]["securityContext"] = {{"supplementalGroups", {2046}}};
  EXPECT_EQ(Mutated(ReplicaPod()), expected) << Mutated(ReplicaPod()).dump(2);
}

TEST(MutatePodTest, SecondReviewOfAMutatedPodAddsNothing) {
  Json pod = Annotated(ReplicaPod("be"), "missile.io/quota", "6GiB");
  pod["spec"]["containers"].push_back({{"name", "side"}, {"env", Json::array()}});
  Json once = Mutated(pod);
  ASSERT_NE(once, pod);
  absl::StatusOr<Json> again = MutatePod(MutationConfig(), once, "shop");
  ASSERT_TRUE(again.ok()) << again.status();
  EXPECT_EQ(*again, Json::array());
}

TEST(MutatePodTest, ConfigPathsQuotaAndGroup) {
  MutationConfig config;
  config.shim_dir = "/srv/shim";
  config.socket_dir = "/var/run/m";
  config.socket_gid = 3000;
  Json pod = Mutated(Annotated(ReplicaPod("be"), "missile.io/quota", "1536 MiB"), config);
  const Json& env = pod["spec"]["containers"][0]["env"];
  EXPECT_EQ(env[0], Env("LD_PRELOAD", "/srv/shim/libmissile.so"));
  EXPECT_EQ(env[1], Env("MISSILE_TENANT_CLASS", "be"));
  EXPECT_EQ(env[2], Env("MISSILE_SOCKET", "/var/run/m/missiled.sock"));
  EXPECT_EQ(env[3], Env("MISSILE_QUOTA", "1536MiB"));
  EXPECT_EQ(pod["spec"]["volumes"][1]["hostPath"]["path"], "/var/run/m");
  EXPECT_EQ(pod["spec"]["containers"][0]["volumeMounts"][0]["mountPath"], "/srv/shim");
  EXPECT_EQ(pod["spec"]["securityContext"]["supplementalGroups"], Json::array({3000}));
}

TEST(MutatePodTest, UserVariablesStayAndLdPreloadGetsTheShimFirst) {
  Json pod = ReplicaPod();
  pod["spec"]["containers"][0]["env"] =
      Json::array({Env("MISSILE_TENANT_NAME", "mine"), Env("LD_PRELOAD", "/lib/libjemalloc.so"),
                   Env("MISSILE_SOCKET", "/elsewhere.sock")});
  const Json env = Mutated(pod)["spec"]["containers"][0]["env"];
  EXPECT_EQ(env[0], Env("MISSILE_TENANT_NAME", "mine"));
  EXPECT_EQ(env[1], Env("LD_PRELOAD", "/opt/missile/shim/libmissile.so:/lib/libjemalloc.so"));
  EXPECT_EQ(env[2], Env("MISSILE_SOCKET", "/elsewhere.sock"));
  std::set<std::string> names;
  for (const Json& e : env) EXPECT_TRUE(names.insert(e["name"].get<std::string>()).second) << e;
  EXPECT_EQ(names.size(), 7u);  // 3 of the user's, class and 3 of the identity
}

TEST(MutatePodTest, LdPreloadHoldingTheShimAlreadyIsLeftAlone) {
  Json pod = ReplicaPod();
  pod["spec"]["containers"][0]["env"] =
      Json::array({Env("LD_PRELOAD", "/lib/a.so /opt/missile/shim/libmissile.so")});
  EXPECT_EQ(Mutated(pod)["spec"]["containers"][0]["env"][0],
            Env("LD_PRELOAD", "/lib/a.so /opt/missile/shim/libmissile.so"));
  pod["spec"]["containers"][0]["env"] = Json::array({{{"name", "LD_PRELOAD"}}});
  EXPECT_EQ(Mutated(pod)["spec"]["containers"][0]["env"][0],
            Env("LD_PRELOAD", "/opt/missile/shim/libmissile.so"));
}

TEST(MutatePodTest, ContainerWithSlotsGetsOnlyItsNameAndIdentity) {
  Json pod = ReplicaPod("be");
  pod["spec"]["containers"][0]["resources"] = {{"limits", {{"missile.io/be", "2"}}}};
  Json expected = pod;
  expected["spec"]["containers"][0]["env"] = IdentityEnv("shop.web", "app");
  expected["spec"]["securityContext"] = {{"supplementalGroups", {2046}}};
  EXPECT_EQ(Mutated(pod), expected) << Mutated(pod).dump(2);
}

TEST(MutatePodTest, OnlyTheAnnotatedContainers) {
  Json pod = Annotated(ReplicaPod(), "missile.io/containers", "model");
  pod["spec"]["containers"].push_back({{"name", "model"}});
  pod["spec"]["initContainers"] = Json::array({{{"name", "fetch"}}});
  Json mutated = Mutated(pod);
  EXPECT_EQ(mutated["spec"]["containers"][0], pod["spec"]["containers"][0]);
  EXPECT_EQ(mutated["spec"]["initContainers"], pod["spec"]["initContainers"]);
  EXPECT_EQ(mutated["spec"]["containers"][1]["env"].size(), 7u);
  EXPECT_EQ(mutated["spec"]["containers"][1]["env"][6], Env("MISSILE_K8S_CONTAINER", "model"));
}

TEST(MutatePodTest, EveryContainerByDefaultAndTheVolumesOnce) {
  Json pod = ReplicaPod();
  pod["spec"]["containers"].push_back(
      {{"name", "two"}, {"volumeMounts", {{{"name", "data"}, {"mountPath", "/d"}}}}});
  pod["spec"]["volumes"] = Json::array({{{"name", "data"}, {"emptyDir", Json::object()}}});
  Json mutated = Mutated(pod);
  EXPECT_EQ(mutated["spec"]["volumes"].size(), 3u);
  EXPECT_EQ(mutated["spec"]["volumes"][0]["name"], "data");
  EXPECT_EQ(mutated["spec"]["containers"][0]["volumeMounts"].size(), 2u);
  EXPECT_EQ(mutated["spec"]["containers"][1]["volumeMounts"].size(), 3u);
  EXPECT_EQ(mutated["spec"]["containers"][1]["volumeMounts"][0]["name"], "data");
  EXPECT_EQ(mutated["spec"]["containers"][1]["env"][6], Env("MISSILE_K8S_CONTAINER", "two"));
}

TEST(MutatePodTest, SameHostPathVolumesOfTheWebhooksNamesAreReused) {
  Json pod = ReplicaPod();
  pod["spec"]["volumes"] =
      Json::array({{{"name", "missile-socket"}, {"hostPath", {{"path", "/run/missile"}}}}});
  Json mutated = Mutated(pod);
  ASSERT_EQ(mutated["spec"]["volumes"].size(), 2u);
  EXPECT_EQ(mutated["spec"]["volumes"][0], pod["spec"]["volumes"][0]);
  EXPECT_EQ(mutated["spec"]["volumes"][1]["name"], "missile-shim");
}

TEST(MutatePodTest, SupplementalGroupsJoinedOnce) {
  Json pod = ReplicaPod();
  pod["spec"]["securityContext"] = {{"runAsUser", 1000}};
  EXPECT_EQ(Mutated(pod)["spec"]["securityContext"],
            Json({{"runAsUser", 1000}, {"supplementalGroups", {2046}}}));
  pod["spec"]["securityContext"]["supplementalGroups"] = {44};
  EXPECT_EQ(Mutated(pod)["spec"]["securityContext"]["supplementalGroups"], Json({44, 2046}));
  pod["spec"]["securityContext"]["supplementalGroups"] = {2046, 44};
  EXPECT_EQ(Mutated(pod)["spec"]["securityContext"]["supplementalGroups"], Json({2046, 44}));
}

}  // namespace
}  // namespace missile::webhook
