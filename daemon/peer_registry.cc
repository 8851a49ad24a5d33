#include "peer_registry.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <vector>

namespace missile::daemon {

PeerRegistry::PeerRegistry(ConnectionLimits limits) : limits_(limits) {}

PeerRegistry::~PeerRegistry() {
  absl::MutexLock lock(&mu_);
  for (auto& [fd, entry] : by_fd_) {
    if (entry.watch >= 0) close(entry.watch);
  }
}

bool PeerRegistry::StillOpen(int fd, const Entry& entry) {
  struct stat st;
  return fstat(fd, &st) == 0 && st.st_dev == entry.dev && st.st_ino == entry.ino;
}

void PeerRegistry::EraseLocked(int fd) {
  auto it = by_fd_.find(fd);
  if (it == by_fd_.end()) return;
  if (it->second.watch >= 0) close(it->second.watch);
  auto uid = of_uid_.find(it->second.creds.uid);
  if (uid != of_uid_.end() && --uid->second == 0) of_uid_.erase(uid);
  by_fd_.erase(it);
}

void PeerRegistry::SweepLocked(std::optional<uid_t> uid) {
  std::vector<int> closed;
  for (const auto& [fd, entry] : by_fd_) {
    if (uid && entry.creds.uid != *uid) continue;
    if (!StillOpen(fd, entry)) closed.push_back(fd);
  }
  for (int fd : closed) EraseLocked(fd);
}

bool PeerRegistry::Insert(int fd, const PeerCredentials& creds, bool need_watch) {
  Entry entry;
  entry.creds = creds;
  struct stat st;
  if (fstat(fd, &st) == 0) {
    entry.dev = st.st_dev;
    entry.ino = st.st_ino;
  }
  entry.watch = fcntl(fd, F_DUPFD_CLOEXEC, 0);
  if (entry.watch < 0 && need_watch) return false;
  entry.active = Clock::now();
  absl::MutexLock lock(&mu_);
  EraseLocked(fd);  // a stale entry under the same number
  by_fd_[fd] = entry;
  ++of_uid_[creds.uid];
  // A sweep each time the map has doubled since the last one keeps the cost amortised O(1)
  // per connection and the map within twice the open connections.
  if (by_fd_.size() >= next_sweep_) {
    SweepLocked(std::nullopt);
    next_sweep_ = std::max<size_t>(64, 2 * by_fd_.size());
  }
  return true;
}

void PeerRegistry::Record(int fd, const PeerCredentials& creds) {
  Insert(fd, creds, /*need_watch=*/false);
}

size_t PeerRegistry::OfUidLocked(uid_t uid) const {
  auto it = of_uid_.find(uid);
  return it == of_uid_.end() ? 0 : it->second;
}

absl::Status PeerRegistry::Admit(int fd, const PeerCredentials& creds,
                                 const std::function<bool()>& is_admin) {
  const char* full = nullptr;
  {
    absl::MutexLock lock(&mu_);
    // At a cap, first drop what gRPC has closed since: the counts must be of open connections.
    if (OfUidLocked(creds.uid) >= limits_.per_uid) SweepLocked(creds.uid);
    if (by_fd_.size() >= limits_.total) SweepLocked(std::nullopt);
    if (OfUidLocked(creds.uid) >= limits_.per_uid) {
      full = "too many connections of this uid (limits.max_connections_per_uid)";
    } else if (by_fd_.size() >= limits_.total) {
      full = "too many connections (limits.max_connections)";
    }
  }
  // Asked outside the lock: it may read the group database.
  if (full != nullptr && !is_admin()) return absl::ResourceExhaustedError(full);
  if (!Insert(fd, creds, /*need_watch=*/true)) {
    return absl::ResourceExhaustedError("out of descriptors");
  }
  return absl::OkStatus();
}

std::optional<int> PeerRegistry::FdOf(const std::string& peer) {
  // "fd:12", which gRPC may percent-encode ("fd%3A12"): the number is the trailing digits.
  if (peer.find("fd") == std::string::npos) return std::nullopt;
  const size_t last = peer.find_last_not_of("0123456789");
  if (last == std::string::npos || last + 1 == peer.size()) return std::nullopt;
  return atoi(peer.c_str() + last + 1);
}

std::optional<PeerCredentials> PeerRegistry::Lookup(const std::string& peer) {
  std::optional<int> fd = FdOf(peer);
  if (!fd) return std::nullopt;
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(*fd);
  if (it == by_fd_.end()) return std::nullopt;
  if (!StillOpen(*fd, it->second)) {
    EraseLocked(*fd);
    return std::nullopt;
  }
  it->second.active = Clock::now();
  return it->second.creds;
}

void PeerRegistry::MarkSession(const std::string& peer) {
  std::optional<int> fd = FdOf(peer);
  if (!fd) return;
  absl::MutexLock lock(&mu_);
  auto it = by_fd_.find(*fd);
  if (it != by_fd_.end() && StillOpen(*fd, it->second)) it->second.session = true;
}

size_t PeerRegistry::ExpireIdle(Clock::time_point now) {
  absl::MutexLock lock(&mu_);
  SweepLocked(std::nullopt);
  size_t shut = 0;
  for (auto& [fd, entry] : by_fd_) {
    if (entry.session || entry.shut || entry.watch < 0) continue;
    if (now - entry.active < limits_.idle_timeout) continue;
    // Through our duplicate: the socket itself, whatever gRPC's number names by now. gRPC reads
    // end of stream and closes its descriptor; a later sweep drops the entry.
    shutdown(entry.watch, SHUT_RDWR);
    entry.shut = true;
    ++shut;
  }
  return shut;
}

size_t PeerRegistry::size() const {
  absl::MutexLock lock(&mu_);
  return by_fd_.size();
}

size_t PeerRegistry::OpenOf(uid_t uid) {
  absl::MutexLock lock(&mu_);
  SweepLocked(uid);
  return OfUidLocked(uid);
}

size_t PeerRegistry::OpenTotal() {
  absl::MutexLock lock(&mu_);
  SweepLocked(std::nullopt);
  return by_fd_.size();
}

}  // namespace missile::daemon
