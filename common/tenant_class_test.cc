#include "missile/common/tenant_class.h"

#include "gtest/gtest.h"

namespace missile {
namespace {

TEST(TenantClassTest, NamesRoundTrip) {
  for (TenantClass cls : {TenantClass::kLatencySensitive, TenantClass::kBestEffort}) {
    auto back = ParseTenantClass(TenantClassName(cls));
    ASSERT_TRUE(back.ok()) << back.status();
    EXPECT_EQ(*back, cls);
  }
  EXPECT_STREQ(TenantClassName(TenantClass::kLatencySensitive), "ls");
  EXPECT_STREQ(TenantClassName(TenantClass::kBestEffort), "be");
}

TEST(TenantClassTest, RejectsOtherNames) {
  for (const char* bad : {"", "LS", "latency", "b"}) {
    auto parsed = ParseTenantClass(bad);
    EXPECT_EQ(parsed.status().code(), absl::StatusCode::kInvalidArgument) << bad;
  }
  EXPECT_EQ(ParseTenantClass("x").status().message(), "'x' is not ls or be");
}

}  // namespace
}  // namespace missile
