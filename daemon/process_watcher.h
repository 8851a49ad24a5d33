// Notices that a watched process has exited: one pidfd per watched process, one epoll thread.
//
// Owns the pidfds (opened by Watch, closed by Unwatch or at destruction), the epoll descriptor
// and the thread. Each watched process has a key (DaemonCore uses the session id). The thread
// wakes at least every 200 ms and calls `on_exit(key)` for every watched process that has
// exited, at every wake-up until the key is unwatched: a pidfd stays readable once its process
// is gone, so an exit that the callback could not act on yet is reported again.
//
// Thread-safety: Watch, Unwatch and Lives may be called from any thread, before, during or after
// the thread runs. `on_exit` runs on the watcher's thread with none of the watcher's locks held,
// so it may call Unwatch. Start and Stop are called once each, from the owner.
#ifndef MISSILE_DAEMON_PROCESS_WATCHER_H_
#define MISSILE_DAEMON_PROCESS_WATCHER_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"

namespace missile::daemon {

class ProcessWatcher {
 public:
  explicit ProcessWatcher(std::function<void(uint64_t key)> on_exit);
  // Stops the thread and closes every pidfd still open.
  ~ProcessWatcher();
  ProcessWatcher(const ProcessWatcher&) = delete;
  ProcessWatcher& operator=(const ProcessWatcher&) = delete;

  // Creates the epoll set (adding what was watched before) and starts the thread.
  absl::Status Start() ABSL_LOCKS_EXCLUDED(mu_);
  // Stops the thread (within one wake-up). The pidfds stay open and Lives keeps answering.
  void Stop();

  // Opens a pidfd for `pid` and watches it under `key`. FAILED_PRECONDITION when the process
  // cannot be watched (it is gone); ALREADY_EXISTS for a key watched already.
  absl::Status Watch(uint64_t key, int pid) ABSL_LOCKS_EXCLUDED(mu_);
  // Stops watching `key` and closes its pidfd; nothing for a key not watched.
  void Unwatch(uint64_t key) ABSL_LOCKS_EXCLUDED(mu_);
  // Whether the process watched under `key` still runs; false for a key not watched.
  bool Lives(uint64_t key) const ABSL_LOCKS_EXCLUDED(mu_);

  // Advances at every wake-up of the thread (at least every 200 ms while it runs).
  uint64_t heartbeat() const { return heartbeat_.load(std::memory_order_relaxed); }

 private:
  void Run();

  const std::function<void(uint64_t)> on_exit_;
  mutable absl::Mutex mu_;
  absl::flat_hash_map<uint64_t, int> pidfds_ ABSL_GUARDED_BY(mu_);
  int epoll_fd_ ABSL_GUARDED_BY(mu_) = -1;
  std::atomic<bool> stopping_{false};
  std::atomic<uint64_t> heartbeat_{0};
  std::thread thread_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_PROCESS_WATCHER_H_
