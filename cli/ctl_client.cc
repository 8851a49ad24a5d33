#include "ctl_client.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>

#include "absl/status/status.h"
#include "ctl_format.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"

namespace missile::cli {

namespace {

std::string OneLine(std::string text) {
  for (char& c : text) {
    if (c == '\n' || c == '\r') c = ' ';
  }
  return text;
}

std::string Unreachable(const std::string& socket, const std::string& why) {
  return "cannot reach missiled at " + socket + ": " + why;
}

template <typename Response>
absl::StatusOr<std::string> Render(const CtlArgs& args, const Response& response,
                                   std::string (*format)(const Response&)) {
  if (args.json) return ToJson(response);
  return format(response);
}

}  // namespace

absl::Status CheckSocket(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    int err = errno;
    return absl::UnavailableError(Unreachable(path, std::strerror(err)));
  }
  if (!S_ISSOCK(st.st_mode)) return absl::UnavailableError(Unreachable(path, "not a socket"));
  return absl::OkStatus();
}

std::string RpcErrorMessage(const grpc::Status& status, const std::string& socket) {
  std::string message = OneLine(status.error_message());
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
      return Unreachable(socket, message);
    case grpc::StatusCode::DEADLINE_EXCEEDED:
      return Unreachable(socket,
                         "no answer within " + std::to_string(kCallDeadline.count()) + " s");
    default:
      // gRPC's codes are numerically absl's, and absl spells them "PERMISSION_DENIED".
      return absl::StatusCodeToString(static_cast<absl::StatusCode>(status.error_code())) + ": " +
             message;
  }
}

absl::StatusOr<std::string> RunCtlCommand(const CtlArgs& args, v1::Admin::StubInterface& stub) {
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  grpc::Status status;
  switch (args.command) {
    case CtlCommand::kStatus: {
      v1::StatusResponse response;
      status = stub.Status(&ctx, v1::StatusRequest(), &response);
      if (status.ok()) return Render(args, response, &FormatStatus);
      break;
    }
    case CtlCommand::kTenants: {
      v1::ListTenantsResponse response;
      status = stub.ListTenants(&ctx, v1::ListTenantsRequest(), &response);
      if (status.ok()) return Render(args, response, &FormatTenants);
      break;
    }
    case CtlCommand::kSet: {
      v1::SetPolicyResponse response;
      status = stub.SetPolicy(&ctx, BuildSetPolicyRequest(args.set), &response);
      if (status.ok()) return Render(args, response, &FormatSetPolicy);
      break;
    }
    case CtlCommand::kSetPacing: {
      v1::SetPacingResponse response;
      status = stub.SetPacing(&ctx, BuildSetPacingRequest(args.set.pacing), &response);
      if (status.ok()) return Render(args, response, &FormatSetPacing);
      break;
    }
    case CtlCommand::kHelp:
    case CtlCommand::kVersion:
      return absl::InvalidArgumentError("help and version are not daemon commands");
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      RpcErrorMessage(status, args.socket));
}

absl::StatusOr<std::string> RunCtl(const CtlArgs& args) {
  if (absl::Status s = CheckSocket(args.socket); !s.ok()) return s;
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel("unix:" + args.socket, grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Admin::Stub> stub = v1::Admin::NewStub(channel);
  return RunCtlCommand(args, *stub);
}

}  // namespace missile::cli
