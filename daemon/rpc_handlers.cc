#include "rpc_handlers.h"

#include <chrono>
#include <optional>
#include <string>
#include <vector>

#include "missile/common/compute_settings.h"
#include "missile/pcie_sched/fair_scheduler.h"

namespace missile::daemon::rpc {

grpc::Status ToGrpc(const absl::Status& s) {
  if (s.ok()) return grpc::Status::OK;
  // absl and gRPC share the canonical code numbering.
  return grpc::Status(static_cast<grpc::StatusCode>(s.code()), std::string(s.message()));
}

v1::TenantClass ToProto(TenantClass cls) {
  return cls == TenantClass::kLatencySensitive ? v1::LATENCY_SENSITIVE : v1::BEST_EFFORT;
}

void FillUsage(uint32_t gpu, const Usage& u, v1::Usage* out) {
  out->set_gpu_index(gpu);
  out->set_quota_bytes(u.quota_bytes);
  out->set_used_bytes(u.used_bytes);
  out->set_available_bytes(u.available_bytes);
}

namespace {

absl::StatusOr<TenantClass> FromProto(v1::TenantClass cls) {
  switch (cls) {
    case v1::LATENCY_SENSITIVE: return TenantClass::kLatencySensitive;
    case v1::BEST_EFFORT: return TenantClass::kBestEffort;
    default: return absl::InvalidArgumentError("tenant class must be LATENCY_SENSITIVE or BEST_EFFORT");
  }
}

void FillGpu(uint32_t index, const Gpu& gpu, v1::GpuInfo* out) {
  const DeviceInfo& info = gpu.info;
  out->set_index(index);
  out->set_uuid(info.uuid);
  out->set_name(info.name);
  out->set_total_bytes(info.total_bytes);
  out->set_granularity_bytes(info.granularity);
  out->set_colours(gpu.colours);
}

void FillPacing(const PacingSettings& s, v1::PacingPolicy* out) {
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  out->set_##key(static_cast<decltype(out->key())>(                                    \
      settings::FromField(s.field, settings::Unit::unit)));
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
}

void FillCompute(uint32_t gpu, const PacingStats& st, v1::ComputeUse* out) {
  out->set_gpu_index(gpu);
  out->set_submissions(st.submissions);
  out->set_held_ms(static_cast<double>(st.held_ns) / 1e6);
  out->set_held_count(st.held_count);
  out->set_inflight(st.inflight);
  out->set_gpu_ms(static_cast<double>(st.gpu_ns) / 1e6);
  out->set_ls_busy_share(st.busy_share);
  out->set_held_share(st.held_share);
  out->set_reserve(static_cast<v1::ComputeUse::Reserve>(st.reserve_state));
  out->set_reserve_tpcs(st.reserve_tpcs);
  out->set_mps_client(st.mps_client);
  if (st.ls) {
    static_assert(static_cast<int>(pacing::BudgetState::kUnmet) == v1::ComputeUse::BUDGET_UNMET);
    out->set_budget_pct(st.budget_pct);
    out->set_budget(static_cast<v1::ComputeUse::Budget>(st.budget_state));
    out->set_stretch(st.stretch);
    out->set_period_ms(static_cast<double>(st.period_ns) / 1e6);
    out->set_alone_ms(st.alone_ns / 1e6);
    out->set_be_share(st.be_share);
    out->set_be_window_scale(st.be_window_scale);
    out->set_periods(st.periods);
    out->set_alone_periods(st.alone_periods);
    out->set_dropped_periods(st.dropped_periods);
    out->set_resting(st.resting);
  }
}

void FillPool(uint32_t index, const Gpu& gpu, v1::PoolStatus* p) {
  PoolSnapshot snap = gpu.pool->Snapshot();
  FillGpu(index, gpu, p->mutable_gpu());
  p->set_capacity_bytes(snap.capacity_bytes);
  p->set_created_bytes(snap.created_bytes);
  p->set_leased_bytes(snap.leased_bytes);
  p->set_cached_bytes(snap.cached_bytes);
  p->set_released_mapped_bytes(snap.released_mapped_bytes);
  p->set_tenants(static_cast<uint32_t>(snap.tenants.size()));
  p->set_colour_note(gpu.colour_note);
  for (size_t c = 0; c < snap.colours.size(); ++c) {
    v1::ColourUse* u = p->add_colours();
    u->set_colour(static_cast<uint32_t>(c));
    u->set_capacity_bytes(snap.colours[c].created_bytes);
    u->set_used_bytes(snap.colours[c].leased_bytes);
    ColourRole role = snap.colours[c].role;
    u->set_reserved_for(role == ColourRole::kLatencySensitive ? "ls"
                        : role == ColourRole::kBestEffort   ? "be"
                                                            : "shared");
  }
}

// One tenant's line of ListTenants: its session, and per GPU its memory, PCIe and pacing.
void FillTenant(DaemonCore* core, const SessionInfo& s,
                const std::vector<std::vector<PcieUse>>& pcie,
                std::chrono::steady_clock::time_point now, v1::TenantInfo* t) {
  t->set_session_id(s.id);
  t->set_pid(s.creds.pid);
  t->set_uid(s.creds.uid);
  t->set_name(s.name);
  t->set_k8s_pod(s.k8s.pod);
  t->set_k8s_namespace(s.k8s.k8s_namespace);
  t->set_k8s_container(s.k8s.container);
  t->set_tenant_class(ToProto(s.cls));
  t->set_priority(s.priority);
  t->set_weight(s.weight);
  t->set_budget_pct(s.budget_pct);
  t->set_connected_s(std::chrono::duration_cast<std::chrono::seconds>(now - s.started).count());
  for (size_t g = 0; g < core->gpus().size(); ++g) {
    auto usage = core->gpus()[g].pool->GetUsage(s.id);
    if (usage.ok()) FillUsage(static_cast<uint32_t>(g), *usage, t->add_usage());
    for (const PcieUse& u : pcie[g]) {
      if (u.session != s.id) continue;
      v1::PcieUse* p = t->add_pcie();
      p->set_gpu_index(static_cast<uint32_t>(g));
      p->set_h2d_bytes(u.bytes[0]);
      p->set_d2h_bytes(u.bytes[1]);
      p->set_h2d_share(u.share[0]);
      p->set_d2h_share(u.share[1]);
    }
    if (const Gpu& gpu = core->gpus()[g]; gpu.pacing) {
      if (std::optional<PacingStats> st = gpu.pacing->Stats(s.id)) {
        FillCompute(static_cast<uint32_t>(g), *st, t->add_compute());
      }
    }
  }
}

}  // namespace

grpc::Status Register(DaemonCore* core, const PeerCredentials& creds,
                      const v1::RegisterRequest& req, v1::RegisterResponse* resp) {
  // Fields are only ever added within a major version (see the proto), so any other number
  // is a shim built for a contract this daemon does not serve; 0 is a client that sent none.
  if (req.protocol_version() != kProtocolVersion) {
    return grpc::Status(grpc::StatusCode::FAILED_PRECONDITION,
                        "the client speaks protocol version " +
                            std::to_string(req.protocol_version()) + ", missiled speaks " +
                            std::to_string(kProtocolVersion) +
                            ": use a shim from the same Missile release as the daemon");
  }
  auto cls = FromProto(req.tenant_class());
  if (!cls.ok()) return ToGrpc(cls.status());
  const K8sIdentity k8s{req.k8s_pod(), req.k8s_namespace(), req.k8s_container()};
  const std::vector<std::string> devices(req.k8s_device_ids().begin(), req.k8s_device_ids().end());
  auto session =
      core->Register(creds, req.name(), *cls, req.requested_quota_bytes(), k8s, devices);
  if (!session.ok()) return ToGrpc(session.status());
  resp->set_protocol_version(kProtocolVersion);
  resp->set_session_id(session->id);
  resp->set_side_channel_token(session->token);
  resp->set_side_channel_path(core->options().fd_socket_path);
  resp->set_tenant_class(ToProto(session->cls));
  resp->set_daemon_instance(core->instance());
  for (size_t g = 0; g < core->gpus().size(); ++g) {
    FillGpu(static_cast<uint32_t>(g), core->gpus()[g], resp->add_gpus());
  }
  return grpc::Status::OK;
}

grpc::Status Allocate(DaemonCore* core, const PeerCredentials& creds,
                      const v1::AllocateRequest& req, v1::AllocateResponse* resp) {
  if (req.shape() != v1::AllocateRequest::CHUNKS && req.shape() != v1::AllocateRequest::SINGLE) {
    return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "shape must be CHUNKS or SINGLE");
  }
  auto leases = core->Allocate(creds, req.session_id(), req.gpu_index(),
                               req.shape() == v1::AllocateRequest::SINGLE, req.bytes());
  if (!leases.ok()) return ToGrpc(leases.status());
  for (const Lease& l : *leases) {
    v1::Block* b = resp->add_blocks();
    b->set_id(l.id);
    b->set_bytes(l.bytes);
    b->set_colours(l.colours.bits());
  }
  auto usage = core->GetUsage(creds, req.session_id(), req.gpu_index());
  if (usage.ok()) FillUsage(req.gpu_index(), *usage, resp->mutable_usage());
  return grpc::Status::OK;
}

grpc::Status Free(DaemonCore* core, const PeerCredentials& creds, const v1::FreeRequest& req,
                  v1::FreeResponse* resp) {
  std::vector<BlockId> ids(req.block_ids().begin(), req.block_ids().end());
  if (ids.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no blocks to free");
  absl::Status s = core->Free(creds, req.session_id(), req.gpu_index(), ids);
  if (!s.ok()) return ToGrpc(s);
  auto usage = core->GetUsage(creds, req.session_id(), req.gpu_index());
  if (usage.ok()) FillUsage(req.gpu_index(), *usage, resp->mutable_usage());
  return grpc::Status::OK;
}

grpc::Status GetUsage(DaemonCore* core, const PeerCredentials& creds,
                      const v1::GetUsageRequest& req, v1::Usage* resp) {
  auto usage = core->GetUsage(creds, req.session_id(), req.gpu_index());
  if (!usage.ok()) return ToGrpc(usage.status());
  FillUsage(req.gpu_index(), *usage, resp);
  return grpc::Status::OK;
}

grpc::Status Status(DaemonCore* core, v1::StatusResponse* resp) {
  resp->set_version(MISSILE_VERSION);
  resp->set_uptime_s(std::chrono::duration_cast<std::chrono::seconds>(core->uptime()).count());
  const auto& gpus = core->gpus();
  for (size_t g = 0; g < gpus.size(); ++g) {
    FillPool(static_cast<uint32_t>(g), gpus[g], resp->add_pools());
  }
  for (TenantClass cls : {TenantClass::kLatencySensitive, TenantClass::kBestEffort}) {
    v1::ClassPolicy* c = resp->add_classes();
    c->set_tenant_class(ToProto(cls));
    ClassDefaults d = core->class_defaults(cls);
    c->set_priority(d.priority);
    c->set_budget_pct(d.budget_pct);
    auto w = pcie::WeightFromPriority(d.priority);
    c->set_weight(w.ok() ? *w : 0);
    if (!gpus.empty()) {
      c->set_tenant_quota_bytes(gpus[0].quota[ClassIndex(cls)].tenant_quota_bytes);
      c->set_class_quota_bytes(gpus[0].quota[ClassIndex(cls)].class_quota_bytes);
    }
  }
  resp->set_tenants(static_cast<uint32_t>(core->ListSessions().size()));
  if (std::optional<PacingSettings> pacing = core->pacing_settings()) {
    FillPacing(*pacing, resp->mutable_pacing());
  }
  const CoreOptions& options = core->options();
  resp->mutable_mps()->set_tenants_on_mps(options.tenants_on_mps);
  resp->mutable_mps()->set_managed_by_missiled(options.mps_managed_by_missiled);
  resp->mutable_mps()->set_pipe_directory(options.mps_pipe_directory);
  return grpc::Status::OK;
}

grpc::Status ListTenants(DaemonCore* core, v1::ListTenantsResponse* resp) {
  auto now = std::chrono::steady_clock::now();
  std::vector<std::vector<PcieUse>> pcie;
  for (const Gpu& gpu : core->gpus()) {
    pcie.push_back(gpu.arbiter ? gpu.arbiter->Usage() : std::vector<PcieUse>());
  }
  for (const SessionInfo& s : core->ListSessions()) {
    FillTenant(core, s, pcie, now, resp->add_tenants());
  }
  return grpc::Status::OK;
}

grpc::Status SetPolicy(DaemonCore* core, const PeerCredentials& creds,
                       const v1::SetPolicyRequest& req, v1::SetPolicyResponse* resp) {
  PolicyTarget target;
  switch (req.target_case()) {
    case v1::SetPolicyRequest::kPid: target.pid = static_cast<int>(req.pid()); break;
    case v1::SetPolicyRequest::kName: target.name = req.name(); break;
    case v1::SetPolicyRequest::kTenantClass: {
      auto cls = FromProto(req.tenant_class());
      if (!cls.ok()) return ToGrpc(cls.status());
      target.cls = *cls;
      break;
    }
    default:
      return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "no target: give a pid, name or class");
  }
  PolicyChange change;
  if (req.has_new_class()) {
    auto cls = FromProto(req.new_class());
    if (!cls.ok()) return ToGrpc(cls.status());
    change.cls = *cls;
  }
  if (req.has_priority()) change.priority = req.priority();
  if (req.has_weight()) change.weight = req.weight();
  if (req.has_quota_bytes()) change.quota_bytes = req.quota_bytes();
  if (req.has_class_quota_bytes()) change.class_quota_bytes = req.class_quota_bytes();
  if (req.has_quota_percent()) change.quota_percent = req.quota_percent();
  if (req.has_class_quota_percent()) change.class_quota_percent = req.class_quota_percent();
  if (req.has_budget_pct()) change.budget_pct = req.budget_pct();
  change.force = req.force();
  auto changed = core->SetPolicy(creds, target, change);
  if (!changed.ok()) return ToGrpc(changed.status());
  resp->set_tenants_changed(*changed);
  return grpc::Status::OK;
}

grpc::Status SetPacing(DaemonCore* core, const PeerCredentials& creds,
                       const v1::SetPacingRequest& req, v1::SetPacingResponse* resp) {
  PacingChange change;
#define MISSILE_COMPUTE_SETTING(key, field, type, unit, min, max, def, live, flag, help) \
  if (req.has_##key()) change.key = req.key();
#include "missile/common/compute_settings.inc"
#undef MISSILE_COMPUTE_SETTING
  absl::StatusOr<PacingUpdate> update = core->SetPacing(creds, change);
  if (!update.ok()) return ToGrpc(update.status());
  FillPacing(update->after, resp->mutable_pacing());
  FillPacing(update->before, resp->mutable_previous());
  return grpc::Status::OK;
}

}  // namespace missile::daemon::rpc
