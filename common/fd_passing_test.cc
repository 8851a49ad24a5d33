#include "missile/common/fd_passing.h"

#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace missile::fdpass {
namespace {

class ListenUnixTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string tmpl = ::testing::TempDir() + "/listen-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl.data()), nullptr);
    dir_ = tmpl;
    ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
    path_ = dir_ + "/s.sock";
  }
  void TearDown() override {
    unlink(path_.c_str());
    rmdir(dir_.c_str());
  }

  std::string dir_;
  std::string path_;
};

TEST_F(ListenUnixTest, SetsModeAndGroupAndReplacesAStaleSocket) {
  int first = -1;
  ASSERT_TRUE(ListenUnix(path_, 0600, &first).ok());
  close(first);  // leaves the socket file behind, as a daemon that crashed does
  int sock = -1;
  absl::Status s = ListenUnix(path_, 0660, &sock, static_cast<unsigned>(getegid()));
  ASSERT_TRUE(s.ok()) << s;
  struct stat st;
  ASSERT_EQ(lstat(path_.c_str(), &st), 0);
  EXPECT_TRUE(S_ISSOCK(st.st_mode));
  EXPECT_EQ(st.st_mode & 07777, 0660u);
  EXPECT_EQ(st.st_gid, getegid());
  close(sock);
}

TEST_F(ListenUnixTest, RefusesADirectoryOthersMayWrite) {
  for (mode_t mode : {01777, 0777, 0775}) {
    ASSERT_EQ(chmod(dir_.c_str(), mode), 0);
    int sock = -1;
    absl::Status s = ListenUnix(path_, 0660, &sock);
    EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition) << std::oct << mode << ": " << s;
    EXPECT_NE(s.message().find("socket directory " + dir_), std::string::npos) << s;
    EXPECT_NE(s.message().find("writable by"), std::string::npos) << s;
    struct stat st;
    EXPECT_NE(lstat(path_.c_str(), &st), 0) << "nothing is created in a refused directory";
  }
  ASSERT_EQ(chmod(dir_.c_str(), 0755), 0);
}

TEST_F(ListenUnixTest, RefusesSomethingElseAtThePathAndLeavesItAlone) {
  const std::string target = dir_ + "/target";
  std::ofstream(target) << "x";
  ASSERT_EQ(chmod(target.c_str(), 0600), 0);
  ASSERT_EQ(symlink(target.c_str(), path_.c_str()), 0);
  int sock = -1;
  EXPECT_EQ(ListenUnix(path_, 0666, &sock).code(), absl::StatusCode::kFailedPrecondition);
  struct stat st;
  ASSERT_EQ(stat(target.c_str(), &st), 0);
  EXPECT_EQ(st.st_mode & 07777, 0600u);
  unlink(target.c_str());
}

}  // namespace
}  // namespace missile::fdpass
