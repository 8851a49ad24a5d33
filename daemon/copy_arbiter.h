// The PCIe arbiter of one GPU: a completely fair scheduler per direction (pcie_sched) fed by
// the tenants' copy channels (common/copy_channel.h), on one thread.
//
// The thread reads new requests and completions from every channel, feeds them to the
// schedulers, writes the grants they decide into the tenants' grant rings and wakes the
// tenants; between passes it sleeps on the doorbell eventfd that tenants write after each
// request or completion.
// Thread-safety: public methods may be called from any thread.
#ifndef MISSILE_DAEMON_COPY_ARBITER_H_
#define MISSILE_DAEMON_COPY_ARBITER_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/copy_channel.h"
#include "missile/pcie_sched/fair_scheduler.h"

namespace missile::daemon {

struct PcieUse {
  uint64_t session = 0;
  uint64_t bytes[2] = {0, 0};  // granted, by copych::Direction
  double share[2] = {0, 0};    // of what the link carried recently
};

class CopyArbiter {
 public:
  static absl::StatusOr<std::unique_ptr<CopyArbiter>> Create(const pcie::FairScheduler::Config& config);
  ~CopyArbiter();

  // A channel for the session; returns the region's memfd and the doorbell eventfd, both
  // duplicates for the tenant (the caller sends and closes them).
  absl::StatusOr<std::pair<int, int>> OpenChannel(uint64_t session, bool latency_sensitive,
                                                  uint32_t weight);
  void CloseChannel(uint64_t session);
  void SetPolicy(uint64_t session, bool latency_sensitive, uint32_t weight);
  std::vector<PcieUse> Usage();

 private:
  struct Channel;
  CopyArbiter() = default;
  void Run();
  // One pass over every channel; true if anything moved.
  bool Poll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLocked(uint64_t session, const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  pcie::FairScheduler::Config config_;
  absl::Mutex mu_;
  std::unique_ptr<pcie::FairScheduler> sched_[2] ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::unique_ptr<Channel>> channels_ ABSL_GUARDED_BY(mu_);
  int doorbell_ = -1;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_COPY_ARBITER_H_
