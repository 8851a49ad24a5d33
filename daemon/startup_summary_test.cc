#include "startup_summary.h"

#include <string>

#include "absl/strings/str_join.h"
#include "gtest/gtest.h"

namespace missile::daemon {
namespace {

TEST(StartupSummaryTest, AFewLinesNamingWhatAnOperatorChecksFirst) {
  DaemonConfig config;
  config.daemon.socket_group = "missile";
  config.daemon.admin_group = "gpu-admins";
  config.gpu.devices = std::vector<int>{0, 1};
  const std::vector<std::string> lines =
      StartupSummary(config, "/etc/missile/missiled.toml", "/var/lib/missile/policy.toml");
  EXPECT_LE(lines.size(), 8u);
  const std::string text = absl::StrJoin(lines, "\n");
  for (const char* want :
       {"configuration: /etc/missile/missiled.toml, log level info",
        "sockets: /run/missile/missiled.sock and /run/missile/missiled.sock.fd, mode 0660, group "
        "missile; policy changes: root and group gpu-admins",
        "GPUs [0, 1]: pool limit 95%", "classes: ls priority -10", "be priority 10",
        "PCIe: chunk 2", "while the LS rests 64", "pacing on (8 items, 100 us in flight per BE tenant)", "MPS off",
        "kept in /var/lib/missile/policy.toml", "missiled --check-config"}) {
    EXPECT_NE(text.find(want), std::string::npos) << "missing '" << want << "' in:\n" << text;
  }
  for (const std::string& line : lines) {
    EXPECT_EQ(line.find('\n'), std::string::npos) << "one log record per line: " << line;
  }
}

TEST(StartupSummaryTest, MpsStartWarnsThatClientsShareFate) {
  DaemonConfig config;
  EXPECT_EQ(absl::StrJoin(StartupSummary(config, "", ""), "\n").find("share fate"),
            std::string::npos);
  config.compute.mps = "start";
  config.compute.mps_pipe_directory = "/run/nvidia-mps";
  const std::vector<std::string> lines = StartupSummary(config, "", "");
  EXPECT_LE(lines.size(), 8u);
  const std::string text = absl::StrJoin(lines, "\n");
  EXPECT_NE(text.find("MPS start"), std::string::npos) << text;
  EXPECT_NE(text.find("MPS: missiled and the tenants started after it are MPS clients (pipe "
                      "directory /run/nvidia-mps); MPS clients share fate: a fault in one tenant "
                      "(an illegal address) can end every other tenant's work on that GPU"),
            std::string::npos)
      << text;
}

TEST(StartupSummaryTest, DefaultsAndNoStateFile) {
  DaemonConfig config;
  config.compute.pacing = false;
  const std::string text = absl::StrJoin(StartupSummary(config, "", ""), "\n");
  EXPECT_NE(text.find("configuration: built-in defaults"), std::string::npos) << text;
  EXPECT_NE(text.find("group of the daemon; policy changes: root only"), std::string::npos) << text;
  EXPECT_NE(text.find("all GPUs"), std::string::npos) << text;
  EXPECT_NE(text.find("pacing off"), std::string::npos) << text;
  EXPECT_NE(text.find("not kept across restarts"), std::string::npos) << text;
}

}  // namespace
}  // namespace missile::daemon
