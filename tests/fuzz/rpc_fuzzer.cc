// Fuzzes the daemon's gRPC request handlers (daemon/rpc_handlers.h), in process and without
// the transport: the input is a sequence of calls, each
//   u8 call, u8 caller, u16 length, `length` bytes of the call's serialized request
// made on one DaemonCore (fresh per input). Callers are this process as an ordinary user, as
// root, as a member of the admin group, and its parent process as another user; so sessions of
// two processes and every permission path are reachable. Session and block ids below 256 in a
// request name the sessions registered and blocks allocated so far in this input (the daemon's
// ids start at a random base, which no input could guess).
// Nothing may crash, leak (memory, or descriptors once the core is gone) or hang, and every
// call must answer with a status.
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "daemon/rpc_handlers.h"
#include "google/protobuf/stubs/logging.h"
#include "fuzz_daemon.h"

namespace missile::daemon::fuzz {
namespace {

enum Call : uint8_t {
  kRegister,
  kAllocate,
  kFree,
  kGetUsage,
  kStatus,
  kListTenants,
  kSetPolicy,
  kSetPacing,
  kEndSession,
  kCalls
};

PeerCredentials Caller(uint8_t which) {
  switch (which % 4) {
    case 0: return {getpid(), 1000, 1000};
    case 1: return {getpid(), 0, 0};
    case 2: return {getpid(), 1001, 4242};  // the admin group
    default: return {getppid(), 1002, 1002};
  }
}

struct Ids {
  std::vector<uint64_t> sessions;
  std::vector<uint64_t> blocks;

  uint64_t Session(uint64_t id) const {
    return id < 256 && !sessions.empty() ? sessions[id % sessions.size()] : id;
  }
  uint64_t Block(uint64_t id) const {
    return id < 256 && !blocks.empty() ? blocks[id % blocks.size()] : id;
  }
};

template <typename Request>
bool Decode(const std::string& bytes, Request* req) {
  return req->ParseFromString(bytes);
}

// One call; false when its request did not decode.
bool RunCall(DaemonCore* core, Ids* ids, uint8_t call, const PeerCredentials& creds,
             const std::string& bytes) {
  grpc::Status status;
  switch (call % kCalls) {
    case kRegister: {
      v1::RegisterRequest req;
      v1::RegisterResponse resp;
      if (!Decode(bytes, &req)) return false;
      status = rpc::Register(core, creds, req, &resp);
      if (status.ok()) ids->sessions.push_back(resp.session_id());
      break;
    }
    case kAllocate: {
      v1::AllocateRequest req;
      v1::AllocateResponse resp;
      if (!Decode(bytes, &req)) return false;
      req.set_session_id(ids->Session(req.session_id()));
      status = rpc::Allocate(core, creds, req, &resp);
      for (const v1::Block& b : resp.blocks()) ids->blocks.push_back(b.id());
      break;
    }
    case kFree: {
      v1::FreeRequest req;
      v1::FreeResponse resp;
      if (!Decode(bytes, &req)) return false;
      req.set_session_id(ids->Session(req.session_id()));
      for (int i = 0; i < req.block_ids_size(); ++i) req.set_block_ids(i, ids->Block(req.block_ids(i)));
      status = rpc::Free(core, creds, req, &resp);
      break;
    }
    case kGetUsage: {
      v1::GetUsageRequest req;
      v1::Usage resp;
      if (!Decode(bytes, &req)) return false;
      req.set_session_id(ids->Session(req.session_id()));
      status = rpc::GetUsage(core, creds, req, &resp);
      break;
    }
    case kStatus: {
      v1::StatusResponse resp;
      status = rpc::Status(core, &resp);
      break;
    }
    case kListTenants: {
      v1::ListTenantsResponse resp;
      status = rpc::ListTenants(core, &resp);
      break;
    }
    case kSetPolicy: {
      v1::SetPolicyRequest req;
      v1::SetPolicyResponse resp;
      if (!Decode(bytes, &req)) return false;
      status = rpc::SetPolicy(core, creds, req, &resp);
      break;
    }
    case kSetPacing: {
      v1::SetPacingRequest req;
      v1::SetPacingResponse resp;
      if (!Decode(bytes, &req)) return false;
      status = rpc::SetPacing(core, creds, req, &resp);
      break;
    }
    case kEndSession: {
      // What a closed side channel or Watch stream does between two calls.
      if (!ids->sessions.empty()) {
        core->EndSession(ids->sessions[bytes.size() % ids->sessions.size()], "fuzz");
      }
      return true;
    }
  }
  // A refusal must say what was wrong.
  if (!status.ok() && status.error_message().empty()) {
    fprintf(stderr, "fuzz: call %u refused with code %d and no message\n", call % kCalls,
            static_cast<int>(status.error_code()));
    abort();
  }
  return true;
}

}  // namespace
}  // namespace missile::daemon::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace missile::daemon::fuzz;
  // protobuf logs every string field that is not UTF-8; the fuzzer makes many.
  static const bool silenced = (SilenceDaemonLogs(), google::protobuf::SetLogHandler(nullptr), true);
  (void)silenced;
  const int fds_before = OpenDescriptors();
  {
    std::unique_ptr<missile::daemon::DaemonCore> core = MakeCore();
    Ids ids;
    Bytes in(data, size);
    for (int calls = 0; !in.empty() && calls < 64; ++calls) {
      const uint8_t call = in.Get<uint8_t>();
      const uint8_t caller = in.Get<uint8_t>();
      const uint16_t length = in.Get<uint16_t>();
      const std::string bytes = in.Take(length);
      RunCall(core.get(), &ids, call, Caller(caller), bytes);
    }
  }
  const int fds_after = OpenDescriptors();
  if (fds_after != fds_before) {
    fprintf(stderr, "fuzz: %d descriptors open before the input, %d after\n", fds_before,
            fds_after);
    abort();
  }
  return 0;
}
