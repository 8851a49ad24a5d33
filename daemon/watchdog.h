// The systemd watchdog, pinged only while the daemon's loops are alive.
//
// Each loop that must keep running (the core's process watcher, every GPU's copy arbiter and
// pacing domain sampler) advances a heartbeat counter on every turn, and turns at least every
// few hundred milliseconds even when idle. The watchdog thread reads every counter once per
// period (half of systemd's WatchdogSec) and pings only when each one advanced since its last
// reading: a loop that hangs (a deadlock, a stuck driver call) stops the pings, and systemd
// restarts the daemon (Restart=on-failure) instead of leaving it serving nothing.
// Thread-safety: Watchdog's methods are called from one thread (the daemon's main thread);
// the heartbeat readers it is given are called from its own thread.
#ifndef MISSILE_DAEMON_WATCHDOG_H_
#define MISSILE_DAEMON_WATCHDOG_H_

#include <chrono>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "absl/synchronization/notification.h"

namespace missile::daemon {

// A loop's name (for the log) and how to read its heartbeat.
struct Heartbeat {
  std::string name;
  std::function<uint64_t()> read;
};

// The names of the loops whose count did not advance from `before` to `now` (both in the order
// of `names`); empty when every loop is alive, and the watchdog may ping. Pure.
std::vector<std::string> StalledLoops(const std::vector<std::string>& names,
                                      const std::vector<uint64_t>& before,
                                      const std::vector<uint64_t>& now);

class Watchdog {
 public:
  // `ping` is called once per `period` while every heartbeat advanced (SdNotify("WATCHDOG=1")
  // in the daemon).
  Watchdog(std::chrono::milliseconds period, std::vector<Heartbeat> heartbeats,
           std::function<void()> ping);
  ~Watchdog();  // Stop()
  Watchdog(const Watchdog&) = delete;
  Watchdog& operator=(const Watchdog&) = delete;

  void Start();
  void Stop();

 private:
  void Run();
  std::vector<uint64_t> Read() const;

  const std::chrono::milliseconds period_;
  const std::vector<Heartbeat> heartbeats_;
  const std::function<void()> ping_;
  absl::Notification stop_;
  std::thread thread_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_WATCHDOG_H_
