// A daemon session and connector in memory, for in-process tests of the paths above the
// SessionClient seam: the test sets the GPUs and the quota, and reads back every lease and
// free. Block descriptors are real (eventfds), since the shim imports and closes them.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_TESTING_FAKE_SESSION_H_
#define MISSILE_LIBINTERCEPT_TESTING_FAKE_SESSION_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "session_client.h"

namespace missile::shim::testing {

class FakeSession final : public SessionClient {
 public:
  struct Lease {
    uint32_t gpu;
    bool single;
    uint64_t bytes;
    bool granted;
  };

  // One GPU per link; `quota_bytes` per GPU (0: no limit).
  FakeSession(std::vector<GpuLink> gpus, uint64_t quota_bytes, std::string instance = "one");

  const std::vector<GpuLink>& gpus() const override { return gpus_; }
  uint64_t session_id() const override { return 7; }
  const std::string& instance() const override { return instance_; }
  absl::StatusOr<std::vector<BlockLease>> Allocate(uint32_t gpu, bool single,
                                                   uint64_t bytes) override;
  absl::Status Free(uint32_t gpu, const std::vector<uint64_t>& block_ids) override;
  absl::StatusOr<TenantUsage> Usage(uint32_t gpu) override;
  absl::StatusOr<std::pair<int, int>> OpenCopyChannel(uint32_t gpu) override;
  absl::StatusOr<std::pair<int, int>> OpenPacing(uint32_t gpu) override;
  absl::StatusOr<int> OpenPeerLanes(uint32_t gpu, uint32_t slot, uint64_t epoch) override;
  bool connected() const override { return connected_.load(); }
  bool AwaitEnd(absl::Duration limit) const override;

  // Ends the session, as a daemon that went away.
  void End() { connected_.store(false); }

  std::vector<Lease> leases() const;
  // Each Free call's block ids, in order.
  std::vector<std::vector<uint64_t>> frees() const;
  // Bytes leased and not returned (what the daemon counts against the tenant).
  uint64_t used_bytes() const;

 private:
  const std::vector<GpuLink> gpus_;
  const uint64_t quota_bytes_;
  const std::string instance_;
  std::atomic<bool> connected_{true};
  mutable absl::Mutex mu_;
  uint64_t next_block_ ABSL_GUARDED_BY(mu_) = 100;
  uint64_t used_ ABSL_GUARDED_BY(mu_) = 0;
  std::vector<std::pair<uint64_t, uint64_t>> held_ ABSL_GUARDED_BY(mu_);  // {id, bytes}
  std::vector<Lease> leases_ ABSL_GUARDED_BY(mu_);
  std::vector<std::vector<uint64_t>> frees_ ABSL_GUARDED_BY(mu_);
};

// Hands out the sessions the test queued, in order; UNAVAILABLE when none is left.
class FakeConnector final : public SessionConnector {
 public:
  void Queue(std::unique_ptr<FakeSession> session);
  void set_socket_exists(bool exists) { socket_exists_ = exists; }

  bool SocketExists(const std::string& path) override;
  bool Listening(const std::string& path) override;
  absl::StatusOr<std::unique_ptr<SessionClient>> Connect(const TenantIdentity& who) override;
  int connects() const { return connects_.load(); }

 private:
  std::atomic<bool> socket_exists_{true};
  std::atomic<int> connects_{0};
  absl::Mutex mu_;
  std::vector<std::unique_ptr<FakeSession>> queued_ ABSL_GUARDED_BY(mu_);
};

}  // namespace missile::shim::testing

#endif  // MISSILE_LIBINTERCEPT_TESTING_FAKE_SESSION_H_
