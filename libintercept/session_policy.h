// Whether the shim keeps a session it registered after its previous one ended (pure logic).
//
// Only a different daemon instance (a restarted daemon) may serve the process again. The
// instance that ended the session while it kept running took the session's blocks back into
// its pool while the process still maps them, and could lease them to the process again: two
// of its allocations would share memory. An empty id (a daemon that sends none) cannot tell the
// two cases apart, so it is never kept.
#ifndef MISSILE_LIBINTERCEPT_SESSION_POLICY_H_
#define MISSILE_LIBINTERCEPT_SESSION_POLICY_H_

#include <string>

namespace missile::shim {

inline bool KeepNewSession(const std::string& ended_instance, const std::string& new_instance) {
  return !new_instance.empty() && !ended_instance.empty() && new_instance != ended_instance;
}

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_SESSION_POLICY_H_
