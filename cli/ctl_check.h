// `missilectl check`: the health and isolation check an operator runs after installing. It
// reads what `status` and `tenants` read and judges it, one line per check, in order: the
// socket, the daemon, each GPU, MPS, pacing, the tenants by class per GPU, then each LS tenant
// (its busy ratio) and each BE tenant (its held ratio and, where one is asked for, its LS
// reserve). Each line is `ok`, `warn` or `FAIL`, what was found and, when not ok, what to do.
//
// The judging (EvaluateCheck) is pure: answers in, lines out. RunCheck does the calls.
// Thread-safe (no shared state); RunCheck blocks for at most two calls of kCallDeadline each.
#ifndef MISSILE_CLI_CTL_CHECK_H_
#define MISSILE_CLI_CTL_CHECK_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "ctl_args.h"
#include "missile/v1/missile.grpc.pb.h"

namespace missile::cli {

enum class CheckLevel { kOk, kWarn, kFail };

struct CheckLine {
  CheckLevel level = CheckLevel::kOk;
  std::string check;  // what was checked: "socket", "daemon", "gpu 0", "ls web (pid 42, gpu 0)"
  std::string found;
  std::string todo;  // what to do about it; empty when ok
};

// What the check saw. A failed step leaves the later ones unset.
struct CheckInput {
  std::string socket;
  absl::Status socket_status;                // CheckSocket (ctl_client.h)
  std::optional<v1::StatusResponse> status;  // unset: the call failed, status_error says why
  std::string status_error;
  std::optional<v1::ListTenantsResponse> tenants;
  std::string tenants_error;
};

std::vector<CheckLine> EvaluateCheck(const CheckInput& in);

// 0 when every line is ok or warn, 1 when one is FAIL.
int CheckExitCode(const std::vector<CheckLine>& lines);

// "ok    socket: found" and, when not ok, "; todo": one line each.
std::string FormatCheck(const std::vector<CheckLine>& lines);

// {"checks":[{"level":"ok","check":...,"found":...,"todo":...},...],"exit_status":0} and a
// newline: one line of JSON.
std::string CheckToJson(const std::vector<CheckLine>& lines);

struct CheckResult {
  std::string out;  // for stdout
  int exit_status = 0;
};

// The calls on `stub` after the socket check `socket_status`, judged.
CheckResult RunCheckWith(const CtlArgs& args, const absl::Status& socket_status,
                         v1::Admin::StubInterface* stub);

// CheckSocket, then (when it passed) the calls on a channel to args.socket.
CheckResult RunCheck(const CtlArgs& args);

}  // namespace missile::cli

#endif  // MISSILE_CLI_CTL_CHECK_H_
