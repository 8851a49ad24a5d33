// DaemonCore's private helpers shared by its two source files (core.cc: sessions and tenants;
// core_policy.cc: admin policy). Not for other components.
#ifndef MISSILE_DAEMON_INTERNAL_CORE_SESSION_H_
#define MISSILE_DAEMON_INTERNAL_CORE_SESSION_H_

#include <cctype>
#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "missile/common/quote.h"
#include "missile/pcie_sched/fair_scheduler.h"

namespace missile::daemon::core_internal {

inline constexpr size_t kMaxNameBytes = 64;

// 1 to 64 letters, digits, '-', '_', '.'; INVALID_ARGUMENT (the name quoted) otherwise.
inline absl::Status ValidateName(const std::string& name) {
  if (name.empty() || name.size() > kMaxNameBytes) {
    return absl::InvalidArgumentError("tenant name must be 1 to 64 bytes, got " +
                                      std::to_string(name.size()));
  }
  for (char c : name) {
    if (!(isalnum(static_cast<unsigned char>(c)) || c == '-' || c == '_' || c == '.')) {
      return absl::InvalidArgumentError("tenant name " + QuoteString(name) +
                                        " may hold only letters, digits, '-', '_' and '.'");
    }
  }
  return absl::OkStatus();
}

// The PCIe weight of a nice-like priority.
inline uint32_t WeightOf(int priority) {
  absl::StatusOr<uint32_t> w = pcie::WeightFromPriority(priority);
  return w.ok() ? *w : 1024;
}

}  // namespace missile::daemon::core_internal

#endif  // MISSILE_DAEMON_INTERNAL_CORE_SESSION_H_
