// The seam between the shim and missiled: one daemon session as the memory, copy and pacing
// paths see it, and the connector that opens sessions.
//
// DaemonClient (daemon_client.h) implements SessionClient over gRPC and the side channel, and
// DaemonConnector implements SessionConnector over the daemon's Unix socket; tests implement
// both in memory, so the paths above them run without a daemon (and without a GPU, over a
// recording DriverApi).
// Thread-safety: implementations allow every method to be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_SESSION_CLIENT_H_
#define MISSILE_LIBINTERCEPT_SESSION_CLIENT_H_

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "missile/common/k8s_identity.h"

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
  // The longest any call waits for the daemon (MISSILE_DAEMON_TIMEOUT_MS); a daemon that does
  // not answer in time is treated as gone and the session ends.
  int timeout_ms = 5000;
  K8sIdentity k8s;  // sent at registration where known (MISSILE_K8S_*)
  std::vector<std::string> k8s_devices;  // sent at registration (MISSILE_K8S_DEVICES)
};

// One registered session. Its GPUs, id and instance are fixed at registration.
class SessionClient {
 public:
  virtual ~SessionClient() = default;

  virtual const std::vector<GpuLink>& gpus() const = 0;
  virtual uint64_t session_id() const = 0;
  // The daemon process's instance id (empty from a daemon that does not send one).
  virtual const std::string& instance() const = 0;

  // `single`: one block of `bytes`; otherwise bytes / granularity blocks of one granule.
  // RESOURCE_EXHAUSTED when a quota or the pool refuses; nothing is leased then.
  virtual absl::StatusOr<std::vector<BlockLease>> Allocate(uint32_t gpu, bool single,
                                                           uint64_t bytes) = 0;
  virtual absl::Status Free(uint32_t gpu, const std::vector<uint64_t>& block_ids) = 0;
  virtual absl::StatusOr<TenantUsage> Usage(uint32_t gpu) = 0;
  // Opens the GPU's copy channel: {shared region memfd, its end of the doorbell socket pair},
  // the caller's to close.
  virtual absl::StatusOr<std::pair<int, int>> OpenCopyChannel(uint32_t gpu) = 0;
  // The GPU's pacing regions (pacing_region.h): {the directory, this session's lanes page},
  // the caller's to close.
  virtual absl::StatusOr<std::pair<int, int>> OpenPacing(uint32_t gpu) = 0;
  // Another session's lanes page on the GPU (read-only), published in the directory's `slot`
  // with `epoch`; the caller's to close.
  virtual absl::StatusOr<int> OpenPeerLanes(uint32_t gpu, uint32_t slot, uint64_t epoch) = 0;

  // False once the daemon ended the session or went away. Every call then fails with
  // UNAVAILABLE without sending anything.
  virtual bool connected() const = 0;
  // Waits up to `limit` for the session to end; true if it has.
  virtual bool AwaitEnd(absl::Duration limit) const = 0;
};

// Opens sessions, and probes the daemon's socket without opening one.
class SessionConnector {
 public:
  virtual ~SessionConnector() = default;
  // Whether a socket file exists at `path` (no first registration is tried without one).
  virtual bool SocketExists(const std::string& path) = 0;
  // Whether something accepts connections at `path` (a stale socket file of a killed daemon
  // refuses them).
  virtual bool Listening(const std::string& path) = 0;
  // Registers the process and returns the new session.
  virtual absl::StatusOr<std::unique_ptr<SessionClient>> Connect(const TenantIdentity& who) = 0;
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_SESSION_CLIENT_H_
