// The Tenant and Admin RPCs of missile.v1 as plain functions over DaemonCore: each translates
// one request into DaemonCore calls and the result into its response. RpcServer's services
// look up the caller (SO_PEERCRED, see rpc_server.h) and call these; tests and the fuzzer
// (tests/fuzz) call them directly with credentials of their choosing, without gRPC's transport.
// Every function answers any request, however malformed, with a status: INVALID_ARGUMENT for a
// request that makes no sense, and then nothing changes.
// Thread-safety: any thread, as DaemonCore.
#ifndef MISSILE_DAEMON_RPC_HANDLERS_H_
#define MISSILE_DAEMON_RPC_HANDLERS_H_

#include <grpcpp/grpcpp.h>

#include <cstdint>

#include "absl/status/status.h"
#include "core.h"
#include "missile/v1/missile.pb.h"

namespace missile::daemon::rpc {

// The protocol version of RegisterRequest/RegisterResponse this daemon speaks.
inline constexpr uint32_t kProtocolVersion = 1;

grpc::Status ToGrpc(const absl::Status& s);
v1::TenantClass ToProto(TenantClass cls);
void FillUsage(uint32_t gpu, const Usage& u, v1::Usage* out);

// --- Tenant service (the shim) ---
grpc::Status Register(DaemonCore* core, const PeerCredentials& creds,
                      const v1::RegisterRequest& req, v1::RegisterResponse* resp);
grpc::Status Allocate(DaemonCore* core, const PeerCredentials& creds,
                      const v1::AllocateRequest& req, v1::AllocateResponse* resp);
grpc::Status Free(DaemonCore* core, const PeerCredentials& creds, const v1::FreeRequest& req,
                  v1::FreeResponse* resp);
grpc::Status GetUsage(DaemonCore* core, const PeerCredentials& creds,
                      const v1::GetUsageRequest& req, v1::Usage* resp);

// --- Admin service (missilectl); Status and ListTenants are open to every caller ---
grpc::Status Status(DaemonCore* core, v1::StatusResponse* resp);
grpc::Status ListTenants(DaemonCore* core, v1::ListTenantsResponse* resp);
grpc::Status SetPolicy(DaemonCore* core, const PeerCredentials& creds,
                       const v1::SetPolicyRequest& req, v1::SetPolicyResponse* resp);
grpc::Status SetPacing(DaemonCore* core, const PeerCredentials& creds,
                       const v1::SetPacingRequest& req, v1::SetPacingResponse* resp);

}  // namespace missile::daemon::rpc

#endif  // MISSILE_DAEMON_RPC_HANDLERS_H_
