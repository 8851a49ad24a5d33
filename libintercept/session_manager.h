// The shim's daemon sessions: the first registration, the current session, and the thread that
// registers the process again with a restarted daemon.
//
// The first session is opened on first use (Client) and tried once; without one the shim
// follows MISSILE_NO_DAEMON for the rest of the process. When a session ends, Serving says so
// once, tells the end listener (the memory path returns what that session's GPUs still cache)
// and starts a thread that checks every second whether the socket accepts connections and, if
// it does, registers again (session_policy.h: the same daemon gives back the same session when
// it kept it through a stall; no daemon leases memory this process may still map to anyone).
// Allocations that went to the driver meanwhile (passthrough) are counted and reported when it
// registers again and in the exit report.
//
// Sessions are never destroyed: per-GPU state of the memory, copy and pacing paths belongs to
// one session and keeps a pointer to it, and threads may be inside its calls. The copy gate and
// the pacer of each GPU live in one SessionGpu per (session, GPU) (session_gpu.h), which the
// manager creates at first use and keeps as long as the process lives.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_SESSION_MANAGER_H_
#define MISSILE_LIBINTERCEPT_SESSION_MANAGER_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "config.h"
#include "driver_api.h"
#include "session_client.h"
#include "spdlog/logger.h"

namespace missile::shim {

class SessionGpu;
class TpcMasker;

class SessionManager {
 public:
  // `connector` opens the sessions and must outlive the manager, as must `masker` (the LS
  // reserve of the GPUs' pacers; null: none).
  SessionManager(const Config& config, const DriverApi& api, SessionConnector* connector,
                 spdlog::logger* log, TpcMasker* masker = nullptr);
  // Stops the reconnection thread.
  ~SessionManager();
  SessionManager(const SessionManager&) = delete;
  SessionManager& operator=(const SessionManager&) = delete;

  // The current session (the newest), registered on first use; nullptr when the daemon was
  // unreachable. It may have ended: see connected(). After the first call, one atomic load.
  SessionClient* Client();
  // The current session while it serves: nullptr when unreachable or once it ended (logged
  // once per session, which also tells the end listener and starts watching for a restarted
  // daemon).
  SessionClient* Serving();
  bool connected() const;
  const Config& config() const { return config_; }

  // The daemon's GPU for CUDA device `dev` in `session`, matched by UUID; NOT_FOUND when the
  // daemon does not manage it. The link lives as long as the session.
  absl::StatusOr<const GpuLink*> LinkOf(SessionClient* session, CUdevice dev);

  // This process's state on CUDA device `dev` in the current session (Client(), so the first
  // call registers), created at the first call for that pair and the same object after;
  // nullptr without a session. It may belong to a session that has ended.
  SessionGpu* GpuOf(CUdevice dev) ABSL_LOCKS_EXCLUDED(gpus_mu_);
  // The same for the calling thread's current context's device; nullptr also when there is no
  // current context. Where GPU work runs (session_gpu.h).
  SessionGpu* CurrentGpu() ABSL_LOCKS_EXCLUDED(gpus_mu_);
  // Calls `fn` with every SessionGpu made so far, oldest first (the exit report).
  void ForEachGpu(const std::function<void(const SessionGpu&)>& fn) const
      ABSL_LOCKS_EXCLUDED(gpus_mu_);

  // Called with each ended session, once, from the thread that notices the end (in Serving, or
  // the thread that registers again, which checks every second).
  // Replaces the previous listener; an empty function removes it, and returns only once no
  // call of the old one is running.
  void SetEndListener(std::function<void(SessionClient*)> listener);

  // An allocation of `bytes` went to the driver directly (no serving session, passthrough).
  void NotePassthrough(uint64_t bytes);
  // Passthrough allocations since the process started, for the exit report.
  uint64_t passthrough_calls() const { return passthrough_calls_.load(std::memory_order_relaxed); }
  uint64_t passthrough_bytes() const { return passthrough_bytes_.load(std::memory_order_relaxed); }

 private:
  TenantIdentity Identity() const;
  // Every second while the process runs (from its first call to the daemon): registers once
  // the daemon answers where the first call found none, and again once the serving session
  // has ended and the daemon answers.
  void ReconnectLoop();
  void StartReconnect();
  // Logs the end of `ended` and tells the end listener, once per session.
  void NoteEnded(SessionClient* ended);
  // A process that could not reach missiled at its first call registers once it answers (the
  // daemon started after the process, or was restarting then).
  void RegisterLate();
  // Registers again if the daemon answers; true when it never should (a daemon without
  // instance ids).
  bool TryRegisterAgain(SessionClient* ended);

  const Config& config_;
  const DriverApi& api_;
  SessionConnector* connector_;
  spdlog::logger* log_;
  TpcMasker* masker_;

  absl::Mutex client_mu_;
  // Every session of this process, oldest first.
  std::vector<std::unique_ptr<SessionClient>> clients_ ABSL_GUARDED_BY(client_mu_);
  bool client_tried_ ABSL_GUARDED_BY(client_mu_) = false;
  std::atomic<SessionClient*> client_ptr_{nullptr};  // clients_.back()
  // The first connection attempt failed (it stays set; client_ptr_ is set once one succeeds).
  std::atomic<bool> client_failed_{false};
  std::atomic<SessionClient*> lost_logged_for_{nullptr};
  std::atomic<bool> register_failure_logged_{false};
  std::atomic<uint64_t> passthrough_calls_{0};
  std::atomic<uint64_t> passthrough_bytes_{0};
  std::atomic<uint64_t> passthrough_since_end_{0};  // since a session ended: told on return
  std::atomic<uint64_t> passthrough_bytes_since_end_{0};

  absl::Mutex listener_mu_;
  std::function<void(SessionClient*)> end_listener_ ABSL_GUARDED_BY(listener_mu_);

  absl::Mutex reconnect_mu_;
  absl::CondVar reconnect_cv_;
  bool stop_reconnect_ ABSL_GUARDED_BY(reconnect_mu_) = false;
  std::atomic<bool> reconnect_started_{false};
  std::thread reconnect_;

  // Every SessionGpu, oldest first, and by (session, device). Never removed while the manager
  // lives (threads may be inside one of an ended session); declared last, so they go first.
  mutable absl::Mutex gpus_mu_;
  std::vector<std::unique_ptr<SessionGpu>> gpus_ ABSL_GUARDED_BY(gpus_mu_);
  absl::flat_hash_map<std::pair<SessionClient*, int>, SessionGpu*> gpu_of_
      ABSL_GUARDED_BY(gpus_mu_);
  // The last one looked up per device, read without the lock (matched against the session).
  static constexpr int kCachedDevices = 64;
  std::atomic<SessionGpu*> recent_[kCachedDevices] = {};
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_SESSION_MANAGER_H_
