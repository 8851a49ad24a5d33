#include "pcie_sched/testing/link_simulator.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <queue>
#include <utility>

#include "absl/strings/str_cat.h"

namespace missile::pcie::testing {
namespace {

enum class EventKind { kSubmit, kLinkDone, kControl };

struct Event {
  double t = 0;
  uint64_t seq = 0;  // Ties at one instant run in the order they were scheduled.
  EventKind kind = EventKind::kSubmit;
  size_t index = 0;  // Workload (kSubmit) or control (kControl).
  // kLinkDone: the grant (fair) or request (FIFO) that the link finished.
  uint64_t id = 0;
  TenantId tenant = 0;
  uint64_t length = 0;
  double start = 0;
};

struct Later {
  bool operator()(const Event& a, const Event& b) const {
    return a.t != b.t ? a.t > b.t : a.seq > b.seq;
  }
};

struct RequestInfo {
  size_t workload = 0;
  double submit_ns = 0;
};

}  // namespace

double TenantResult::MaxLatencyNs() const {
  double max = 0;
  for (const LatencySample& s : latencies) max = std::max(max, s.latency_ns);
  return max;
}

double TenantResult::LatencyPercentileNs(double p) const {
  if (latencies.empty()) return 0;
  std::vector<double> v;
  v.reserve(latencies.size());
  for (const LatencySample& s : latencies) v.push_back(s.latency_ns);
  std::sort(v.begin(), v.end());
  // Nearest rank.
  const double rank = std::ceil(std::clamp(p, 0.0, 100.0) / 100.0 * static_cast<double>(v.size()));
  const size_t i = rank < 1 ? 0 : static_cast<size_t>(rank) - 1;
  return v[std::min(i, v.size() - 1)];
}

const TenantResult* SimResult::Find(TenantId id) const {
  for (const TenantResult& t : tenants) {
    if (t.tenant == id) return &t;
  }
  return nullptr;
}

double SimResult::ShareInWindow(TenantId id) const {
  double total = 0;
  double mine = 0;
  for (const TenantResult& t : tenants) {
    total += t.bytes_in_window;
    if (t.tenant == id) mine = t.bytes_in_window;
  }
  return total > 0 ? mine / total : 0;
}

absl::StatusOr<SimResult> LinkSimulator::RunFair(const FairScheduler::Config& config) const {
  return Run(&config);
}

absl::StatusOr<SimResult> LinkSimulator::RunFifo() const { return Run(nullptr); }

// long: one discrete-event loop; its events (arrivals, grants, completions) share the queue,
// the clock and the per-tenant results.
absl::StatusOr<SimResult> LinkSimulator::Run(const FairScheduler::Config* config) const {
  if (!(options_.bytes_per_ns > 0)) {
    return absl::InvalidArgumentError("bytes_per_ns must be positive");
  }
  std::optional<FairScheduler> sched;
  if (config != nullptr) {
    absl::StatusOr<FairScheduler> created = FairScheduler::Create(*config);
    if (!created.ok()) return created.status();
    sched.emplace(*std::move(created));
  }
  std::map<TenantId, TenantResult> results;
  for (const SimTenant& t : tenants_) {
    if (sched.has_value()) {
      if (absl::Status s = sched->AddTenant(t.id, t.cls, t.weight); !s.ok()) return s;
    }
    results[t.id].tenant = t.id;
  }
  for (const Workload& w : workloads_) {
    if (!results.contains(w.tenant)) {
      return absl::InvalidArgumentError(absl::StrCat("workload for unknown tenant ", w.tenant));
    }
  }

  const double duration = static_cast<double>(options_.duration_ns);
  const double window_start = static_cast<double>(options_.window_start_ns);
  const double window_end = std::min(static_cast<double>(options_.window_end_ns), duration);
  std::priority_queue<Event, std::vector<Event>, Later> events;
  uint64_t seq = 0;
  auto schedule = [&](Event e) {
    e.seq = seq++;
    events.push(e);
  };
  auto schedule_submit = [&](size_t workload, double t) {
    if (t < static_cast<double>(workloads_[workload].stop_ns) && t <= duration) {
      schedule(Event{.t = t, .kind = EventKind::kSubmit, .index = workload});
    }
  };
  for (size_t i = 0; i < workloads_.size(); ++i) {
    schedule_submit(i, static_cast<double>(workloads_[i].start_ns));
  }
  for (size_t i = 0; i < controls_.size(); ++i) {
    schedule(Event{
        .t = static_cast<double>(controls_[i].at_ns), .kind = EventKind::kControl, .index = i});
  }

  SimResult result;
  double link_free = 0;
  // Joins the link's FIFO queue at `now` and schedules the completion.
  auto enqueue = [&](double now, uint64_t id, TenantId tenant, uint64_t length) {
    const double start = std::max(now, link_free);
    link_free = start + static_cast<double>(length) / options_.bytes_per_ns;
    schedule(Event{.t = link_free,
                   .kind = EventKind::kLinkDone,
                   .id = id,
                   .tenant = tenant,
                   .length = length,
                   .start = start});
  };
  std::map<RequestId, RequestInfo> requests;
  RequestId next_fifo_request = 1;
  auto finish_request = [&](RequestId id, double now) {
    auto it = requests.find(id);
    const RequestInfo info = it->second;
    requests.erase(it);
    const Workload& w = workloads_[info.workload];
    TenantResult& r = results[w.tenant];
    ++r.requests_completed;
    r.latencies.push_back({info.submit_ns, now - info.submit_ns});
    if (w.period_ns == 0) schedule_submit(info.workload, now);
  };

  while (!events.empty() && events.top().t <= duration) {
    const Event e = events.top();
    events.pop();
    const uint64_t now_ns = static_cast<uint64_t>(e.t);
    switch (e.kind) {
      case EventKind::kSubmit: {
        const Workload& w = workloads_[e.index];
        RequestId id = 0;
        if (sched.has_value()) {
          absl::StatusOr<RequestId> submitted = sched->Submit(w.tenant, w.request_bytes, now_ns);
          if (!submitted.ok()) return submitted.status();
          id = *submitted;
        } else {
          id = next_fifo_request++;
          enqueue(e.t, id, w.tenant, w.request_bytes);
        }
        requests[id] = RequestInfo{e.index, e.t};
        if (w.period_ns != 0) schedule_submit(e.index, e.t + static_cast<double>(w.period_ns));
        break;
      }
      case EventKind::kLinkDone: {
        TenantResult& r = results[e.tenant];
        r.bytes_completed += e.length;
        const double overlap = std::min(e.t, window_end) - std::max(e.start, window_start);
        if (overlap > 0 && e.t > e.start) {
          r.bytes_in_window += static_cast<double>(e.length) * overlap / (e.t - e.start);
        }
        result.link_busy_ns += e.t - e.start;
        if (sched.has_value()) {
          absl::StatusOr<std::optional<RequestDone>> done = sched->Complete(e.id, now_ns);
          if (!done.ok()) return done.status();
          if (done->has_value()) finish_request((*done)->request, e.t);
        } else {
          finish_request(e.id, e.t);
        }
        break;
      }
      case EventKind::kControl:
        if (sched.has_value()) {
          if (absl::Status s = controls_[e.index].action(*sched); !s.ok()) return s;
        }
        break;
    }
    if (sched.has_value()) {
      while (std::optional<Grant> g = sched->NextGrant(now_ns)) {
        enqueue(e.t, g->id, g->tenant, g->length);
      }
    }
  }

  for (auto& [id, r] : results) result.tenants.push_back(std::move(r));
  return result;
}

}  // namespace missile::pcie::testing
