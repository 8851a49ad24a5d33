// AdminAuthorizer's decisions over a group database given by the test.
#include "admin_authorizer.h"

#include <optional>
#include <vector>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

using fdpass::PeerCredentials;

constexpr unsigned kAdminGid = 600;

// uid 1000 is listed in the admin group; uid 1001 is not; uid 1002 is unknown.
std::optional<std::vector<gid_t>> Groups(uid_t uid) {
  if (uid == 1000) return std::vector<gid_t>{100, kAdminGid};
  if (uid == 1001) return std::vector<gid_t>{100, 101};
  return std::nullopt;
}

TEST(AdminAuthorizerTest, RootIsAlwaysAnAdministrator) {
  const AdminAuthorizer without_group(std::nullopt, Groups);
  EXPECT_TRUE(without_group.IsAdmin(PeerCredentials{1, 0, 0}));
  EXPECT_TRUE(without_group.Check(PeerCredentials{1, 0, 5}, "change policy").ok());
}

TEST(AdminAuthorizerTest, WithoutAnAdminGroupOnlyRootIs) {
  const AdminAuthorizer authorizer(std::nullopt, Groups);
  EXPECT_FALSE(authorizer.IsAdmin(PeerCredentials{1, 1000, kAdminGid}));
  const absl::Status s = authorizer.Check(PeerCredentials{1, 1000, kAdminGid}, "change pacing");
  EXPECT_EQ(s.code(), absl::StatusCode::kPermissionDenied);
  EXPECT_EQ(s.message(), "uid 1000 may not change pacing: root or the admin group only");
}

TEST(AdminAuthorizerTest, TheCallersGidOrItsUsersGroupsMakeAMember) {
  int lookups = 0;
  const AdminAuthorizer authorizer(kAdminGid, [&](uid_t uid) {
    ++lookups;
    return Groups(uid);
  });
  // The kernel-reported gid is enough, without reading the group database.
  EXPECT_TRUE(authorizer.IsAdmin(PeerCredentials{1, 1001, kAdminGid}));
  EXPECT_EQ(lookups, 0);
  EXPECT_TRUE(authorizer.IsAdmin(PeerCredentials{1, 1000, 100}));
  EXPECT_FALSE(authorizer.IsAdmin(PeerCredentials{1, 1001, 100}));
  EXPECT_FALSE(authorizer.IsAdmin(PeerCredentials{1, 1002, 100}));  // not in the database
  EXPECT_EQ(lookups, 3);
}

TEST(AdminAuthorizerTest, TheSystemDatabaseKnowsRootsGroups) {
  const std::optional<std::vector<gid_t>> groups = AdminAuthorizer::SystemGroups(0);
  ASSERT_TRUE(groups.has_value());
  EXPECT_FALSE(groups->empty());
}

}  // namespace
}  // namespace missile::daemon
