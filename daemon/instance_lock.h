// One missiled per socket: an exclusive flock on "<socket>.lock", taken before the daemon
// touches its sockets (or MPS, or the GPUs) and held for its whole life. A second missiled
// started on the same socket finds the lock taken and refuses to start, naming the holder's pid
// (written into the file by the holder), and changes nothing: it neither replaces nor removes
// the live sockets, nor the lock file.
// The lock file is never removed: removing it would let a third daemon lock a new file of the
// same name while the second still holds the old one. The kernel releases the lock when the
// holder exits, however it exits, so a stale file never blocks a restart.
// Thread-safety: not shared; the daemon's main thread makes one and keeps it.
#ifndef MISSILE_DAEMON_INSTANCE_LOCK_H_
#define MISSILE_DAEMON_INSTANCE_LOCK_H_

#include <string>

#include "absl/status/statusor.h"

namespace missile::daemon {

class InstanceLock {
 public:
  // Takes the lock on `path` (created 0644 if missing; a symlink is refused). FAILED_PRECONDITION
  // naming the holder when another process holds it; the errno's code when the file cannot be
  // opened.
  static absl::StatusOr<InstanceLock> Acquire(const std::string& path);

  InstanceLock(InstanceLock&& other) noexcept;
  InstanceLock& operator=(InstanceLock&& other) noexcept;
  InstanceLock(const InstanceLock&) = delete;
  InstanceLock& operator=(const InstanceLock&) = delete;
  ~InstanceLock();  // releases the lock; leaves the file

 private:
  explicit InstanceLock(int fd) : fd_(fd) {}
  int fd_ = -1;
};

// The lock file of the daemon serving `socket`.
inline std::string InstanceLockPath(const std::string& socket) { return socket + ".lock"; }

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_INSTANCE_LOCK_H_
