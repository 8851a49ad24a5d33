#include "session_registry.h"

#include <algorithm>
#include <string>
#include <utility>

#include "absl/time/time.h"

namespace missile::daemon {

SessionRegistry::SessionRegistry(uint64_t first_id, size_t max_sessions_per_uid)
    : max_sessions_per_uid_(max_sessions_per_uid), next_id_(first_id) {}

size_t SessionRegistry::SessionsOfUidLocked(unsigned uid) const {
  size_t n = 0;
  for (const auto& [id, s] : sessions_) n += s->creds.uid == uid;
  for (const auto& [id, r] : reserved_) n += r.creds.uid == uid;
  return n;
}

absl::StatusOr<SessionRegistry::Reservation> SessionRegistry::Reserve(const PeerCredentials& creds,
                                                                      bool capped) {
  absl::MutexLock lock(&mu_);
  while (true) {
    if (closed_) return absl::UnavailableError("daemon stopping");
    auto it = session_by_pid_.find(creds.pid);
    if (it == session_by_pid_.end()) break;
    if (auto s = sessions_.find(it->second); s != sessions_.end()) {
      return Reservation{0, *s->second};  // the process registered already
    }
    changed_.Wait(&mu_);  // another registration of the process is under way
  }
  if (capped) {
    const size_t of_uid = SessionsOfUidLocked(creds.uid);
    if (of_uid >= max_sessions_per_uid_) {
      return absl::ResourceExhaustedError(
          "uid " + std::to_string(creds.uid) + " already has " + std::to_string(of_uid) +
          " sessions, the most one uid may hold (limits.max_sessions_per_uid); end one first");
    }
  }
  const uint64_t id = next_id_++;
  reserved_[id] = Reserved{creds};
  session_by_pid_[creds.pid] = id;
  return Reservation{id, std::nullopt};
}

void SessionRegistry::DropReservedLocked(uint64_t id) {
  auto it = reserved_.find(id);
  if (it == reserved_.end()) return;
  if (auto p = session_by_pid_.find(it->second.creds.pid);
      p != session_by_pid_.end() && p->second == id) {
    session_by_pid_.erase(p);
  }
  reserved_.erase(it);
  changed_.SignalAll();
}

absl::Status SessionRegistry::Publish(const SessionInfo& info) {
  absl::MutexLock lock(&mu_);
  auto it = reserved_.find(info.id);
  if (it == reserved_.end()) {
    return absl::FailedPreconditionError("session " + std::to_string(info.id) +
                                         " was not reserved");
  }
  if (closed_ || it->second.ended) {
    const bool ended = it->second.ended;
    DropReservedLocked(info.id);
    return absl::UnavailableError(ended ? "session " + std::to_string(info.id) +
                                              " ended while it registered"
                                        : std::string("daemon stopping"));
  }
  reserved_.erase(it);
  auto published = std::make_shared<SessionInfo>(info);
  published->ended = false;
  sessions_[info.id] = std::move(published);
  changed_.SignalAll();
  return absl::OkStatus();
}

void SessionRegistry::Abort(uint64_t id) {
  absl::MutexLock lock(&mu_);
  DropReservedLocked(id);
}

std::optional<SessionInfo> SessionRegistry::End(uint64_t id) {
  std::optional<SessionInfo> ended;
  {
    absl::MutexLock lock(&mu_);
    if (auto r = reserved_.find(id); r != reserved_.end()) {
      r->second.ended = true;  // its Publish fails, and its registration undoes itself
      return std::nullopt;
    }
    auto it = sessions_.find(id);
    if (it == sessions_.end()) return std::nullopt;
    std::shared_ptr<SessionInfo> s = it->second;
    sessions_.erase(it);
    session_by_pid_.erase(s->creds.pid);
    s->ended = true;
    changed_.SignalAll();
    ended = *s;
  }
  NotifyWatchers(id, /*ended=*/true);
  return ended;
}

std::vector<uint64_t> SessionRegistry::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
  std::vector<uint64_t> ids;
  for (const auto& [id, s] : sessions_) ids.push_back(id);
  changed_.SignalAll();
  return ids;
}

void SessionRegistry::WakeAll() {
  absl::MutexLock lock(&mu_);
  woken_ = true;
  changed_.SignalAll();
}

absl::StatusOr<std::shared_ptr<SessionInfo>> SessionRegistry::FindLocked(
    const PeerCredentials& creds, uint64_t id) const {
  auto it = sessions_.find(id);
  if (it == sessions_.end() || it->second->ended) {
    return absl::NotFoundError("no session " + std::to_string(id));
  }
  if (it->second->creds.pid != creds.pid) {
    return absl::PermissionDeniedError("session " + std::to_string(id) +
                                       " belongs to another process");
  }
  return it->second;
}

absl::StatusOr<SessionInfo> SessionRegistry::Find(const PeerCredentials& creds,
                                                  uint64_t id) const {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::shared_ptr<SessionInfo>> s = FindLocked(creds, id);
  if (!s.ok()) return s.status();
  return **s;
}

std::vector<SessionInfo> SessionRegistry::List() const {
  std::vector<SessionInfo> out;
  {
    absl::MutexLock lock(&mu_);
    for (const auto& [id, s] : sessions_) out.push_back(*s);
  }
  std::sort(out.begin(), out.end(), [](const auto& a, const auto& b) { return a.id < b.id; });
  return out;
}

absl::StatusOr<SessionInfo> SessionRegistry::Update(
    uint64_t id, const std::function<void(SessionInfo&)>& change) {
  absl::MutexLock lock(&mu_);
  auto it = sessions_.find(id);
  if (it == sessions_.end()) return absl::NotFoundError("no session " + std::to_string(id));
  SessionInfo& info = *it->second;
  change(info);
  ++info.generation;
  changed_.SignalAll();
  return info;
}

absl::StatusOr<SessionInfo> SessionRegistry::WaitForChange(const PeerCredentials& creds,
                                                           uint64_t id, uint64_t seen,
                                                           const std::function<bool()>& cancelled) {
  absl::MutexLock lock(&mu_);
  absl::StatusOr<std::shared_ptr<SessionInfo>> found = FindLocked(creds, id);
  if (!found.ok()) return found.status();
  const std::shared_ptr<SessionInfo> held = *std::move(found);
  while (!held->ended && held->generation <= seen && !woken_) {
    changed_.WaitWithTimeout(&mu_, absl::Milliseconds(200));
    if (cancelled()) break;
  }
  return *held;
}

void SessionRegistry::AddLingering(uint64_t id) {
  absl::MutexLock lock(&mu_);
  lingering_.insert(id);
}

bool SessionRegistry::TakeLingering(uint64_t id) {
  absl::MutexLock lock(&mu_);
  return lingering_.erase(id) > 0;
}

std::vector<uint64_t> SessionRegistry::TakeAllLingering() {
  absl::MutexLock lock(&mu_);
  std::vector<uint64_t> ids(lingering_.begin(), lingering_.end());
  lingering_.clear();
  return ids;
}

absl::StatusOr<uint64_t> SessionRegistry::AddWatcher(const PeerCredentials& creds, uint64_t id,
                                                     size_t max_watchers,
                                                     std::function<void()> on_change) {
  absl::MutexLock lock(&watchers_mu_);
  if (absl::StatusOr<SessionInfo> s = Find(creds, id); !s.ok()) return s.status();
  auto& of_session = watchers_[id];
  if (of_session.size() >= max_watchers) {
    return absl::ResourceExhaustedError("session " + std::to_string(id) + " already has " +
                                        std::to_string(of_session.size()) + " watch streams");
  }
  const uint64_t watcher = next_watcher_++;
  of_session.emplace(watcher, std::move(on_change));
  return watcher;
}

void SessionRegistry::RemoveWatcher(uint64_t id, uint64_t watcher) {
  absl::MutexLock lock(&watchers_mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  it->second.erase(watcher);
  if (it->second.empty()) watchers_.erase(it);
}

void SessionRegistry::NotifyWatchers(uint64_t id, bool ended) {
  absl::MutexLock lock(&watchers_mu_);
  auto it = watchers_.find(id);
  if (it == watchers_.end()) return;
  for (auto& [watcher, fn] : it->second) fn();
  if (ended) watchers_.erase(it);
}

}  // namespace missile::daemon
