#include "missile/common/k8s_identity.h"

#include <string>

#include "gtest/gtest.h"

namespace missile {
namespace {

TEST(K8sIdentityTest, KubernetesNamesPass) {
  EXPECT_TRUE(ValidateK8sIdentity({"web-7d4b9c-x2x9z", "prod", "server"}).ok());
  EXPECT_TRUE(ValidateK8sIdentity({"a.b_c", "", ""}).ok());
  EXPECT_TRUE(ValidateK8sIdentity({}).ok());  // nothing known
  EXPECT_TRUE(ValidateK8sField("pod", std::string(253, 'p'), kMaxPodName).ok());
}

TEST(K8sIdentityTest, TooLongOrOddCharactersAreRefusedNamingTheField) {
  absl::Status s = ValidateK8sIdentity({"ok", std::string(64, 'n'), "c"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "namespace: 64 characters, more than 63");
  s = ValidateK8sIdentity({std::string(254, 'p'), "", ""});
  EXPECT_EQ(s.message(), "pod: 254 characters, more than 253");
  s = ValidateK8sIdentity({"", "", "a\"b\n"});
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(),
            "container 'a\\\"b\\n' has a character other than letters, digits, '-', '_' and '.'");
  for (const char* bad : {"a b", "a/b", "a}b", "a=b", "\xc3\xa9"}) {
    EXPECT_FALSE(ValidateK8sField("pod", bad, kMaxPodName).ok()) << bad;
  }
}

TEST(K8sIdentityTest, DeviceIdsWithinBoundsPassOthersAreRefused) {
  const std::string slot = "GPU-00000000-1111-2222-3333-444444444444-ls-3";
  EXPECT_TRUE(ValidateK8sDeviceIds({}).ok());
  EXPECT_TRUE(ValidateK8sDeviceIds({slot, "abc-1"}).ok());
  EXPECT_TRUE(ValidateK8sDeviceIds({std::string(kMaxK8sDeviceIdLength, 'a')}).ok());
  EXPECT_FALSE(ValidateK8sDeviceIds({std::string(kMaxK8sDeviceIdLength + 1, 'a')}).ok());
  EXPECT_FALSE(ValidateK8sDeviceIds({""}).ok());
  EXPECT_FALSE(ValidateK8sDeviceIds({slot, "a_b"}).ok());
  EXPECT_FALSE(ValidateK8sDeviceIds({"a,b"}).ok());
  EXPECT_TRUE(ValidateK8sDeviceIds(std::vector<std::string>(kMaxK8sDeviceIds, slot)).ok());
  EXPECT_FALSE(ValidateK8sDeviceIds(std::vector<std::string>(kMaxK8sDeviceIds + 1, slot)).ok());
}

}  // namespace
}  // namespace missile
