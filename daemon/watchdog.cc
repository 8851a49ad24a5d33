#include "watchdog.h"

#include <utility>

#include "absl/strings/str_join.h"
#include "absl/time/time.h"
#include "logger.h"

namespace missile::daemon {

std::vector<std::string> StalledLoops(const std::vector<std::string>& names,
                                      const std::vector<uint64_t>& before,
                                      const std::vector<uint64_t>& now) {
  std::vector<std::string> stalled;
  for (size_t i = 0; i < names.size(); ++i) {
    if (i >= before.size() || i >= now.size() || now[i] == before[i]) stalled.push_back(names[i]);
  }
  return stalled;
}

Watchdog::Watchdog(std::chrono::milliseconds period, std::vector<Heartbeat> heartbeats,
                   std::function<void()> ping)
    : period_(period), heartbeats_(std::move(heartbeats)), ping_(std::move(ping)) {}

Watchdog::~Watchdog() { Stop(); }

void Watchdog::Start() {
  thread_ = std::thread([this] { Run(); });
}

void Watchdog::Stop() {
  if (!stop_.HasBeenNotified()) stop_.Notify();
  if (thread_.joinable()) thread_.join();
}

std::vector<uint64_t> Watchdog::Read() const {
  std::vector<uint64_t> counts;
  counts.reserve(heartbeats_.size());
  for (const Heartbeat& h : heartbeats_) counts.push_back(h.read());
  return counts;
}

void Watchdog::Run() {
  std::vector<std::string> names;
  for (const Heartbeat& h : heartbeats_) names.push_back(h.name);
  auto log = GetLogger(kCoreLog);
  ping_();  // the loops were started just before: alive
  std::vector<uint64_t> before = Read();
  while (!stop_.WaitForNotificationWithTimeout(absl::FromChrono(period_))) {
    std::vector<uint64_t> now = Read();
    std::vector<std::string> stalled = StalledLoops(names, before, now);
    if (stalled.empty()) {
      ping_();
    } else {
      log->critical("watchdog: not pinging systemd: no progress for {} ms in {}",
                    period_.count(), absl::StrJoin(stalled, ", "));
    }
    before = std::move(now);
  }
}

}  // namespace missile::daemon
