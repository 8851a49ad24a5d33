#include "tenant_spec.h"

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "missile/common/size.h"
#include "test_pods.h"

namespace missile::webhook {
namespace {

using test_pods::Annotated;
using test_pods::ReplicaPod;
using ::testing::ElementsAre;
using ::testing::HasSubstr;

MATCHER_P(IsInvalid, text, "INVALID_ARGUMENT with a message holding " + std::string(text)) {
  return arg.status().code() == absl::StatusCode::kInvalidArgument &&
         arg.status().message().find(text) != std::string::npos;
}

TEST(ParseQuotaTest, TakesSizesWithUnits) {
  EXPECT_EQ(ParseQuota("8GiB").value(), 8 * kGiB);
  EXPECT_EQ(ParseQuota("512M").value(), 512 * kMiB);
  EXPECT_EQ(ParseQuota("4096B").value(), 4096u);
}

TEST(ParseQuotaTest, RefusesBareNumbersZeroAndGarbage) {
  EXPECT_THAT(ParseQuota("8"), IsInvalid("missile.io/quota: '8' has no unit"));
  EXPECT_THAT(ParseQuota("8"), IsInvalid("'8GiB'"));
  EXPECT_THAT(ParseQuota("0GiB"), IsInvalid("must be more than 0 bytes"));
  EXPECT_THAT(ParseQuota("8 parsecs"), IsInvalid("missile.io/quota: "));
  EXPECT_THAT(ParseQuota("-1G"), IsInvalid("missile.io/quota: "));
}

TEST(DefaultTenantNameTest, ReplicasOfADeploymentShareOneName) {
  EXPECT_EQ(DefaultTenantName(ReplicaPod(), "shop").value(), "shop.web");
}

TEST(DefaultTenantNameTest, GenerateNameWithoutHashLabelKeepsItsStem) {
  Json pod = ReplicaPod();
  pod["metadata"]["labels"].erase("pod-template-hash");
  EXPECT_EQ(DefaultTenantName(pod, "shop").value(), "shop.web-7d4b9c");
  pod["metadata"]["generateName"] = "nightly-batch-";
  EXPECT_EQ(DefaultTenantName(pod, "jobs").value(), "jobs.nightly-batch");
}

TEST(DefaultTenantNameTest, HashThatDoesNotEndTheNameIsKept) {
  Json pod = ReplicaPod();
  pod["metadata"]["labels"]["pod-template-hash"] = "ffff";
  EXPECT_EQ(DefaultTenantName(pod, "shop").value(), "shop.web-7d4b9c");
}

TEST(DefaultTenantNameTest, NameWhenThereIsNoGenerateName) {
  Json pod = ReplicaPod();
  pod["metadata"].erase("generateName");
  pod["metadata"]["name"] = "db-0";
  EXPECT_EQ(DefaultTenantName(pod, "shop").value(), "shop.db-0");
  pod["metadata"].erase("name");
  EXPECT_THAT(DefaultTenantName(pod, "shop"), IsInvalid("set missile.io/tenant"));
}

TEST(ReadTenantSpecTest, DefaultsFromThePod) {
  Json pod = ReplicaPod("be");
  pod["spec"]["containers"].push_back({{"name", "sidecar"}});
  absl::StatusOr<TenantSpec> spec = ReadTenantSpec(pod, "shop");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->cls, TenantClass::kBestEffort);
  EXPECT_FALSE(spec->quota_bytes.has_value());
  EXPECT_EQ(spec->tenant_name, "shop.web");
  EXPECT_THAT(spec->containers, ElementsAre("app", "sidecar"));
}

TEST(ReadTenantSpecTest, AnnotationsOverrideTheDefaults) {
  Json pod = ReplicaPod("ls");
  pod["spec"]["containers"].push_back({{"name", "sidecar"}});
  pod["spec"]["containers"].push_back({{"name", "model"}});
  pod = Annotated(pod, "missile.io/quota", "12GiB");
  pod = Annotated(pod, "missile.io/tenant", "ranker_v2.eu");
  pod = Annotated(pod, "missile.io/containers", " model ,app");
  absl::StatusOr<TenantSpec> spec = ReadTenantSpec(pod, "shop");
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->cls, TenantClass::kLatencySensitive);
  EXPECT_EQ(spec->quota_bytes, 12 * kGiB);
  EXPECT_EQ(spec->tenant_name, "ranker_v2.eu");
  EXPECT_THAT(spec->containers, ElementsAre("app", "model"));  // in the pod's order
}

TEST(ReadTenantSpecTest, WantsTenantOnlyWithTheClassAnnotation) {
  EXPECT_TRUE(WantsTenant(ReplicaPod("nonsense")));
  Json pod = ReplicaPod();
  pod["metadata"]["annotations"].erase("missile.io/class");
  pod = Annotated(pod, "missile.io/tenant", "x");
  EXPECT_FALSE(WantsTenant(pod));
  EXPECT_FALSE(WantsTenant(Json::object()));
}

TEST(ReadTenantSpecTest, RefusesAClassOtherThanLsOrBe) {
  EXPECT_THAT(ReadTenantSpec(ReplicaPod("LS-high"), "shop"),
              IsInvalid("missile.io/class: 'LS-high' is not ls or be"));
  EXPECT_THAT(ReadTenantSpec(ReplicaPod(""), "shop"), IsInvalid("missile.io/class: "));
}

TEST(ReadTenantSpecTest, RefusesTenantNamesMissiledRefuses) {
  EXPECT_THAT(ReadTenantSpec(Annotated(ReplicaPod(), "missile.io/tenant", "shop/web"), "shop"),
              IsInvalid("missile.io/tenant: tenant name 'shop/web' may hold only letters"));
  EXPECT_THAT(
      ReadTenantSpec(Annotated(ReplicaPod(), "missile.io/tenant", std::string(65, 'a')), "shop"),
      IsInvalid("missile.io/tenant: tenant name must be 1 to 64 characters, got 65"));
  Json pod = ReplicaPod();
  pod["metadata"]["generateName"] = std::string(60, 'w') + "-7d4b9c-";
  EXPECT_THAT(ReadTenantSpec(pod, "shop"), IsInvalid("the default tenant name 'shop.www"));
  EXPECT_THAT(ReadTenantSpec(pod, "shop"), IsInvalid("set missile.io/tenant"));
}

TEST(ReadTenantSpecTest, RefusesContainersNotInSpecContainers) {
  Json pod = ReplicaPod();
  pod["spec"]["initContainers"] = Json::array({{{"name", "fetch"}}});
  EXPECT_THAT(ReadTenantSpec(Annotated(pod, "missile.io/containers", "app,apps"), "shop"),
              IsInvalid("missile.io/containers: 'apps' is not in spec.containers (containers: "
                        "app)"));
  EXPECT_THAT(ReadTenantSpec(Annotated(pod, "missile.io/containers", "fetch"), "shop"),
              IsInvalid("'fetch' is an init container, which never becomes a tenant"));
  EXPECT_THAT(ReadTenantSpec(Annotated(pod, "missile.io/containers", "app,,"), "shop"),
              IsInvalid("missile.io/containers: empty container name in 'app,,'"));
}

TEST(ReadTenantSpecTest, RefusesAPodWithoutContainers) {
  Json pod = ReplicaPod();
  pod["spec"].erase("containers");
  EXPECT_THAT(ReadTenantSpec(pod, "shop"), IsInvalid("the pod has no spec.containers"));
}

}  // namespace
}  // namespace missile::webhook
