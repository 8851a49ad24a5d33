// MpsControl against a stand-in control program (a shell script that keeps a marker file for
// "a control daemon runs" and logs every call), in this process: what missiled asks and when.
#include "mps.h"

#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <fstream>
#include <sstream>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace missile::daemon {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

class MpsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/missile-mps-test-XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
    options_.control = dir_ + "/fake-mps-control";
    options_.pipe_directory = dir_ + "/pipe";
    options_.log_directory = dir_ + "/log";
    options_.start_timeout = std::chrono::milliseconds(5000);
    // -d: "start" (the marker); a command on stdin: logged, get_server_list answers while the
    // marker or a control socket exists, quit removes the marker. $MPS_FAKE_FAIL makes -d fail.
    std::ofstream(options_.control) << R"(#!/bin/sh
p="$CUDA_MPS_PIPE_DIRECTORY"
if [ "$1" = "-d" ]; then
  echo "-d $CUDA_MPS_LOG_DIRECTORY" >> "$p/../calls"
  [ -n "$MPS_FAKE_FAIL" ] && exit 1
  touch "$p/running"; exit 0
fi
read cmd
echo "$cmd" >> "$p/../calls"
case "$cmd" in
  get_server_list) [ -e "$p/running" ] || [ -S "$p/control" ] ;;
  quit) rm -f "$p/running" ;;
  *) exit 1 ;;
esac
)";
    chmod(options_.control.c_str(), 0755);
  }
  void TearDown() override {
    unsetenv("MPS_FAKE_FAIL");
    std::system(("rm -rf " + dir_).c_str());
  }
  std::string Calls() const {
    std::ifstream in(dir_ + "/calls");
    std::stringstream s;
    s << in.rdbuf();
    return s.str();
  }
  bool Running() const { return access((options_.pipe_directory + "/running").c_str(), F_OK) == 0; }

  std::string dir_;
  MpsOptions options_;
};

TEST_F(MpsTest, StartsAControlDaemonWhenNoneAnswersAndStopsItAtTheEnd) {
  {
    absl::StatusOr<std::unique_ptr<MpsControl>> mps = MpsControl::Start(options_);
    ASSERT_TRUE(mps.ok()) << mps.status();
    EXPECT_TRUE((*mps)->started_here());
    EXPECT_TRUE(Running());
    // Started in the configured directories, then asked until it answered.
    EXPECT_THAT(Calls(), HasSubstr("-d " + options_.log_directory + "\nget_server_list\n"));
    EXPECT_STREQ(getenv("CUDA_MPS_PIPE_DIRECTORY"), options_.pipe_directory.c_str());
    EXPECT_THAT(Calls(), Not(HasSubstr("quit")));
  }
  // The quit runs in a process of its own (it must outlive missiled): wait for it.
  for (int i = 0; i < 500 && Running(); ++i) usleep(10000);
  EXPECT_THAT(Calls(), HasSubstr("quit\n"));
  EXPECT_FALSE(Running());
}

TEST_F(MpsTest, UsesAControlDaemonThatAlreadyAnswersAndLeavesItRunning) {
  ASSERT_EQ(mkdir(options_.pipe_directory.c_str(), 0755), 0);
  const int fd = socket(AF_UNIX, SOCK_STREAM, 0);
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  const std::string path = options_.pipe_directory + "/control";
  path.copy(addr.sun_path, sizeof(addr.sun_path) - 1);
  ASSERT_EQ(bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)), 0);
  {
    absl::StatusOr<std::unique_ptr<MpsControl>> mps = MpsControl::Start(options_);
    ASSERT_TRUE(mps.ok()) << mps.status();
    EXPECT_FALSE((*mps)->started_here());
  }
  EXPECT_EQ(Calls(), "get_server_list\n");  // no -d, and no quit
  close(fd);
}

TEST_F(MpsTest, AFailedStartIsAnErrorThatSaysSo) {
  setenv("MPS_FAKE_FAIL", "1", 1);
  absl::StatusOr<std::unique_ptr<MpsControl>> mps = MpsControl::Start(options_);
  ASSERT_FALSE(mps.ok());
  EXPECT_THAT(std::string(mps.status().message()),
              HasSubstr("starting the MPS control daemon"));
  EXPECT_THAT(std::string(mps.status().message()), HasSubstr("exit status 1"));
}

TEST_F(MpsTest, AMissingControlProgramIsNotFound) {
  options_.control = dir_ + "/no-such-program";
  absl::StatusOr<std::unique_ptr<MpsControl>> mps = MpsControl::Start(options_);
  ASSERT_FALSE(mps.ok());
  EXPECT_EQ(mps.status().code(), absl::StatusCode::kNotFound);
}

TEST_F(MpsTest, AControlProgramThatHangsMeetsItsDeadline) {
  std::ofstream(options_.control, std::ios::trunc) << "#!/bin/sh\nsleep 30\n";
  const auto t0 = std::chrono::steady_clock::now();
  absl::Status s = RunMpsControl(options_, "", "get_server_list", std::chrono::milliseconds(300));
  EXPECT_EQ(s.code(), absl::StatusCode::kDeadlineExceeded) << s;
  EXPECT_LT(std::chrono::steady_clock::now() - t0, std::chrono::seconds(5));
}

}  // namespace
}  // namespace missile::daemon
