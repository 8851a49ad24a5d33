#include "reload.h"

#include <map>
#include <span>
#include <sstream>
#include <string_view>

#include "gpu_setup.h"
#include "missile/common/compute_settings.h"
#include "missile/common/pcie_settings.h"

namespace missile::daemon {
namespace {

// DescribeConfig's "key = value  # note" lines as key -> value: one line per key, every key.
std::map<std::string, std::string> Values(const DaemonConfig& config) {
  std::map<std::string, std::string> out;
  std::istringstream in(DescribeConfig(config));
  std::string line;
  while (std::getline(in, line)) {
    const size_t eq = line.find(" = ");
    if (eq == std::string::npos) continue;
    std::string value = line.substr(eq + 3);
    if (const size_t note = value.find("  # "); note != std::string::npos) value.resize(note);
    out[line.substr(0, eq)] = value;
  }
  return out;
}

// The keys a reload applies without a restart: the log level and the live settings of
// compute_settings.inc and pcie_settings.inc.
bool Live(const std::string& key) {
  if (key == "daemon.log_level") return true;
  const std::string_view name = key;
  const size_t dot = name.find('.');
  if (dot == std::string_view::npos) return false;
  for (std::span<const settings::Setting> table :
       {std::span<const settings::Setting>(settings::kComputeSettings),
        std::span<const settings::Setting>(settings::kPcieSettings)}) {
    const settings::Setting* setting =
        settings::FindSetting(table, name.substr(0, dot), name.substr(dot + 1));
    if (setting != nullptr) return setting->live;
  }
  return false;
}

}  // namespace

ReloadPlan PlanReload(const DaemonConfig& running, const DaemonConfig& next) {
  ReloadPlan plan;
  const std::map<std::string, std::string> before = Values(running);
  const std::map<std::string, std::string> after = Values(next);
  for (const auto& [key, value] : after) {
    auto it = before.find(key);
    if (it != before.end() && it->second == value) continue;
    (Live(key) ? plan.live_keys : plan.restart_keys).push_back(key);
  }
  for (const std::string& key : plan.live_keys) {
    if (key == "daemon.log_level") {
      plan.log_level = next.daemon.log_level;
    } else {
      plan.pacing = PacingSettingsOf(next.compute);
    }
  }
  return plan;
}

}  // namespace missile::daemon
