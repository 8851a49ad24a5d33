#include "instance_lock.h"

#include <fcntl.h>
#include <sys/file.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "absl/strings/numbers.h"
#include "absl/strings/strip.h"

namespace missile::daemon {
namespace {

// The pid the holder wrote, or "" when the file holds none.
std::string HolderOf(int fd) {
  char buf[32] = {};
  ssize_t n = pread(fd, buf, sizeof(buf) - 1, 0);
  if (n <= 0) return "";
  std::string text(buf, static_cast<size_t>(n));
  int pid = 0;
  if (!absl::SimpleAtoi(absl::StripAsciiWhitespace(text), &pid) || pid <= 0) return "";
  return std::to_string(pid);
}

}  // namespace

absl::StatusOr<InstanceLock> InstanceLock::Acquire(const std::string& path) {
  int fd = open(path.c_str(), O_RDWR | O_CREAT | O_CLOEXEC | O_NOFOLLOW, 0644);
  if (fd < 0) {
    const int err = errno;
    return absl::ErrnoToStatus(err, "cannot open the lock file " + path + ": " + strerror(err));
  }
  if (flock(fd, LOCK_EX | LOCK_NB) != 0) {
    const int err = errno;
    std::string holder = err == EWOULDBLOCK ? HolderOf(fd) : "";
    close(fd);
    if (err != EWOULDBLOCK) {
      return absl::ErrnoToStatus(err, "cannot lock " + path + ": " + strerror(err));
    }
    return absl::FailedPreconditionError(
        "another missiled" + (holder.empty() ? std::string() : " (pid " + holder + ")") +
        " is serving this socket: it holds " + path + "; stop it first (nothing was changed)");
  }
  // Ours now: say who holds it, for the next one that tries.
  const std::string pid = std::to_string(getpid()) + "\n";
  if (ftruncate(fd, 0) != 0 || pwrite(fd, pid.data(), pid.size(), 0) < 0) {
    // The lock holds all the same; only the message of a second daemon names no pid.
  }
  return InstanceLock(fd);
}

InstanceLock::InstanceLock(InstanceLock&& other) noexcept : fd_(other.fd_) { other.fd_ = -1; }

InstanceLock& InstanceLock::operator=(InstanceLock&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) close(fd_);
    fd_ = other.fd_;
    other.fd_ = -1;
  }
  return *this;
}

InstanceLock::~InstanceLock() {
  if (fd_ >= 0) close(fd_);
}

}  // namespace missile::daemon
