#include "sd_notify.h"

#include <sys/socket.h>
#include <sys/un.h>
#include <unistd.h>

#include <cstdlib>
#include <cstring>

namespace missile::daemon {

bool SdNotify(const std::string& state) {
  const char* path = getenv("NOTIFY_SOCKET");
  if (path == nullptr || path[0] == '\0') return true;
  sockaddr_un addr{};
  addr.sun_family = AF_UNIX;
  size_t len = strlen(path);
  if (len >= sizeof(addr.sun_path)) return false;
  memcpy(addr.sun_path, path, len);
  if (addr.sun_path[0] == '@') addr.sun_path[0] = '\0';  // abstract namespace
  int fd = socket(AF_UNIX, SOCK_DGRAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return false;
  socklen_t addr_len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + len);
  bool ok = sendto(fd, state.data(), state.size(), MSG_NOSIGNAL,
                   reinterpret_cast<sockaddr*>(&addr), addr_len) == static_cast<ssize_t>(state.size());
  close(fd);
  return ok;
}

std::optional<std::chrono::microseconds> SdWatchdogInterval() {
  const char* usec = getenv("WATCHDOG_USEC");
  if (usec == nullptr) return std::nullopt;
  const char* pid = getenv("WATCHDOG_PID");
  if (pid != nullptr && atoi(pid) != getpid()) return std::nullopt;
  long long v = atoll(usec);
  if (v <= 0) return std::nullopt;
  return std::chrono::microseconds(v);
}

}  // namespace missile::daemon
