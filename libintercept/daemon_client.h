// The shim's connection to missiled: the gRPC Tenant service for control, the side channel for
// the descriptors of VRAM blocks, and a Watch stream that keeps the session alive and carries
// policy changes.
//
// Connect registers the process (name, class and quota from the environment, see config.h),
// opens the side channel with the session's secret token and starts the watch thread.
// Allocate leases blocks and fetches their descriptors (the caller imports and closes them).
// Thread-safety: every method may be called from any thread; the side channel is used under a
// mutex, one request-reply at a time.
#ifndef MISSILE_LIBINTERCEPT_DAEMON_CLIENT_H_
#define MISSILE_LIBINTERCEPT_DAEMON_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace missile::shim {

struct GpuLink {
  uint32_t index = 0;  // the daemon's GPU index
  std::string uuid;
  uint64_t total_bytes = 0;
  uint64_t granularity = 0;
  uint32_t colours = 1;  // distinguishable colours: with one, placement cannot isolate anyway
};

struct BlockLease {
  uint64_t id = 0;
  uint64_t bytes = 0;
  int fd = -1;  // the block's exported descriptor; the caller imports and closes it
};

struct TenantUsage {
  uint64_t quota_bytes = 0;
  uint64_t used_bytes = 0;
  uint64_t available_bytes = 0;
};

struct TenantIdentity {
  std::string socket_path;
  std::string name;
  bool latency_sensitive = false;
  uint64_t quota_bytes = 0;  // 0: the class default
};

class DaemonClient {
 public:
  static absl::StatusOr<std::unique_ptr<DaemonClient>> Connect(const TenantIdentity& who);
  ~DaemonClient();

  const std::vector<GpuLink>& gpus() const { return gpus_; }
  uint64_t session_id() const { return session_id_; }
  // The daemon process's instance id (empty from a daemon that does not send one).
  const std::string& instance() const { return instance_; }

  // `single`: one block of `bytes`; otherwise bytes / granularity blocks of one granule.
  absl::StatusOr<std::vector<BlockLease>> Allocate(uint32_t gpu, bool single, uint64_t bytes);
  absl::Status Free(uint32_t gpu, const std::vector<uint64_t>& block_ids);
  absl::StatusOr<TenantUsage> Usage(uint32_t gpu);
  // Opens the GPU's copy channel: {shared region memfd, its end of the doorbell socket pair}, the caller's to close.
  absl::StatusOr<std::pair<int, int>> OpenCopyChannel(uint32_t gpu);
  // The GPU's pacing region (pacing_region.h): its descriptor, the caller's to close.
  absl::StatusOr<int> OpenPacing(uint32_t gpu);

  // False once the daemon ended the session or went away. Every call then fails with
  // UNAVAILABLE without sending anything (the gRPC channel would reach a restarted daemon).
  bool connected() const { return connected_.load(std::memory_order_acquire); }
  // Waits up to `limit` for the session to end; true if it has.
  bool AwaitEnd(absl::Duration limit) const;

 private:
  // Sends a side-channel request `op` for `gpu` and returns the `descriptors` descriptors of
  // the reply (the caller's to close); `what` names the object in errors.
  absl::StatusOr<std::vector<int>> OpenOnSideChannel(uint32_t op, uint32_t gpu,
                                                     size_t descriptors, const char* what);
  struct Rpc;  // gRPC channel and stub, kept out of this header
  DaemonClient();
  absl::Status FetchDescriptors(uint32_t gpu, std::vector<BlockLease>* leases);
  void WatchLoop();

  std::unique_ptr<Rpc> rpc_;
  uint64_t session_id_ = 0;
  std::string instance_;
  std::vector<GpuLink> gpus_;
  absl::Mutex side_mu_;
  int side_fd_ ABSL_GUARDED_BY(side_mu_) = -1;
  std::atomic<bool> connected_{false};
  std::thread watcher_;
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_DAEMON_CLIENT_H_
