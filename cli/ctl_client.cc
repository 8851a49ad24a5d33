#include "ctl_client.h"

#include <grp.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <vector>

#include "absl/status/status.h"
#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_format.h"
#include "ctl_format.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "missile/common/status_macros.h"

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

// What an operator checks first when the daemon does not answer.
constexpr char kIsItRunning[] = "is missiled running? check 'systemctl status missiled'";

std::string GroupName(gid_t gid) {
  group gr{}, *result = nullptr;
  std::vector<char> buf(16384);
  if (getgrgid_r(gid, &gr, buf.data(), buf.size(), &result) == 0 && result != nullptr) {
    return gr.gr_name;
  }
  return std::to_string(gid);
}

// The permission hint for the socket or, when the socket cannot even be looked at, for the
// nearest directory above it that the caller may not search.
std::string PermissionHintFor(const std::string& socket) {
  struct stat st;
  if (stat(socket.c_str(), &st) == 0) return PermissionHint(socket, st);
  for (std::filesystem::path dir = std::filesystem::path(socket).parent_path();
       !dir.empty() && dir != dir.root_path(); dir = dir.parent_path()) {
    if (stat(dir.c_str(), &st) == 0 && access(dir.c_str(), X_OK) != 0) {
      return PermissionHint(dir.string(), st);
    }
  }
  return "permission denied";
}

template <typename Response>
absl::StatusOr<std::string> Render(const CtlArgs& args, const Response& response,
                                   std::string (*format)(const Response&)) {
  if (args.json) return ToJson(response);
  return format(response);
}

}  // namespace

std::string PermissionHint(const std::string& path, const struct stat& st) {
  const std::string group = GroupName(st.st_gid);
  const std::string what = absl::StrFormat("permission denied (%s is group '%s', mode %04o)",
                                           path, group, st.st_mode & 07777);
  if (!(S_ISDIR(st.st_mode) ? (st.st_mode & S_IXGRP) : (st.st_mode & S_IWGRP))) {
    return what + "; only its owner (uid " + std::to_string(st.st_uid) + ") or root may connect";
  }
  // Joining root's group would hand the user far more than missiled: the socket is root's
  // because daemon.socket_group is unset, and that is for an administrator to change.
  if (st.st_gid == 0) {
    if (S_ISDIR(st.st_mode)) {
      return what + "; an administrator must let others search it (chmod o+x " + path +
             ") or move daemon.socket; or run as root";
    }
    return what + "; an administrator must set daemon.socket_group (e.g. to 'missile') in " +
           "missiled.toml, restart missiled and add this user to that group (usermod -aG " +
           "missile USER); or run as root";
  }
  return what + "; join the group '" + group + "' (usermod -aG " + group +
         " USER, then log in again) or run as root";
}

absl::Status CheckSocket(const std::string& path) {
  struct stat st;
  if (stat(path.c_str(), &st) != 0) {
    int err = errno;
    if (err == ENOENT) {
      return absl::UnavailableError(Unreachable(path, std::string("no such socket; ") +
                                                          kIsItRunning +
                                                          " (or give --socket PATH)"));
    }
    if (err == EACCES) return absl::PermissionDeniedError(Unreachable(path, PermissionHintFor(path)));
    return absl::UnavailableError(Unreachable(path, std::strerror(err)));
  }
  if (!S_ISSOCK(st.st_mode)) return absl::UnavailableError(Unreachable(path, "not a socket"));
  // Connecting to a Unix socket needs write permission on it.
  if (access(path.c_str(), W_OK) != 0 && errno == EACCES) {
    return absl::PermissionDeniedError(Unreachable(path, PermissionHint(path, st)));
  }
  return absl::OkStatus();
}

std::string RpcErrorMessage(const grpc::Status& status, const std::string& socket) {
  std::string message = OneLine(status.error_message());
  switch (status.error_code()) {
    case grpc::StatusCode::UNAVAILABLE:
    {
      // gRPC's text names the failed connect; say what it means for the operator.
      const std::string lower = absl::AsciiStrToLower(message);
      if (absl::StrContains(lower, "permission denied")) {
        return Unreachable(socket, PermissionHintFor(socket));
      }
      if (absl::StrContains(lower, "connection refused")) {
        return Unreachable(socket, std::string("nothing listens on the socket; ") + kIsItRunning);
      }
      if (absl::StrContains(lower, "no such file")) {
        return Unreachable(socket, std::string("no such socket; ") + kIsItRunning);
      }
      return Unreachable(socket, message + "; " + kIsItRunning);
    }
    case grpc::StatusCode::CANCELLED:
      // The server cancels calls in flight when it shuts down; gRPC's text is only "CANCELLED".
      return "missiled at " + socket + " ended the call: it is stopping or restarting; check " +
             "'systemctl status missiled'";
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
      // The tenants are read just before and after the change, so the output can say what
      // changed. Another admin's change in between would show as this one's; a failed read
      // leaves only the count.
      const v1::SetPolicyRequest request = BuildSetPolicyRequest(args.set);
      v1::ListTenantsResponse before, after;
      bool have_before = false;
      if (!args.json) {
        grpc::ClientContext list_ctx;
        list_ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
        have_before = stub.ListTenants(&list_ctx, v1::ListTenantsRequest(), &before).ok();
      }
      v1::SetPolicyResponse response;
      status = stub.SetPolicy(&ctx, request, &response);
      if (!status.ok()) break;
      if (args.json) return ToJson(response);
      grpc::ClientContext list_ctx;
      list_ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
      if (have_before && stub.ListTenants(&list_ctx, v1::ListTenantsRequest(), &after).ok()) {
        return FormatSetPolicy(response, request, before, after);
      }
      return FormatSetPolicy(response);
    }
    case CtlCommand::kSetPacing: {
      v1::SetPacingResponse response;
      status = stub.SetPacing(&ctx, BuildSetPacingRequest(args.set.pacing), &response);
      if (status.ok()) return Render(args, response, &FormatSetPacing);
      break;
    }
    case CtlCommand::kHelp:
    case CtlCommand::kVersion:
    case CtlCommand::kTop:    // RunTop (ctl_top.h): it owns the terminal
    case CtlCommand::kCheck:  // RunCheck (ctl_check.h): its own exit status
      return absl::InvalidArgumentError("help, version, top and check are not one-call commands");
  }
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      RpcErrorMessage(status, args.socket));
}

absl::StatusOr<std::string> RunCtl(const CtlArgs& args) {
  MISSILE_RETURN_IF_ERROR(CheckSocket(args.socket));
  std::shared_ptr<grpc::Channel> channel =
      grpc::CreateChannel("unix:" + args.socket, grpc::InsecureChannelCredentials());
  std::unique_ptr<v1::Admin::Stub> stub = v1::Admin::NewStub(channel);
  return RunCtlCommand(args, *stub);
}

}  // namespace missile::cli
