#include "instance_lock.h"

#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <string>

#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

std::string TempPath() {
  char dir[] = "/tmp/instance-lock-XXXXXX";
  EXPECT_NE(mkdtemp(dir), nullptr);
  return std::string(dir) + "/missiled.sock.lock";
}

TEST(InstanceLockTest, ASecondHolderIsRefusedAndNamesTheFirst) {
  const std::string path = TempPath();
  absl::StatusOr<InstanceLock> first = InstanceLock::Acquire(path);
  ASSERT_TRUE(first.ok()) << first.status();
  absl::StatusOr<InstanceLock> second = InstanceLock::Acquire(path);
  ASSERT_FALSE(second.ok());
  EXPECT_EQ(second.status().code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(second.status().message().find("pid " + std::to_string(getpid())), std::string::npos)
      << second.status();
  // The refused attempt left the holder's file as it was.
  std::string text;
  std::getline(std::ifstream(path), text);
  EXPECT_EQ(text, std::to_string(getpid()));
  // Released with its holder, and the file is kept.
  first = absl::InternalError("released");  // destroys the lock
  EXPECT_EQ(access(path.c_str(), F_OK), 0);
  EXPECT_TRUE(InstanceLock::Acquire(path).ok());
}

TEST(InstanceLockTest, ASymlinkIsRefused) {
  const std::string path = TempPath();
  ASSERT_EQ(symlink("/etc/passwd", path.c_str()), 0);
  EXPECT_FALSE(InstanceLock::Acquire(path).ok());
}

}  // namespace
}  // namespace missile::daemon
