// PolicyStore: what it keeps, and its state file's round trip.
#include "policy_store.h"

#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

constexpr TenantClass kLs = TenantClass::kLatencySensitive;
constexpr TenantClass kBe = TenantClass::kBestEffort;

class PolicyStoreTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = ::testing::TempDir() + "/policy_store_test_" + std::to_string(getpid());
    std::filesystem::create_directories(dir_);
    file_ = dir_ + "/policy.toml";
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  std::string dir_;
  std::string file_;
};

TEST_F(PolicyStoreTest, KeepsClassDefaultsAndTenants) {
  PolicyStore store("", ClassDefaults{-10}, ClassDefaults{10});
  EXPECT_EQ(store.class_defaults(kLs).priority, -10);
  EXPECT_EQ(store.class_defaults(kBe).priority, 10);
  EXPECT_FALSE(store.FindTenant("web", 1000).has_value());
  store.PutTenant({"web", 1000, kLs, -3, 2048, uint64_t{4} << 20, std::nullopt});
  ASSERT_TRUE(store.FindTenant("web", 1000).has_value());
  EXPECT_EQ(store.FindTenant("web", 1000)->priority, -3);
  EXPECT_FALSE(store.FindTenant("web", 1001).has_value());  // another uid: another tenant
  store.ChangeClass(kBe, 12, std::nullopt, uint64_t{64} << 20);
  EXPECT_EQ(store.class_defaults(kBe).priority, 12);
  EXPECT_EQ(store.state().be.priority, 12);
  EXPECT_EQ(store.state().be.class_quota_bytes, uint64_t{64} << 20);
  EXPECT_FALSE(store.state().be.tenant_quota_bytes.has_value());
  EXPECT_EQ(store.state().ls, ClassPolicyState{});
}

TEST_F(PolicyStoreTest, TheLsClassBudgetIsADefaultThatZeroClears) {
  PolicyStore store("", ClassDefaults{-10}, ClassDefaults{10});
  EXPECT_EQ(store.class_defaults(kLs).budget_pct, 0u);  // none: [compute] ls_budget_pct
  store.ChangeClass(kLs, std::nullopt, std::nullopt, std::nullopt, 200);
  EXPECT_EQ(store.class_defaults(kLs).budget_pct, 200u);
  EXPECT_EQ(store.class_defaults(kLs).priority, -10) << "only the budget changed";
  EXPECT_EQ(store.state().ls.budget_pct, 200u);
  EXPECT_FALSE(store.state().ls.priority.has_value());
  // Other changes of the class leave it.
  store.ChangeClass(kLs, -12, std::nullopt, std::nullopt);
  EXPECT_EQ(store.class_defaults(kLs).budget_pct, 200u);
  // 0 clears it, and the file keeps none.
  store.ChangeClass(kLs, std::nullopt, std::nullopt, std::nullopt, 0);
  EXPECT_EQ(store.class_defaults(kLs).budget_pct, 0u);
  EXPECT_FALSE(store.state().ls.budget_pct.has_value());
  EXPECT_EQ(store.state().ls.priority, -12);
}

TEST_F(PolicyStoreTest, WhatIsSavedLoadsBack) {
  PolicyStore store(file_, ClassDefaults{-10}, ClassDefaults{10});
  EXPECT_FALSE(store.Load().has_value());  // no file yet
  store.PutTenant({"web", 1000, kLs, -3, 2048, uint64_t{4} << 20, 300});
  store.PutTenant({"api", 1000, kLs, -10, 9548, std::nullopt, std::nullopt});
  store.ChangeClass(kLs, -5, uint64_t{8} << 20, uint64_t{16} << 20, 150);
  store.Save();
  PolicyStore again(file_, ClassDefaults{-10}, ClassDefaults{10});
  std::optional<PolicyState> loaded = again.Load();
  ASSERT_TRUE(loaded.has_value());
  EXPECT_EQ(*loaded, store.state());
  again.Restore(*loaded);
  EXPECT_EQ(again.state(), store.state());
  EXPECT_EQ(again.FindTenant("web", 1000)->weight, 2048u);
  EXPECT_EQ(again.FindTenant("web", 1000)->budget_pct, 300u);
  EXPECT_FALSE(again.FindTenant("api", 1000)->budget_pct.has_value());
  EXPECT_EQ(loaded->ls.budget_pct, 150u);
  // Class defaults are the core's to apply (to the GPUs as well): Restore leaves them.
  EXPECT_EQ(again.class_defaults(kLs).priority, -10);
}

TEST_F(PolicyStoreTest, AFileThatDoesNotParseIsMovedAside) {
  {
    std::ofstream out(file_);
    out << "this is not a policy state file\n";
  }
  PolicyStore store(file_, ClassDefaults{}, ClassDefaults{});
  EXPECT_FALSE(store.Load().has_value());
  EXPECT_FALSE(std::filesystem::exists(file_));
  EXPECT_TRUE(std::filesystem::exists(file_ + ".bad"));
}

TEST_F(PolicyStoreTest, WithoutAFileNothingIsWritten) {
  PolicyStore store("", ClassDefaults{}, ClassDefaults{});
  store.PutTenant({"web", 1000, kLs, -3, 2048, std::nullopt, std::nullopt});
  store.Save();
  EXPECT_FALSE(store.Load().has_value());
  EXPECT_TRUE(std::filesystem::is_empty(dir_));
}

}  // namespace
}  // namespace missile::daemon
