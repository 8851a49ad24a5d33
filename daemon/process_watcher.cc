#include "process_watcher.h"

#include <poll.h>
#include <sys/epoll.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace missile::daemon {

ProcessWatcher::ProcessWatcher(std::function<void(uint64_t key)> on_exit)
    : on_exit_(std::move(on_exit)) {}

ProcessWatcher::~ProcessWatcher() {
  Stop();
  absl::MutexLock lock(&mu_);
  for (const auto& [key, pidfd] : pidfds_) close(pidfd);
  pidfds_.clear();
  if (epoll_fd_ >= 0) close(epoll_fd_);
  epoll_fd_ = -1;
}

absl::Status ProcessWatcher::Start() {
  {
    absl::MutexLock lock(&mu_);
    epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
    if (epoll_fd_ < 0) {
      return absl::InternalError(std::string("epoll_create1: ") + strerror(errno));
    }
    for (const auto& [key, pidfd] : pidfds_) {
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.u64 = key;
      epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &ev);
    }
  }
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void ProcessWatcher::Stop() {
  stopping_ = true;
  if (thread_.joinable()) thread_.join();
}

absl::Status ProcessWatcher::Watch(uint64_t key, int pid) {
  const int pidfd = static_cast<int>(syscall(SYS_pidfd_open, pid, 0));
  if (pidfd < 0) {
    return absl::FailedPreconditionError("cannot watch process " + std::to_string(pid) + ": " +
                                         strerror(errno));
  }
  absl::MutexLock lock(&mu_);
  if (!pidfds_.emplace(key, pidfd).second) {
    close(pidfd);
    return absl::AlreadyExistsError("process key " + std::to_string(key) + " is watched already");
  }
  if (epoll_fd_ >= 0) {
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = key;
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, pidfd, &ev);
  }
  return absl::OkStatus();
}

void ProcessWatcher::Unwatch(uint64_t key) {
  absl::MutexLock lock(&mu_);
  auto it = pidfds_.find(key);
  if (it == pidfds_.end()) return;
  if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->second, nullptr);
  close(it->second);
  pidfds_.erase(it);
}

bool ProcessWatcher::Lives(uint64_t key) const {
  absl::MutexLock lock(&mu_);
  auto it = pidfds_.find(key);
  if (it == pidfds_.end()) return false;
  // A pidfd turns readable when its process exits.
  pollfd p{it->second, POLLIN, 0};
  return poll(&p, 1, 0) == 0;
}

void ProcessWatcher::Run() {
  int epoll_fd;
  {
    absl::MutexLock lock(&mu_);
    epoll_fd = epoll_fd_;  // fixed from Start until destruction
  }
  epoll_event events[32];
  while (!stopping_) {
    heartbeat_.fetch_add(1, std::memory_order_relaxed);
    const int n = epoll_wait(epoll_fd, events, 32, 200);
    for (int i = 0; i < n; ++i) on_exit_(events[i].data.u64);
  }
}

}  // namespace missile::daemon
