// `missilectl top` on a real terminal: run in a tmux pane (its own server socket) against
// missiled on the driver test double with one tenant. capture-pane must show the tenant's row;
// send-keys q must end it with status 0 and leave the terminal as it was (stty settings equal
// before and after, the alternate screen left); missiled stopping under it must end it with
// status 1 and "missiled went away". Also: one frame when stdout is not a terminal.
#include <unistd.h>

#include <chrono>
#include <fstream>
#include <string>
#include <thread>

#include "daemon_process_fixture.h"

namespace missile::process_test {
namespace {

class TopTest : public DaemonTest {
 protected:
  void TearDown() override {
    if (!tmux_socket_.empty()) Tmux({"kill-server"});
    DaemonTest::TearDown();
  }

  ProcessResult Tmux(std::vector<std::string> args) {
    args.insert(args.begin(), {TMUX_BIN, "-S", tmux_socket_});
    return testing::Run(args, {{"TERM", "xterm-256color"}, {"HOME", dir_.path()}}, 20);
  }

  std::string Capture() { return Tmux({"capture-pane", "-p", "-t", "top"}).out; }

  // Polls the pane until it shows `text` (at most 20 s); the last capture.
  std::string CaptureUntil(const std::string& text) {
    std::string screen;
    for (int i = 0; i < 200; ++i) {
      screen = Capture();
      if (screen.find(text) != std::string::npos) return screen;
      std::this_thread::sleep_for(std::chrono::milliseconds(100));
    }
    return screen;
  }

  std::string tmux_socket_;
};

TEST_F(TopTest, ShowsTheTenantAndQuitsOnQRestoringTheTerminal) {
  ASSERT_TRUE(std::string(TMUX_BIN).size() > 0)
      << "tmux was not found when configuring (scripts/install-deps.sh installs it)";
  StartDaemon();
  Child web;
  ASSERT_TRUE(web.Start({TENANT_PROBE, "alloc:16", "hold"}, TenantEnv("ls", "webtop")));
  ASSERT_EQ(web.WaitForLine("ready"), "ready");

  const std::string d = dir_.path();
  tmux_socket_ = d + "/tmux.sock";
  // The pane's shell notes the terminal's settings, runs top, notes its exit status and the
  // settings again, then waits to be killed.
  const std::string script = "stty -g > " + d + "/stty.before; " + MISSILECTL + " --socket " +
                             socket_ + " top --interval 0.2; echo $? > " + d + "/top.rc; stty -g > " +
                             d + "/stty.after; echo top-ended; sleep 60";
  std::ofstream(d + "/pane.sh") << script << "\n";
  ProcessResult started = Tmux({"new-session", "-d", "-s", "top", "-x", "200", "-y", "40",
                                "sh " + d + "/pane.sh"});
  ASSERT_EQ(started.exit_code, 0) << started.err;

  std::string screen = CaptureUntil("webtop");
  EXPECT_NE(screen.find("webtop"), std::string::npos) << screen;
  EXPECT_NE(screen.find("16.0 MiB / "), std::string::npos) << screen;
  EXPECT_NE(screen.find("MEMORY / QUOTA"), std::string::npos) << screen;
  EXPECT_NE(screen.find(std::to_string(web.pid())), std::string::npos) << screen;

  ASSERT_EQ(Tmux({"send-keys", "-t", "top", "q"}).exit_code, 0);
  screen = CaptureUntil("top-ended");
  ASSERT_NE(screen.find("top-ended"), std::string::npos) << screen;
  EXPECT_EQ(testing::ReadFile(d + "/top.rc"), "0\n");
  const std::string before = testing::ReadFile(d + "/stty.before");
  EXPECT_FALSE(before.empty());
  EXPECT_EQ(testing::ReadFile(d + "/stty.after"), before);
  // The alternate screen was left: the view's table is gone from the pane.
  EXPECT_EQ(screen.find("MEMORY / QUOTA"), std::string::npos) << screen;
  web.CloseStdin();
  EXPECT_EQ(web.Wait(), 0);
}

// missiled stopping under the view: top printed "CANCELLED: CANCELLED". It must say the daemon
// went away, exit with status 1 and leave the terminal as it was.
TEST_F(TopTest, SaysMissiledWentAwayWhenItStops) {
  StartDaemon();
  const std::string d = dir_.path();
  tmux_socket_ = d + "/tmux.sock";
  const std::string script = "stty -g > " + d + "/stty.before; " + MISSILECTL + " --socket " +
                             socket_ + " top --interval 0.1 2> " + d + "/top.err; echo $? > " +
                             d + "/top.rc; stty -g > " + d + "/stty.after; echo top-ended; " +
                             "sleep 60";
  std::ofstream(d + "/pane.sh") << script << "\n";
  ProcessResult started = Tmux({"new-session", "-d", "-s", "top", "-x", "200", "-y", "40",
                                "sh " + d + "/pane.sh"});
  ASSERT_EQ(started.exit_code, 0) << started.err;
  std::string screen = CaptureUntil("LEASED / CAPACITY");
  ASSERT_NE(screen.find("LEASED / CAPACITY"), std::string::npos) << screen;

  StopDaemon();
  screen = CaptureUntil("top-ended");
  ASSERT_NE(screen.find("top-ended"), std::string::npos) << screen;
  EXPECT_EQ(testing::ReadFile(d + "/top.rc"), "1\n");
  EXPECT_EQ(testing::ReadFile(d + "/top.err"),
            "missilectl: missiled went away (" + socket_ +
                "): it stopped or restarted while top ran; check 'systemctl status missiled'\n");
  EXPECT_EQ(testing::ReadFile(d + "/stty.after"), testing::ReadFile(d + "/stty.before"));
}

TEST_F(TopTest, PrintsOneFrameWhenStdoutIsNotATerminal) {
  StartDaemon();
  Child web;
  ASSERT_TRUE(web.Start({TENANT_PROBE, "alloc:16", "hold"}, TenantEnv("be", "batchtop")));
  ASSERT_EQ(web.WaitForLine("ready"), "ready");
  ProcessResult r = testing::Run({MISSILECTL, "--socket", socket_, "top"}, {}, 20);
  EXPECT_EQ(r.exit_code, 0) << r.err;
  EXPECT_NE(r.out.find("batchtop"), std::string::npos) << r.out;
  EXPECT_EQ(r.out.find("\x1b["), std::string::npos) << "escape sequences in a pipe";
  ProcessResult bad = testing::Run({MISSILECTL, "--socket", socket_, "top", "--interval", "0"});
  EXPECT_EQ(bad.exit_code, 2);
  EXPECT_NE(bad.err.find("--interval: '0' is not seconds in [0.1, 3600]"), std::string::npos)
      << bad.err;
  web.CloseStdin();
  EXPECT_EQ(web.Wait(), 0);
}

}  // namespace
}  // namespace missile::process_test
