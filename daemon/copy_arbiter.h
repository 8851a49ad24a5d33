// The PCIe arbiter of one GPU: a completely fair scheduler per direction (pcie_sched) fed by
// the tenants' copy channels (common/copy_channel.h), on one thread.
//
// The thread reads new requests from every channel, queues each one with the scheduler once
// its copy has reached the head of its stream (the request's first `arrived` gate), opens the
// gates of the chunks the scheduler grants, and completes a chunk as soon as its `done` gate
// says the copy finished. Nobody can wake a thread when the GPU writes a word into host
// memory, so while copies are pending the thread polls: it spins for `spin_ns` after the last
// thing that moved (a chunk takes tens of microseconds, so a busy link keeps it spinning and
// hands the next chunk out within a microsecond or two), and for `ls_spin_ns` after an LS
// tenant's last request (an LS service copying every few milliseconds would otherwise find it
// asleep each time and pay for waking it); then it naps in short steps while requests are
// still outstanding, and sleeps on the channels' doorbells (a socket pair per channel, rung by
// the tenant after each request; a tenant holds only its own end, so it cannot block the
// daemon's reads or another tenant's doorbell) when nothing is. So that the first chunk of a
// copy after a quiet spell does not wait for the thread to wake, a direction with nothing in
// flight or pending lends grants ahead (copy_channel.h, head_start) to as many channels as it
// has in-flight slots, LS tenants first, then those that copied last; it takes them back
// before granting anything else.
// Thread-safety: public methods may be called from any thread.
#ifndef MISSILE_DAEMON_COPY_ARBITER_H_
#define MISSILE_DAEMON_COPY_ARBITER_H_

#include <atomic>
#include <cstdint>
#include <iterator>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "missile/common/copy_channel.h"
#include "missile/common/shm_region.h"
#include "missile/common/tenant_class.h"
#include "missile/pcie_sched/fair_scheduler.h"

namespace missile::daemon {

// Upper bounds of the grant-wait buckets (nanoseconds); a last bucket holds longer waits.
inline constexpr uint64_t kGrantWaitBoundsNs[] = {
    10'000,    25'000,     50'000,     100'000,    250'000,     500'000,
    1'000'000, 2'500'000,  5'000'000,  10'000'000, 25'000'000,  50'000'000,
    100'000'000, 250'000'000, 500'000'000};
inline constexpr size_t kGrantWaitBuckets = std::size(kGrantWaitBoundsNs) + 1;

// How long a tenant's copy requests waited for their first chunk's grant, from the moment the
// request reached the head of its stream (its `arrived` gate) and joined the scheduler.
struct GrantWaits {
  uint64_t counts[kGrantWaitBuckets] = {};  // by bucket, not cumulative
  uint64_t sum_ns = 0;
  void Observe(uint64_t ns) {
    size_t b = 0;
    while (b < std::size(kGrantWaitBoundsNs) && ns > kGrantWaitBoundsNs[b]) ++b;
    ++counts[b];
    sum_ns += ns;
  }
};

struct PcieUse {
  uint64_t session = 0;
  uint64_t bytes[2] = {0, 0};  // granted, by copych::Direction
  double share[2] = {0, 0};    // of what the link carried recently
  GrantWaits waits[2];         // by copych::Direction, while the channel is open
};

class CopyArbiter {
 public:
  struct Options {
    pcie::FairScheduler::Config scheduler;
    // How long the thread keeps spinning after the last grant, completion or request, and
    // after the last request of an LS tenant.
    uint64_t spin_ns = 200'000;
    uint64_t ls_spin_ns = 20'000'000;
    // BE tenants cut their copies into scheduler.be_chunk_bytes (large chunks: fewer boundaries,
    // more of the link) until an LS tenant posts a copy, then into scheduler.chunk_bytes (an LS
    // chunk waits behind at most the in-flight BE chunks) until no LS tenant has posted one for
    // this long. A copy keeps the size it was posted with.
    uint64_t ls_quiet_ns = 1'000'000'000;
    // A request cut into the BE size is accepted up to this long after the channel was last
    // offered it; later, the channel is dropped as malformed (its tenant then copies
    // unscheduled, which the daemon logs).
    uint64_t large_chunk_grace_ns = 1'000'000'000;
    // While this holds true (the GPU's LS tenants rest: PacingDomain::ls_resting_signal), BE
    // tenants are offered scheduler.be_rest_chunk_bytes instead of the BE size while no LS
    // tenant copies, on the same terms, and the BE size instead of the small one while an LS
    // tenant copies. Null, or a rest chunk of 0: never.
    std::shared_ptr<const std::atomic<bool>> ls_resting;
    // A direction with nothing in flight or pending lends grants ahead (see above).
    bool lend_ahead = true;
    // Off: no thread is started, and the caller drives the passes with PollOnce (tests and the
    // fuzzer of the shared region, which need each pass to happen at a point they choose).
    bool start_thread = true;
  };
  static absl::StatusOr<std::unique_ptr<CopyArbiter>> Create(const Options& options);
  // Advances on every turn of the thread's loop (at least every 10 ms while it runs), for the
  // watchdog (watchdog.h).
  uint64_t heartbeat() const { return heartbeat_.load(std::memory_order_relaxed); }

  // Closes every channel (the tenants then copy unscheduled) and stops the thread.
  ~CopyArbiter();

  // A channel for the session; returns the region's memfd (a duplicate) and the tenant's end of
  // the channel's doorbell socket pair (the caller sends and closes them).
  absl::StatusOr<std::pair<int, int>> OpenChannel(uint64_t session, TenantClass cls,
                                                  uint32_t weight);
  void CloseChannel(uint64_t session);
  void SetPolicy(uint64_t session, TenantClass cls, uint32_t weight);
  std::vector<PcieUse> Usage();
  // One pass over every channel, as the thread makes it: for an arbiter created with
  // Options::start_thread off (with the thread running, passes would interleave).
  void PollOnce();

 private:
  struct Channel;
  CopyArbiter() = default;
  void Run();
  // What one pass over the channels saw.
  struct PassResult {
    bool moved = false;      // anything was read, queued, granted or counted back
    bool busy = false;       // some request is outstanding
    bool ls_posted = false;  // an LS tenant posted a request
  };
  // One pass over every channel: ReadRequests, SubmitArrived and CountFinished per channel and
  // direction, then drops malformed channels, re-offers chunk sizes and OpenGrantedGates.
  PassResult Poll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reads the requests posted to direction `d` since the last pass and checks them; false if one
  // is malformed (the channel is then dropped).
  bool ReadRequests(Channel& c, int d, uint64_t now, uint64_t offers_seen, PassResult* pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Hands the scheduler the requests whose copies reached their stream (first gate arrived);
  // false if the scheduler refuses one.
  bool SubmitArrived(Channel& c, int d, uint64_t now, PassResult* pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Counts back the chunks the GPU (or the copying thread) has finished, and writes off grants
  // outstanding for longer than the grant timeout.
  void CountFinished(Channel& c, int d, uint64_t now, PassResult* pass)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Opens the gates of every chunk the two schedulers grant now, within the in-flight slots
  // that grants lent ahead leave.
  void OpenGrantedGates(uint64_t now, PassResult* pass) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before granting in direction `d`: takes back the grants lent ahead there when the
  // scheduler has chunks to grant, and writes off taken ones whose request never came. Returns
  // the in-flight slots they hold.
  uint32_t ReclaimHeadStarts(int d, uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // After granting: lends grants ahead in every direction with nothing in flight or pending.
  void LendHeadStarts() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void DropLocked(uint64_t session, const char* why) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The chunk size a tenant of this class should cut its next copy into.
  uint64_t OfferedChunk(bool latency_sensitive, uint64_t now) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes OfferedChunk into the channel's region and notes when the large size was offered.
  void Offer(Channel& c, uint64_t now) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  Options options_;
  absl::Mutex mu_;
  std::unique_ptr<pcie::FairScheduler> sched_[2] ABSL_GUARDED_BY(mu_);
  absl::flat_hash_map<uint64_t, std::unique_ptr<Channel>> channels_ ABSL_GUARDED_BY(mu_);
  uint64_t last_ls_request_ns_ ABSL_GUARDED_BY(mu_) = 0;  // when an LS tenant last posted
  uint64_t prev_poll_ns_ ABSL_GUARDED_BY(mu_) = 0;        // when the last pass started
  int wake_ = -1;  // eventfd: wakes the thread (to stop, or to poll a new channel's doorbell)
  // Doorbells of dropped channels, closed by the thread between two polls (it may be polling
  // them when the channel is dropped from another thread).
  std::vector<int> retired_bells_ ABSL_GUARDED_BY(mu_);
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> heartbeat_{0};
  std::thread thread_;
};

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_COPY_ARBITER_H_
