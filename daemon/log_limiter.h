// Rate limiting for warnings that a peer can trigger at will (refused connections, accept
// failures under descriptor exhaustion), so that a flood of them cannot flood the log.
// Thread-safety: Allow may be called from any thread.
#ifndef MISSILE_DAEMON_LOG_LIMITER_H_
#define MISSILE_DAEMON_LOG_LIMITER_H_

#include <chrono>
#include <cstdint>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace missile::daemon {

class LogLimiter {
 public:
  explicit LogLimiter(std::chrono::steady_clock::duration interval) : interval_(interval) {}

  // True at most once per interval. `suppressed` gets the number of calls answered false since
  // the last true one, for the message to mention.
  bool Allow(uint64_t* suppressed) {
    absl::MutexLock lock(&mu_);
    auto now = std::chrono::steady_clock::now();
    if (logged_once_ && now - last_ < interval_) {
      ++suppressed_;
      return false;
    }
    logged_once_ = true;
    last_ = now;
    *suppressed = suppressed_;
    suppressed_ = 0;
    return true;
  }

 private:
  const std::chrono::steady_clock::duration interval_;
  absl::Mutex mu_;
  bool logged_once_ ABSL_GUARDED_BY(mu_) = false;
  std::chrono::steady_clock::time_point last_ ABSL_GUARDED_BY(mu_);
  uint64_t suppressed_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_LOG_LIMITER_H_
