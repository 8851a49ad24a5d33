// The few lines missiled logs about its configuration when it starts: what an operator reading
// the journal needs to recognise the set-up (sockets, access, GPUs, classes, copies, pacing,
// where policy is kept). Every value is in `missiled --check-config`, which the last line
// points to. Pure: thread-safe.
#ifndef MISSILE_DAEMON_STARTUP_SUMMARY_H_
#define MISSILE_DAEMON_STARTUP_SUMMARY_H_

#include <string>
#include <vector>

#include "config.h"

namespace missile::daemon {

// One line per topic, without a trailing newline. `config_path` is the file read ("" when the
// built-in defaults are in force); `state_file` is the state file in use ("" for none).
std::vector<std::string> StartupSummary(const DaemonConfig& config, const std::string& config_path,
                                        const std::string& state_file);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_STARTUP_SUMMARY_H_
