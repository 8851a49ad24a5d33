// The systemd notification protocol (sd_notify(3)), without linking libsystemd: a datagram to
// the socket named by $NOTIFY_SOCKET. Outside systemd (no $NOTIFY_SOCKET) every call is a no-op.
// Thread-safety: reentrant.
#ifndef MISSILE_DAEMON_SD_NOTIFY_H_
#define MISSILE_DAEMON_SD_NOTIFY_H_

#include <chrono>
#include <optional>
#include <string>

namespace missile::daemon {

// Sends `state` (e.g. "READY=1", "WATCHDOG=1", "STOPPING=1"). Returns false on failure.
bool SdNotify(const std::string& state);

// The watchdog interval systemd expects pings within ($WATCHDOG_USEC for this pid), if any.
std::optional<std::chrono::microseconds> SdWatchdogInterval();

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_SD_NOTIFY_H_
