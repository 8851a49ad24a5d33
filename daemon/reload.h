// What a configuration re-read (SIGHUP) may change while missiled runs, and what needs a
// restart. Pure: compares two parsed configurations.
//
// Live: `daemon.log_level` and every `[compute]` pacing key (the same values `missilectl set`
// changes). Everything else (sockets, groups, GPUs, pools, quotas, PCIe, MPS) is fixed at start:
// a changed value is reported by key and left as it is until the next start.
#ifndef MISSILE_DAEMON_RELOAD_H_
#define MISSILE_DAEMON_RELOAD_H_

#include <optional>
#include <string>
#include <vector>

#include "config.h"
#include "pacing_domain.h"

namespace missile::daemon {

struct ReloadPlan {
  std::optional<std::string> log_level;  // the new level, when it changed
  std::optional<PacingSettings> pacing;  // the new pacing policy, when any [compute] key changed
  std::vector<std::string> live_keys;     // the live keys that changed, e.g. "compute.window_us"
  std::vector<std::string> restart_keys;  // changed keys that need a restart
  bool empty() const { return live_keys.empty() && restart_keys.empty(); }
};

ReloadPlan PlanReload(const DaemonConfig& running, const DaemonConfig& next);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_RELOAD_H_
