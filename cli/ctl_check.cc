#include "ctl_check.h"

#include <chrono>
#include <memory>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "ctl_client.h"
#include "ctl_format.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "missile/common/size.h"

namespace missile::cli {
namespace {

int Percent(double share) { return static_cast<int>(share * 100 + 0.5); }

CheckLine Ok(std::string check, std::string found) {
  return {CheckLevel::kOk, std::move(check), std::move(found), ""};
}
CheckLine Warn(std::string check, std::string found, std::string todo) {
  return {CheckLevel::kWarn, std::move(check), std::move(found), std::move(todo)};
}
CheckLine Fail(std::string check, std::string found, std::string todo = "") {
  return {CheckLevel::kFail, std::move(check), std::move(found), std::move(todo)};
}

void CheckGpus(const v1::StatusResponse& status, std::vector<CheckLine>* out) {
  if (status.pools_size() == 0) {
    out->push_back(Fail("gpus", "missiled manages no GPU",
                        "check gpu.devices in missiled.toml and missiled's log "
                        "(journalctl -u missiled)"));
    return;
  }
  for (const v1::PoolStatus& pool : status.pools()) {
    const v1::GpuInfo& gpu = pool.gpu();
    std::string found = absl::StrCat(Printable(gpu.name()), " (", Printable(gpu.uuid()),
                                     ") open, pool ", FormatSize(pool.leased_bytes()),
                                     " leased of ", FormatSize(pool.capacity_bytes()));
    if (pool.capacity_bytes() == 0) {
      out->push_back(Warn(absl::StrCat("gpu ", gpu.index()), found + ": tenants get no memory",
                          "raise gpu.pool_limit in missiled.toml"));
    } else {
      out->push_back(Ok(absl::StrCat("gpu ", gpu.index()), found));
    }
  }
}

void CheckMpsAndPacing(const v1::StatusResponse& status, std::vector<CheckLine>* out) {
  const bool mps = status.has_mps() && status.mps().tenants_on_mps();
  if (mps) {
    out->push_back(Ok("mps", absl::StrCat("on on every GPU: tenants are MPS clients (control "
                                          "daemon in ",
                                          Printable(status.mps().pipe_directory()),
                                          "); a fault in one tenant can end the others' work")));
  } else {
    out->push_back(Ok("mps", "off on every GPU: tenants are time-sliced"));
  }
  if (!status.has_pacing()) {
    out->push_back(Warn("pacing", "no GPU is paced: BE work is never held for LS work",
                        "check [compute] in missiled.toml and missiled's log"));
    return;
  }
  const v1::PacingPolicy& p = status.pacing();
  std::string policy = FormatPacingPolicy(p).substr(sizeof("pacing: ") - 1);
  if (!p.pacing()) {
    out->push_back(Warn("pacing", policy + ": BE work is not held while LS work runs",
                        "missilectl set --pacing on (compute.pacing = true in missiled.toml "
                        "keeps it)"));
  } else {
    out->push_back(Ok("pacing", policy));
  }
  if (p.ls_reserve_tpcs() > 0 && !mps) {
    out->push_back(Warn("ls reserve",
                        absl::StrCat(p.ls_reserve_tpcs(),
                                     " TPCs asked for, but tenants are time-sliced: nothing is "
                                     "reserved"),
                        "set compute.mps = \"start\", or missilectl set --ls-reserve-tpcs 0"));
  }
}

std::string ClassName(v1::TenantClass cls) {
  if (cls == v1::LATENCY_SENSITIVE) return "ls";
  if (cls == v1::BEST_EFFORT) return "be";
  return "unknown";
}

// "ls web (pid 42, gpu 0)", or "ls web (pid 42, gpu 0, pod prod/web-0)" in Kubernetes.
std::string TenantCheck(const v1::TenantInfo& t, uint32_t gpu) {
  const std::string pod =
      t.k8s_pod().empty()
          ? std::string()
          : absl::StrCat(", pod ", Printable(t.k8s_namespace()), "/", Printable(t.k8s_pod()));
  return absl::StrCat(ClassName(t.tenant_class()), " ", Printable(t.name()), " (pid ", t.pid(),
                      ", gpu ", gpu, pod, ")");
}

bool OnGpu(const v1::TenantInfo& t, uint32_t gpu) {
  for (const v1::Usage& u : t.usage()) {
    if (u.gpu_index() == gpu) return true;
  }
  return false;
}

const v1::ComputeUse* ComputeOn(const v1::TenantInfo& t, uint32_t gpu) {
  for (const v1::ComputeUse& c : t.compute()) {
    if (c.gpu_index() == gpu) return &c;
  }
  return nullptr;
}

// The tenants of one GPU by class.
void CheckClasses(uint32_t gpu, const v1::ListTenantsResponse& tenants,
                  std::vector<CheckLine>* out) {
  int ls = 0, be = 0;
  std::vector<std::string> unknown;
  for (const v1::TenantInfo& t : tenants.tenants()) {
    if (!OnGpu(t, gpu)) continue;
    if (t.tenant_class() == v1::LATENCY_SENSITIVE) {
      ++ls;
    } else if (t.tenant_class() == v1::BEST_EFFORT) {
      ++be;
    } else {
      unknown.push_back(absl::StrCat(t.pid()));
    }
  }
  const std::string check = absl::StrCat("tenants gpu ", gpu);
  const std::string found = absl::StrCat(ls, " LS, ", be, " BE");
  if (!unknown.empty()) {
    out->push_back(Warn(check,
                        absl::StrCat(found, ", ", unknown.size(), " of unknown class (pid ",
                                     absl::StrJoin(unknown, ", "), ")"),
                        "missilectl set --pid PID --class-to ls|be"));
  } else if (be > 0 && ls == 0) {
    out->push_back(Warn(check, found + ": BE tenants but no LS tenant, so pacing protects nobody",
                        "start the latency-sensitive service with missile-run --class ls (or "
                        "MISSILE_TENANT_CLASS=ls); ignore if there is none"));
  } else if (ls + be == 0) {
    out->push_back(Ok(check, "no tenants yet"));
  } else {
    out->push_back(Ok(check, found));
  }
}

// A BE tenant's LS reserve, where one is asked for: a warning when it is not in force.
std::optional<CheckLine> CheckReserve(const v1::TenantInfo& t, uint32_t gpu,
                                      const v1::ComputeUse& c, uint32_t asked) {
  if (asked == 0) return std::nullopt;
  const std::string check = TenantCheck(t, gpu) + " reserve";
  switch (c.reserve()) {
    case v1::ComputeUse::RESERVE_ACTIVE:
      return Ok(check, absl::StrCat("its kernels leave ", c.reserve_tpcs(), " TPCs free"));
    case v1::ComputeUse::RESERVE_NOT_MPS:
      return Warn(check, "none: the tenant is time-sliced, not an MPS client",
                  "start it while the MPS control daemon runs (compute.mps = \"start\")");
    case v1::ComputeUse::RESERVE_UNAVAILABLE:
      return Warn(check, "none: the driver's TPC masks did not work as verified",
                  "see docs/pacing.md, \"The LS reserve on MPS\"");
    default:
      return Ok(check, "not in force yet (no LS tenant, or no kernel launched)");
  }
}

// Per tenant and GPU: an LS's busy ratio, a BE's held ratio and reserve.
void CheckTenants(const v1::StatusResponse& status, const v1::ListTenantsResponse& tenants,
                  std::vector<CheckLine>* out) {
  const uint32_t asked = status.has_pacing() ? status.pacing().ls_reserve_tpcs() : 0;
  for (const v1::PoolStatus& pool : status.pools()) {
    const uint32_t gpu = pool.gpu().index();
    for (const v1::TenantInfo& t : tenants.tenants()) {
      if (!OnGpu(t, gpu) || t.tenant_class() == v1::TENANT_CLASS_UNSPECIFIED) continue;
      const v1::ComputeUse* c = ComputeOn(t, gpu);
      if (c == nullptr) {
        out->push_back(Ok(TenantCheck(t, gpu), "its GPU work is not paced here"));
        continue;
      }
      if (t.tenant_class() == v1::LATENCY_SENSITIVE) {
        out->push_back(Ok(TenantCheck(t, gpu), absl::StrCat("busy ", Percent(c->ls_busy_share()),
                                                            "% of about the last second, ",
                                                            c->submissions(), " work items")));
        continue;
      }
      out->push_back(
          Ok(TenantCheck(t, gpu),
             absl::StrCat("held ", Percent(c->held_share()), "% of about the last second, ",
                          FormatHeld(c->held_ms()), " in all, ", c->submissions(), " work items")));
      if (std::optional<CheckLine> r = CheckReserve(t, gpu, *c, asked)) out->push_back(*r);
    }
  }
}

std::string JsonString(const std::string& s) {
  std::string out = "\"";
  for (unsigned char c : s) {
    if (c == '"' || c == '\\') {
      out += '\\';
      out += static_cast<char>(c);
    } else if (c < 0x20) {
      out += absl::StrFormat("\\u%04x", c);
    } else {
      out += static_cast<char>(c);
    }
  }
  return out + "\"";
}

const char* LevelName(CheckLevel level) {
  switch (level) {
    case CheckLevel::kOk:
      return "ok";
    case CheckLevel::kWarn:
      return "warn";
    case CheckLevel::kFail:
      return "FAIL";
  }
  return "FAIL";
}

}  // namespace

std::vector<CheckLine> EvaluateCheck(const CheckInput& in) {
  std::vector<CheckLine> out;
  if (!in.socket_status.ok()) {
    out.push_back(Fail("socket", std::string(in.socket_status.message())));
    return out;
  }
  out.push_back(Ok("socket", in.socket + ": a socket this user may connect to"));
  if (!in.status) {
    out.push_back(Fail("daemon", in.status_error));
    return out;
  }
  const v1::StatusResponse& status = *in.status;
  out.push_back(Ok("daemon", absl::StrCat("missiled ", Printable(status.version()), " answers, up ",
                                          FormatDuration(status.uptime_s()))));
  CheckGpus(status, &out);
  CheckMpsAndPacing(status, &out);
  if (!in.tenants) {
    out.push_back(Fail("tenants", in.tenants_error));
    return out;
  }
  for (const v1::PoolStatus& pool : status.pools()) {
    CheckClasses(pool.gpu().index(), *in.tenants, &out);
  }
  CheckTenants(status, *in.tenants, &out);
  return out;
}

int CheckExitCode(const std::vector<CheckLine>& lines) {
  for (const CheckLine& l : lines) {
    if (l.level == CheckLevel::kFail) return 1;
  }
  return 0;
}

std::string FormatCheck(const std::vector<CheckLine>& lines) {
  std::string out;
  for (const CheckLine& l : lines) {
    absl::StrAppend(&out, absl::StrFormat("%-4s  ", LevelName(l.level)), l.check, ": ", l.found);
    if (!l.todo.empty()) absl::StrAppend(&out, "; ", l.todo);
    out += '\n';
  }
  return out;
}

std::string CheckToJson(const std::vector<CheckLine>& lines) {
  std::vector<std::string> items;
  for (const CheckLine& l : lines) {
    items.push_back(absl::StrCat(
        "{\"level\":", JsonString(LevelName(l.level)), ",\"check\":", JsonString(l.check),
        ",\"found\":", JsonString(l.found), ",\"todo\":", JsonString(l.todo), "}"));
  }
  return absl::StrCat("{\"checks\":[", absl::StrJoin(items, ","),
                      "],\"exit_status\":", CheckExitCode(lines), "}\n");
}

CheckResult RunCheckWith(const CtlArgs& args, const absl::Status& socket_status,
                         v1::Admin::StubInterface* stub) {
  CheckInput in;
  in.socket = args.socket;
  in.socket_status = socket_status;
  if (socket_status.ok() && stub != nullptr) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    v1::StatusResponse status;
    grpc::Status s = stub->Status(&ctx, v1::StatusRequest(), &status);
    if (s.ok()) {
      in.status = std::move(status);
      grpc::ClientContext list_ctx;
      list_ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
      v1::ListTenantsResponse tenants;
      s = stub->ListTenants(&list_ctx, v1::ListTenantsRequest(), &tenants);
      if (s.ok()) {
        in.tenants = std::move(tenants);
      } else {
        in.tenants_error = RpcErrorMessage(s, args.socket);
      }
    } else {
      in.status_error = RpcErrorMessage(s, args.socket);
    }
  }
  const std::vector<CheckLine> lines = EvaluateCheck(in);
  return {args.json ? CheckToJson(lines) : FormatCheck(lines), CheckExitCode(lines)};
}

CheckResult RunCheck(const CtlArgs& args) {
  const absl::Status socket_status = CheckSocket(args.socket);
  if (!socket_status.ok()) return RunCheckWith(args, socket_status, nullptr);
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel("unix:" + args.socket, grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Admin::Stub> stub = v1::Admin::NewStub(channel);
  return RunCheckWith(args, socket_status, stub.get());
}

}  // namespace missile::cli
