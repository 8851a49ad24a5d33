// LinkSimulator: a deterministic discrete-event simulation of one PCIe direction, for tests and
// benchmarks of the FairScheduler (test support: the daemon never links it).
//
// The link is one DMA queue that serves transfers first-in first-out at a constant rate, like
// the hardware (and like tests/fakecuda's simulated link). RunFair puts a FairScheduler in front
// of it: every granted chunk joins the link queue at once and completes when the link has moved
// it; the completion is fed back and the scheduler is asked for more grants at the same instant
// (a grant round trip takes no time). RunFifo is the unmanaged baseline: whole requests join the
// link queue in arrival order.
//
// Units: bytes, nanoseconds of simulated time (a double internally; the scheduler sees the
// time truncated to whole ns). No wall clock: the same inputs give the same results.
// Thread safety: none; one simulator per thread.
#ifndef MISSILE_PCIE_SCHED_TESTING_LINK_SIMULATOR_H_
#define MISSILE_PCIE_SCHED_TESTING_LINK_SIMULATOR_H_

#include <cstdint>
#include <functional>
#include <limits>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "missile/pcie_sched/fair_scheduler.h"

namespace missile::pcie::testing {

// 55.4 GB/s: pinned 1 GiB host-to-device copies on the H200 (docs/hardware/h200.md, "PCIe").
inline constexpr double kH200HostToDeviceBytesPerNs = 55.4;

struct SimTenant {
  TenantId id = 0;
  TenantClass cls = TenantClass::kBestEffort;
  uint32_t weight = kNiceZeroWeight;
};

// What one tenant submits. A tenant may have several workloads (e.g. busy, then idle, then busy).
struct Workload {
  TenantId tenant = 0;
  uint64_t request_bytes = 0;
  // 0: closed loop, the next request is submitted the moment the previous one finishes.
  // Otherwise open loop: one request every period_ns, whatever happened to the earlier ones.
  uint64_t period_ns = 0;
  uint64_t start_ns = 0;                                    // First submission.
  uint64_t stop_ns = std::numeric_limits<uint64_t>::max();  // No submission at or after this.
};

struct LatencySample {
  double submit_ns = 0;
  double latency_ns = 0;  // Submission to the completion of its last byte.
};

struct TenantResult {
  TenantId tenant = 0;
  uint64_t bytes_completed = 0;  // Over the whole run.
  double bytes_in_window = 0;    // Moved by the link inside [window_start_ns, window_end_ns).
  uint64_t requests_completed = 0;
  std::vector<LatencySample> latencies;  // One per finished request, in finishing order.
  double MaxLatencyNs() const;
  double LatencyPercentileNs(double p) const;  // p in [0, 100]; 0 when there is no sample.
};

struct SimResult {
  std::vector<TenantResult> tenants;  // Sorted by id.
  double link_busy_ns = 0;            // Time the link spent moving bytes, up to duration_ns.
  const TenantResult* Find(TenantId id) const;
  // The tenant's fraction of all bytes moved inside the window.
  double ShareInWindow(TenantId id) const;
};

struct SimOptions {
  double bytes_per_ns = kH200HostToDeviceBytesPerNs;
  uint64_t duration_ns = 1'000'000'000;
  uint64_t window_start_ns = 0;
  uint64_t window_end_ns = std::numeric_limits<uint64_t>::max();
};

class LinkSimulator {
 public:
  explicit LinkSimulator(SimOptions options) : options_(options) {}

  void AddTenant(SimTenant tenant) { tenants_.push_back(tenant); }
  void AddWorkload(Workload workload) { workloads_.push_back(workload); }
  // Runs `action` on the scheduler at `at_ns` (RunFair only), e.g. a weight change. An error
  // from it ends the run with that error.
  void AddControl(uint64_t at_ns, std::function<absl::Status(FairScheduler&)> action) {
    controls_.push_back({at_ns, std::move(action)});
  }

  absl::StatusOr<SimResult> RunFair(const FairScheduler::Config& config) const;
  absl::StatusOr<SimResult> RunFifo() const;

 private:
  struct Control {
    uint64_t at_ns;
    std::function<absl::Status(FairScheduler&)> action;
  };
  absl::StatusOr<SimResult> Run(const FairScheduler::Config* config) const;

  SimOptions options_;
  std::vector<SimTenant> tenants_;
  std::vector<Workload> workloads_;
  std::vector<Control> controls_;
};

}  // namespace missile::pcie::testing

#endif  // MISSILE_PCIE_SCHED_TESTING_LINK_SIMULATOR_H_
