#include "policy_state.h"

#include <sys/stat.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

PolicyState Sample() {
  PolicyState s;
  s.ls.priority = -15;
  s.be.tenant_quota_bytes = uint64_t{8} << 30;
  s.be.class_quota_bytes = uint64_t{16} << 30;
  s.ls.budget_pct = 150;
  s.Put({"web", 1000, TenantClass::kLatencySensitive, -10, 3121, std::nullopt, 250});
  s.Put({"batch.v2", 1001, TenantClass::kBestEffort, 10, 7, uint64_t{2} << 30});
  s.Put({"web", 0, TenantClass::kBestEffort, 5, 335, std::nullopt});
  return s;
}

std::string TempPath(const std::string& name) {
  std::string dir = ::testing::TempDir() + "/policy_state_test_" + std::to_string(getpid());
  std::filesystem::create_directories(dir);
  return dir + "/" + name;
}

TEST(PolicyStateTest, FormatAndParseRoundTrip) {
  const PolicyState s = Sample();
  absl::StatusOr<PolicyState> back = ParsePolicyState(FormatPolicyState(s));
  ASSERT_TRUE(back.ok()) << back.status() << "\n" << FormatPolicyState(s);
  EXPECT_EQ(*back, s);
  absl::StatusOr<PolicyState> empty = ParsePolicyState(FormatPolicyState(PolicyState()));
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_TRUE(empty->empty());
}

TEST(PolicyStateTest, LatencyBudgetsAreWrittenOnlyWhereSet) {
  const std::string text = FormatPolicyState(Sample());
  EXPECT_NE(text.find("[classes.ls]\npriority = -15\nbudget_pct = 150\n"), std::string::npos)
      << text;
  EXPECT_NE(text.find("weight = 3121\nbudget_pct = 250\n"), std::string::npos) << text;
  // One budget for the class, one for the tenant: the other tenants follow theirs.
  size_t budgets = 0;
  for (size_t at = text.find("budget_pct"); at != std::string::npos;
       at = text.find("budget_pct", at + 1)) {
    ++budgets;
  }
  EXPECT_EQ(budgets, 2u) << text;
  absl::StatusOr<PolicyState> back = ParsePolicyState(text);
  ASSERT_TRUE(back.ok()) << back.status();
  EXPECT_EQ(back->ls.budget_pct, 150u);
  EXPECT_FALSE(back->be.budget_pct.has_value());
  EXPECT_EQ(back->Find("web", 1000)->budget_pct, 250u);
  EXPECT_FALSE(back->Find("web", 0)->budget_pct.has_value());
}

TEST(PolicyStateTest, TenantsAreKeyedByNameAndUid) {
  PolicyState s = Sample();
  ASSERT_EQ(s.tenants.size(), 3u);
  ASSERT_NE(s.Find("web", 1000), nullptr);
  EXPECT_EQ(s.Find("web", 1000)->cls, TenantClass::kLatencySensitive);
  ASSERT_NE(s.Find("web", 0), nullptr);
  EXPECT_EQ(s.Find("web", 0)->priority, 5);
  EXPECT_EQ(s.Find("web", 1001), nullptr) << "another user's 'web' inherits nothing";
  EXPECT_EQ(s.Find("batch", 1001), nullptr);
  s.Put({"web", 1000, TenantClass::kBestEffort, 0, 1024, uint64_t{1} << 30});
  EXPECT_EQ(s.tenants.size(), 3u) << "Put replaces the entry";
  EXPECT_EQ(s.Find("web", 1000)->weight, 1024u);
  EXPECT_EQ(s.Find("web", 1000)->quota_bytes.value_or(0), uint64_t{1} << 30);
}

TEST(PolicyStateTest, BadTextIsRefusedWithItsLine) {
  const std::pair<std::string, std::string> cases[] = {
      {"", "not a version 1 state file"},
      {"version = 2\n", "not a version 1 state file"},
      {"version = 1\n[[tenants]\n", "line 2"},
      {"\x01\x02garbage", "line 1"},
      {"version = 1\ncolour = 3\n", "line 2: unknown key 'colour'"},
      {"version = 1\n[classes.ls]\npriority = 40\n", "line 3: priority: must be an integer in [-20, 19]"},
      {"version = 1\n[[tenants]]\nname = \"a\"\nclass = \"ls\"\n", "needs uid, priority and weight"},
      {"version = 1\n[[tenants]]\nname = \"a\"\nuid = 1\nclass = \"xx\"\npriority = 0\nweight = 1\n",
       "'xx' is not ls or be"},
      {"version = 1\n[[tenants]]\nname = \"a\"\nuid = -1\nclass = \"be\"\npriority = 0\nweight = 1\n",
       "uid: must be an integer"},
      {"version = 1\n[[tenants]]\nname = \"a\"\nuid = 1\nclass = \"be\"\npriority = 0\nweight = 0\n",
       "weight: must be an integer in [1, 1048576]"},
      {"version = 1\n[classes.ls]\nbudget_pct = 99\n",
       "line 3: budget_pct: must be an integer in [100, 1000]"},
      {"version = 1\n[[tenants]]\nname = \"a\"\nuid = 1\nclass = \"ls\"\npriority = 0\nweight = 1\n"
       "budget_pct = 1001\n",
       "line 8: budget_pct: must be an integer in [100, 1000]"},
      {"version = 1\n[[tenants]]\nname = \"a\"\nuid = 1\nclass = \"be\"\npriority = 0\nweight = 1\n"
       "[[tenants]]\nname = \"a\"\nuid = 1\nclass = \"ls\"\npriority = 0\nweight = 1\n",
       "tenant 'a' of uid 1 is listed twice"},
  };
  for (const auto& [text, want] : cases) {
    absl::StatusOr<PolicyState> s = ParsePolicyState(text);
    ASSERT_FALSE(s.ok()) << text;
    EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument) << text;
    EXPECT_NE(s.status().message().find(want), std::string::npos)
        << "for:\n" << text << "\ngot: " << s.status().message();
  }
}

TEST(PolicyStateTest, SaveReplacesTheFileAtomicallyAndLoadReadsIt) {
  const std::string path = TempPath("policy.toml");
  std::ofstream(path) << "old contents";
  ASSERT_TRUE(SavePolicyState(path, Sample()).ok());
  EXPECT_FALSE(std::filesystem::exists(path + ".tmp")) << "the temporary file was renamed";
  struct stat st{};
  ASSERT_EQ(stat(path.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 0777, 0644u);
  absl::StatusOr<PolicyState> loaded = LoadPolicyState(path);
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  EXPECT_EQ(*loaded, Sample());
}

TEST(PolicyStateTest, MissingUnreadableAndCorruptFilesAreReportedApart) {
  EXPECT_EQ(LoadPolicyState(TempPath("none.toml")).status().code(), absl::StatusCode::kNotFound);
  const std::string corrupt = TempPath("corrupt.toml");
  std::ofstream(corrupt) << "version = 1\n[[tenants]]\nname = 3\n";
  absl::StatusOr<PolicyState> s = LoadPolicyState(corrupt);
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(s.status().message().find(corrupt + ": line 2"), std::string::npos) << s.status();
  // A directory where the file should be cannot be read as one.
  const std::string dir = TempPath("a-directory.toml");
  std::filesystem::create_directories(dir);
  EXPECT_FALSE(LoadPolicyState(dir).ok());
  // Saving into a directory that does not exist fails and creates nothing.
  const std::string nowhere = TempPath("missing-dir/policy.toml");
  absl::Status saved = SavePolicyState(nowhere, Sample());
  EXPECT_FALSE(saved.ok());
  EXPECT_NE(saved.message().find("missing-dir/policy.toml.tmp"), std::string::npos) << saved;
  EXPECT_FALSE(std::filesystem::exists(nowhere));
}

}  // namespace
}  // namespace missile::daemon
