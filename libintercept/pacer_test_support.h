// What the pacer's in-process tests (pacer_test.cc, pacer_ls_marks_test.cc) share: a tenant's
// pacer opened against the daemon's own pacing domain as its shim opens it, and the completion
// writes it enqueued, as the recording driver saw them.
#ifndef MISSILE_LIBINTERCEPT_PACER_TEST_SUPPORT_H_
#define MISSILE_LIBINTERCEPT_PACER_TEST_SUPPORT_H_

#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "pacer.h"
#include "pacing_domain.h"
#include "spdlog/logger.h"
#include "testing/recording_driver.h"

namespace missile::shim::testing {

inline absl::StatusOr<std::unique_ptr<Pacer>> OpenPacerIn(daemon::PacingDomain* domain,
                                                         uint64_t session, int pid,
                                                         TenantClass cls,
                                                         const RecordingDriver& driver,
                                                         spdlog::logger* log) {
  auto fds = domain->Join(session, pid, cls, 1);
  if (!fds.ok()) return fds.status();
  auto opener = [domain, session](uint32_t slot, uint64_t epoch) {
    return domain->OpenPeerLanes(session, slot, epoch);
  };
  return Pacer::Open(fds->directory, fds->lanes, session, nullptr, opener, driver.api(), log);
}

// The values of the completion writes enqueued since the driver's calls were cleared.
inline std::vector<std::string> WrittenValues(const RecordingDriver& driver) {
  std::vector<std::string> values;
  for (const std::string& c : driver.calls()) {
    if (c.rfind("cuStreamWriteValue64 ", 0) == 0) values.push_back(c.substr(c.rfind(' ') + 1));
  }
  return values;
}

}  // namespace missile::shim::testing

#endif  // MISSILE_LIBINTERCEPT_PACER_TEST_SUPPORT_H_
