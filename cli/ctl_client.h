// Runs one missilectl command against missiled's Admin service and renders the answer.
//
// Errors come back as one line, ready for "missilectl: <line>": an unreachable daemon as
// "cannot reach missiled at PATH: <what an operator does about it>" (no socket or nothing
// listening: check the service; no permission: the group to join, looked up on the socket),
// any other gRPC failure as "CODE_NAME: message".
// Each call has a 5 s deadline. Thread-safe (no shared state); blocks for the call.
#ifndef MISSILE_CLI_CTL_CLIENT_H_
#define MISSILE_CLI_CTL_CLIENT_H_

#include <sys/stat.h>

#include <chrono>
#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "ctl_args.h"
#include "grpcpp/support/status.h"
#include "missile/v1/missile.grpc.pb.h"

namespace missile::cli {

inline constexpr std::chrono::seconds kCallDeadline{5};

// OK when `path` exists, is a socket and the caller may connect to it, so a missing daemon or a
// missing permission fails at once, not after a dial.
absl::Status CheckSocket(const std::string& path);

// Why the caller may not connect to `path` (whose metadata is `st`), and what would let it: the
// group to join when the mode lets the group in, else root or the owner. Never root's group
// (gid 0): for that, what an administrator must change.
std::string PermissionHint(const std::string& path, const struct stat& st);

// The one-line reason for a failed call to the daemon at `socket`.
std::string RpcErrorMessage(const grpc::Status& status, const std::string& socket);

// Calls the command's RPC on `stub` and returns what to print on stdout (a table, or JSON when
// args.json). Not for CtlCommand::kHelp.
absl::StatusOr<std::string> RunCtlCommand(const CtlArgs& args, v1::Admin::StubInterface& stub);

// CheckSocket, dial "unix:" + args.socket, RunCtlCommand.
absl::StatusOr<std::string> RunCtl(const CtlArgs& args);

}  // namespace missile::cli

#endif  // MISSILE_CLI_CTL_CLIENT_H_
