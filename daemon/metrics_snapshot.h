// What missiled exposes on its Prometheus endpoint: a plain snapshot of the daemon's state
// (sessions, every GPU's VRAM pool, copy arbiter and pacing domain), and its rendering in the
// text exposition format. docs/operations.md ("Metrics") lists every metric.
//
// TakeMetricsSnapshot reads DaemonCore through its public, thread-safe accessors, each part
// under that part's own lock: the parts are each consistent, not all taken at one instant.
// FormatMetrics is pure.
// Thread-safety: TakeMetricsSnapshot may be called from any thread; the rest are plain values.
#ifndef MISSILE_DAEMON_METRICS_SNAPSHOT_H_
#define MISSILE_DAEMON_METRICS_SNAPSHOT_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "copy_arbiter.h"
#include "metrics_http.h"
#include "missile/common/k8s_identity.h"
#include "pacing_domain.h"

namespace missile::daemon {

class DaemonCore;

struct GpuMetrics {
  uint32_t index = 0;
  std::string uuid;  // "GPU-xxxxxxxx-...", as nvidia-smi and dcgm-exporter write it
  uint64_t capacity_bytes = 0;
  uint64_t created_bytes = 0;
  uint64_t leased_bytes = 0;
  uint64_t cached_bytes = 0;
  uint64_t released_mapped_bytes = 0;  // released by the daemon, may still be mapped
  int colours = 1;
  std::optional<PacingSummary> pacing;  // when the GPU has a pacing domain
};

struct TenantPacing {
  uint64_t submissions = 0;
  double held_seconds = 0;  // BE: time its submissions were held
  double gpu_seconds = 0;   // BE: GPU time accounted for its weighted share
  double ls_busy_ratio = 0;  // LS: fraction of about the last second with work in flight
  double held_ratio = 0;     // BE: fraction of about the last second held
  double busy_seconds = 0;   // time with work in flight (PacingStats::busy_ns)
  // LS: its latency budget (1.25 for 125 %), what the controller last measured against it (its
  // busy periods' duration over alone, about their 90th percentile; 0: none yet), and the share
  // of its busy time BE work may use now.
  double budget_ratio = 1;
  double stretch_ratio = 0;
  double be_share_ratio = 0;
  double be_window_scale = 1;  // LS: the BE's in-flight window, times this
};

// One tenant on one GPU. Its series are keyed by name, class, replica and GPU; the pid and the
// session, which change when the tenant restarts, are only on its info series.
struct TenantMetrics {
  std::string name;
  std::string cls;  // "ls" or "be"
  uint32_t replica = 0;  // TenantReplicas
  int pid = 0;
  uint64_t session = 0;
  K8sIdentity k8s;  // on the info series only, as pod, namespace and container
  uint32_t gpu = 0;
  std::string gpu_uuid;
  uint64_t used_bytes = 0;
  uint64_t quota_bytes = 0;
  uint64_t allocations = 0;
  uint64_t refusals = 0;
  std::optional<PcieUse> pcie;         // when the tenant opened a copy channel on the GPU
  std::optional<TenantPacing> pacing;  // when the GPU is paced
};

struct MetricsSnapshot {
  std::string version;
  double uptime_seconds = 0;
  double start_time_seconds = 0;  // Unix time
  uint64_t sessions_opened = 0;
  uint64_t sessions_ended = 0;
  uint64_t sessions_active = 0;
  std::vector<GpuMetrics> gpus;
  std::vector<TenantMetrics> tenants;  // by session, then GPU
};

// Numbers the live sessions that share a name, class and GPU 0, 1, ...: each keeps its number
// while it lives and a new one takes the lowest number free, so that a lone tenant that
// restarts comes back under the same series, and two live ones of one name never share one.
// Not thread-safe: one per endpoint, used on its thread.
class TenantReplicas {
 public:
  // Sets every tenant's replica; forgets the sessions not in `tenants`.
  void Assign(std::vector<TenantMetrics>* tenants);

 private:
  // By session and GPU.
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, uint32_t> replica_;
};

// With `replicas` null, numbers the tenants afresh (in the order of their sessions).
MetricsSnapshot TakeMetricsSnapshot(const DaemonCore& core, const std::string& version,
                                    TenantReplicas* replicas = nullptr);

// Serves GET /metrics at address:port (an IP literal; port 0: any free one) with the daemon's
// snapshot, rendered on the server's thread at each scrape. `core` must outlive the server.
absl::StatusOr<std::unique_ptr<metrics::HttpServer>> StartMetricsEndpoint(
    const DaemonCore& core, const std::string& address, int port, const std::string& version);

// The exposition text; an error only if a metric were declared wrongly (a bug, which the
// unit test would catch).
absl::StatusOr<std::string> FormatMetrics(const MetricsSnapshot& snapshot);

}  // namespace missile::daemon

#endif  // MISSILE_DAEMON_METRICS_SNAPSHOT_H_
