// How the shim treats a session it registered after its previous one ended (pure logic).
//
// The daemon never shares physical memory across tenants: a block whose descriptor a session
// received is destroyed, never leased again, when it comes back, and a session ends only when
// its process exits or the daemon stops. So a new session is always safe to keep:
// - a different daemon instance (a restarted daemon) never knew the old session's blocks;
// - the same instance and the same session id: the daemon kept the session (it stalled, and the
//   shim gave up waiting); every block of it is still leased to this process;
// - the same instance and another id: the daemon ended the session while the process ran (it
//   stopped, or an operator ended it); the blocks it had handed out were released for good.
// An empty instance id comes from a daemon that predates instance ids, which may lease a block
// this process still maps to it again: never kept.
#ifndef MISSILE_LIBINTERCEPT_SESSION_POLICY_H_
#define MISSILE_LIBINTERCEPT_SESSION_POLICY_H_

#include <cstdint>
#include <string>

namespace missile::shim {

enum class NewSession {
  kRestartedDaemon,  // another daemon instance
  kSameSession,      // the daemon kept the session through its stall
  kEndedWhileAlive,  // the same daemon ended it while the process ran
  kRefuse,           // cannot tell: a daemon without instance ids
};

inline NewSession ClassifyNewSession(const std::string& ended_instance, uint64_t ended_session,
                                     const std::string& new_instance, uint64_t new_session) {
  if (new_instance.empty() || ended_instance.empty()) return NewSession::kRefuse;
  if (new_instance != ended_instance) return NewSession::kRestartedDaemon;
  return new_session == ended_session ? NewSession::kSameSession : NewSession::kEndedWhileAlive;
}

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_SESSION_POLICY_H_
