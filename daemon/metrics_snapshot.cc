#include "metrics_snapshot.h"

#include <algorithm>
#include <chrono>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "core.h"
#include "metrics_registry.h"

namespace missile::daemon {
namespace {

using metrics::Exposition;
using metrics::HistogramValue;
using metrics::Labels;
using metrics::MetricType;

constexpr double kNsPerSecond = 1e9;

struct Family {
  const char* name;
  MetricType type;
  const char* help;
};

// Every family, in the order of the exposition (and of the table in docs/operations.md).
constexpr Family kFamilies[] = {
    {"missile_build_info", MetricType::kGauge, "Always 1; the label version is missiled's."},
    {"missile_uptime_seconds", MetricType::kGauge, "Seconds since missiled started."},
    {"missile_start_time_seconds", MetricType::kGauge,
     "Unix time missiled started, in seconds."},
    {"missile_sessions_opened_total", MetricType::kCounter, "Tenant sessions registered."},
    {"missile_sessions_ended_total", MetricType::kCounter, "Tenant sessions ended."},
    {"missile_sessions_active", MetricType::kGauge, "Tenant sessions open now."},
    {"missile_gpu_pool_capacity_bytes", MetricType::kGauge,
     "The most VRAM the pool may create on the GPU."},
    {"missile_gpu_pool_created_bytes", MetricType::kGauge, "VRAM the pool holds."},
    {"missile_gpu_pool_leased_bytes", MetricType::kGauge, "VRAM leased to tenants."},
    {"missile_gpu_pool_cached_bytes", MetricType::kGauge, "VRAM held free for fast allocation."},
    {"missile_gpu_pool_released_mapped_bytes", MetricType::kGauge,
     "VRAM released from sessions that ended while their process runs: may still be mapped."},
    {"missile_gpu_colours", MetricType::kGauge, "VRAM colours the pool places blocks by."},
    {"missile_gpu_pacing_tenants", MetricType::kGauge,
     "Tenants in the GPU's pacing domain, by class."},
    {"missile_gpu_pacing_ls_busy", MetricType::kGauge,
     "1 while an LS tenant of the GPU has work in flight (when pacing holds BE tenants), else 0."},
    {"missile_gpu_ls_busy_seconds_total", MetricType::kCounter,
     "Time any LS tenant of the GPU had work in flight, sampled each millisecond from the "
     "tenants' marks (made while a BE shares the GPU). Work in flight, not SM use: not NVML's "
     "utilisation."},
    {"missile_gpu_be_busy_seconds_total", MetricType::kCounter,
     "Time any BE tenant of the GPU had work in flight, sampled each millisecond from the "
     "tenants' marks (made while it is paced). Work in flight, not SM use: not NVML's "
     "utilisation."},
    {"missile_gpu_ls_busy_ratio", MetricType::kGauge,
     "Fraction of about the last second any LS tenant of the GPU had work in flight (as "
     "missile_gpu_ls_busy_seconds_total; not NVML's utilisation)."},
    {"missile_gpu_be_busy_ratio", MetricType::kGauge,
     "Fraction of about the last second any BE tenant of the GPU had work in flight (as "
     "missile_gpu_be_busy_seconds_total; not NVML's utilisation)."},
    {"missile_tenant_info", MetricType::kGauge,
     "Always 1; the process (pid), daemon session and Kubernetes pod, namespace and container "
     "(empty: not known) behind a tenant's series now."},
    {"missile_tenant_used_bytes", MetricType::kGauge, "VRAM the tenant holds on the GPU."},
    {"missile_tenant_quota_bytes", MetricType::kGauge, "The tenant's VRAM quota on the GPU."},
    {"missile_tenant_allocations_total", MetricType::kCounter,
     "Allocation requests the daemon served."},
    {"missile_tenant_allocations_refused_total", MetricType::kCounter,
     "Allocation requests the daemon refused (a quota or the pool)."},
    {"missile_tenant_pcie_bytes_total", MetricType::kCounter,
     "Bytes of copies granted by the PCIe scheduler, by direction."},
    {"missile_tenant_pcie_grant_wait_seconds", MetricType::kHistogram,
     "Wait of a copy request for its first chunk's grant, from reaching its stream's head."},
    {"missile_tenant_pacing_submissions_total", MetricType::kCounter,
     "GPU work items the tenant's shim marked (pacing), as the tenant reports it."},
    {"missile_tenant_pacing_held_seconds_total", MetricType::kCounter,
     "BE: time its GPU work submissions were held, as the tenant reports it (bounded)."},
    {"missile_tenant_pacing_gpu_seconds_total", MetricType::kCounter,
     "BE: GPU time accounted to it for the weighted share, as the tenant reports it (bounded)."},
    {"missile_tenant_ls_busy_ratio", MetricType::kGauge,
     "LS: fraction of about the last second it had GPU work in flight."},
    {"missile_tenant_pacing_held_ratio", MetricType::kGauge,
     "BE: fraction of about the last second its submissions were held."},
    {"missile_tenant_busy_seconds_total", MetricType::kCounter,
     "Time the tenant had work in flight on the GPU, sampled each millisecond from its marks "
     "(made while it is paced). Includes waiting for its time slice: not GPU time."},
    {"missile_tenant_ls_budget_ratio", MetricType::kGauge,
     "LS: its latency budget (its own, else its class's, else [compute] ls_budget_pct; / 100): "
     "how long its work may take beside BE work, over its time alone."},
    {"missile_tenant_ls_stretch_ratio", MetricType::kGauge,
     "LS: its busy periods' duration over the same work alone, about the 95th percentile of the "
     "budget controller's last 32 (0: none measured; measured only while a budget above 1 is "
     "in force)."},
    {"missile_tenant_ls_be_time_ratio", MetricType::kGauge,
     "LS: the BE GPU time its busy time may carry now, as a fraction of it, set by the budget "
     "controller (up to 8: on MPS the BE runs beside the LS; +Inf once the LS's busy time "
     "holds the BE not at all, the controller's last step)."},
    {"missile_tenant_ls_be_window_scale", MetricType::kGauge,
     "LS: how many times the configured in-flight window (window_items, window_us, refill_us) "
     "the BE tenants may use now, set by the budget controller once the BE time ratio is at 8 "
     "(1 to 128)."},
};

HistogramValue Seconds(const GrantWaits& waits) {
  HistogramValue h;
  for (uint64_t bound : kGrantWaitBoundsNs) h.bounds.push_back(static_cast<double>(bound) / kNsPerSecond);
  h.counts.assign(std::begin(waits.counts), std::end(waits.counts));
  h.sum = static_cast<double>(waits.sum_ns) / kNsPerSecond;
  return h;
}

// The tenant families' samples for one tenant on one GPU.
absl::Status AddTenant(const TenantMetrics& t, Exposition* e) {
  const Labels labels = {{"name", t.name},
                         {"class", t.cls},
                         {"replica", std::to_string(t.replica)},
                         {"gpu", std::to_string(t.gpu)},
                         {"gpu_uuid", t.gpu_uuid}};
  // The pid and session only here: on every series they would start new ones at each restart.
  Labels info = labels;
  info.emplace_back("pid", std::to_string(t.pid));
  info.emplace_back("session", std::to_string(t.session));
  // The Kubernetes identity here only, as the pid: a pod's name changes at every rollout, and on
  // every series it would start new ones each time.
  info.emplace_back("pod", t.k8s.pod);
  info.emplace_back("namespace", t.k8s.k8s_namespace);
  info.emplace_back("container", t.k8s.container);
  absl::Status s = e->Add("missile_tenant_info", info, 1);
  s.Update(e->Add("missile_tenant_used_bytes", labels, static_cast<double>(t.used_bytes)));
  s.Update(e->Add("missile_tenant_quota_bytes", labels, static_cast<double>(t.quota_bytes)));
  s.Update(e->Add("missile_tenant_allocations_total", labels, static_cast<double>(t.allocations)));
  s.Update(e->Add("missile_tenant_allocations_refused_total", labels,
                  static_cast<double>(t.refusals)));
  if (t.pcie) {
    for (int d = 0; d < 2; ++d) {
      Labels with = labels;
      with.emplace_back("direction", d == 0 ? "h2d" : "d2h");
      s.Update(e->Add("missile_tenant_pcie_bytes_total", with,
                      static_cast<double>(t.pcie->bytes[d])));
      s.Update(e->AddHistogram("missile_tenant_pcie_grant_wait_seconds", with,
                               Seconds(t.pcie->waits[d])));
    }
  }
  if (t.pacing) {
    const TenantPacing& p = *t.pacing;
    s.Update(e->Add("missile_tenant_pacing_submissions_total", labels,
                    static_cast<double>(p.submissions)));
    s.Update(e->Add("missile_tenant_pacing_held_seconds_total", labels, p.held_seconds));
    s.Update(e->Add("missile_tenant_pacing_gpu_seconds_total", labels, p.gpu_seconds));
    s.Update(e->Add("missile_tenant_ls_busy_ratio", labels, p.ls_busy_ratio));
    s.Update(e->Add("missile_tenant_pacing_held_ratio", labels, p.held_ratio));
    s.Update(e->Add("missile_tenant_busy_seconds_total", labels, p.busy_seconds));
    s.Update(e->Add("missile_tenant_ls_budget_ratio", labels, p.budget_ratio));
    s.Update(e->Add("missile_tenant_ls_stretch_ratio", labels, p.stretch_ratio));
    s.Update(e->Add("missile_tenant_ls_be_time_ratio", labels, p.be_share_ratio));
    s.Update(e->Add("missile_tenant_ls_be_window_scale", labels, p.be_window_scale));
  }
  return s;
}

}  // namespace

void TenantReplicas::Assign(std::vector<TenantMetrics>* tenants) {
  // Taken numbers by name, class and GPU. Sessions keep theirs first (unless a class change
  // moved two onto one number), then the new ones take the lowest free.
  absl::flat_hash_map<std::tuple<std::string, std::string, uint32_t>, std::vector<uint32_t>> taken;
  auto group = [](const TenantMetrics& t) { return std::make_tuple(t.name, t.cls, t.gpu); };
  auto is_taken = [](const std::vector<uint32_t>& v, uint32_t r) {
    return std::find(v.begin(), v.end(), r) != v.end();
  };
  absl::flat_hash_map<std::pair<uint64_t, uint32_t>, uint32_t> next;
  std::vector<TenantMetrics*> fresh;
  for (TenantMetrics& t : *tenants) {
    auto it = replica_.find({t.session, t.gpu});
    std::vector<uint32_t>& used = taken[group(t)];
    if (it == replica_.end() || is_taken(used, it->second)) {
      fresh.push_back(&t);
      continue;
    }
    t.replica = it->second;
    used.push_back(t.replica);
    next[{t.session, t.gpu}] = t.replica;
  }
  for (TenantMetrics* t : fresh) {
    std::vector<uint32_t>& used = taken[group(*t)];
    t->replica = 0;
    while (is_taken(used, t->replica)) ++t->replica;
    used.push_back(t->replica);
    next[{t->session, t->gpu}] = t->replica;
  }
  replica_ = std::move(next);
}

MetricsSnapshot TakeMetricsSnapshot(const DaemonCore& core, const std::string& version,
                                    TenantReplicas* replicas) {
  MetricsSnapshot snap;
  snap.version = version;
  snap.uptime_seconds = std::chrono::duration<double>(core.uptime()).count();
  snap.start_time_seconds =
      std::chrono::duration<double>(core.start_time().time_since_epoch()).count();
  // Ended before opened: a session registering in between is then never counted as ended
  // without having been opened.
  snap.sessions_ended = core.sessions_ended();
  snap.sessions_opened = core.sessions_opened();
  const std::vector<SessionInfo> sessions = core.ListSessions();
  snap.sessions_active = sessions.size();
  const std::vector<Gpu>& gpus = core.gpus();
  std::vector<absl::flat_hash_map<uint64_t, TenantStats>> pools(gpus.size());
  std::vector<absl::flat_hash_map<uint64_t, PcieUse>> pcie(gpus.size());
  for (size_t g = 0; g < gpus.size(); ++g) {
    const PoolSnapshot pool = gpus[g].pool->Snapshot();
    snap.gpus.push_back({static_cast<uint32_t>(g), gpus[g].info.uuid, pool.capacity_bytes,
                         pool.created_bytes, pool.leased_bytes, pool.cached_bytes,
                         pool.released_mapped_bytes, gpus[g].colours,
                         gpus[g].pacing ? std::optional(gpus[g].pacing->Summary()) : std::nullopt});
    for (const TenantStats& t : pool.tenants) pools[g][t.session] = t;
    if (gpus[g].arbiter) {
      for (const PcieUse& u : gpus[g].arbiter->Usage()) pcie[g][u.session] = u;
    }
  }
  for (const SessionInfo& s : sessions) {
    for (size_t g = 0; g < gpus.size(); ++g) {
      auto pool = pools[g].find(s.id);
      if (pool == pools[g].end()) continue;  // ended since ListSessions
      TenantMetrics t;
      t.name = s.name;
      t.cls = std::string(TenantClassName(s.cls));
      t.pid = s.creds.pid;
      t.session = s.id;
      t.k8s = s.k8s;
      t.gpu = static_cast<uint32_t>(g);
      t.gpu_uuid = gpus[g].info.uuid;
      t.used_bytes = pool->second.usage.used_bytes;
      t.quota_bytes = pool->second.usage.quota_bytes;
      t.allocations = pool->second.allocations;
      t.refusals = pool->second.refusals;
      if (auto u = pcie[g].find(s.id); u != pcie[g].end()) t.pcie = u->second;
      if (gpus[g].pacing) {
        if (std::optional<PacingStats> st = gpus[g].pacing->Stats(s.id)) {
          t.pacing = TenantPacing{st->submissions, static_cast<double>(st->held_ns) / kNsPerSecond,
                                  static_cast<double>(st->gpu_ns) / kNsPerSecond, st->busy_share,
                                  st->held_share,
                                  static_cast<double>(st->busy_ns) / kNsPerSecond,
                                  st->budget_pct / 100.0, st->stretch, st->be_share,
                                  static_cast<double>(st->be_window_scale)};
        }
      }
      snap.tenants.push_back(std::move(t));
    }
  }
  TenantReplicas fresh;
  (replicas != nullptr ? *replicas : fresh).Assign(&snap.tenants);
  return snap;
}

absl::StatusOr<std::unique_ptr<metrics::HttpServer>> StartMetricsEndpoint(
    const DaemonCore& core, const std::string& address, int port, const std::string& version) {
  auto server = std::make_unique<metrics::HttpServer>(
      [&core, version, replicas = std::make_shared<TenantReplicas>()] {
        absl::StatusOr<std::string> text =
            FormatMetrics(TakeMetricsSnapshot(core, version, replicas.get()));
        return text.ok() ? *text : "# " + std::string(text.status().message()) + "\n";
      });
  metrics::HttpOptions options;
  options.address = address;
  options.port = port;
  if (absl::Status s = server->Start(options); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::string> FormatMetrics(const MetricsSnapshot& snapshot) {
  Exposition e;
  absl::Status s;
  for (const Family& f : kFamilies) s.Update(e.Declare(f.name, f.type, f.help));
  s.Update(e.Add("missile_build_info", {{"version", snapshot.version}}, 1));
  s.Update(e.Add("missile_uptime_seconds", {}, snapshot.uptime_seconds));
  s.Update(e.Add("missile_start_time_seconds", {}, snapshot.start_time_seconds));
  s.Update(e.Add("missile_sessions_opened_total", {},
                 static_cast<double>(snapshot.sessions_opened)));
  s.Update(e.Add("missile_sessions_ended_total", {}, static_cast<double>(snapshot.sessions_ended)));
  s.Update(e.Add("missile_sessions_active", {}, static_cast<double>(snapshot.sessions_active)));
  for (const GpuMetrics& g : snapshot.gpus) {
    // The UUID besides the index: indexes differ between tools (CUDA_VISIBLE_DEVICES, DCGM),
    // the UUID is what joins with other exporters' series.
    const Labels labels = {{"gpu", std::to_string(g.index)}, {"gpu_uuid", g.uuid}};
    s.Update(e.Add("missile_gpu_pool_capacity_bytes", labels, static_cast<double>(g.capacity_bytes)));
    s.Update(e.Add("missile_gpu_pool_created_bytes", labels, static_cast<double>(g.created_bytes)));
    s.Update(e.Add("missile_gpu_pool_leased_bytes", labels, static_cast<double>(g.leased_bytes)));
    s.Update(e.Add("missile_gpu_pool_cached_bytes", labels, static_cast<double>(g.cached_bytes)));
    s.Update(e.Add("missile_gpu_pool_released_mapped_bytes", labels,
                   static_cast<double>(g.released_mapped_bytes)));
    s.Update(e.Add("missile_gpu_colours", labels, g.colours));
    if (g.pacing) {
      for (const auto& [cls, n] :
           {std::pair{"ls", g.pacing->ls_tenants}, std::pair{"be", g.pacing->be_tenants}}) {
        Labels with = labels;
        with.emplace_back("class", cls);
        s.Update(e.Add("missile_gpu_pacing_tenants", with, n));
      }
      s.Update(e.Add("missile_gpu_pacing_ls_busy", labels, g.pacing->ls_busy ? 1 : 0));
      s.Update(e.Add("missile_gpu_ls_busy_seconds_total", labels,
                     static_cast<double>(g.pacing->ls_busy_ns) / kNsPerSecond));
      s.Update(e.Add("missile_gpu_be_busy_seconds_total", labels,
                     static_cast<double>(g.pacing->be_busy_ns) / kNsPerSecond));
      s.Update(e.Add("missile_gpu_ls_busy_ratio", labels, g.pacing->ls_busy_share));
      s.Update(e.Add("missile_gpu_be_busy_ratio", labels, g.pacing->be_busy_share));
    }
  }
  for (const TenantMetrics& t : snapshot.tenants) s.Update(AddTenant(t, &e));
  if (!s.ok()) return s;
  return e.Format();
}

}  // namespace missile::daemon
