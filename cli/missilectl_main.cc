// missilectl: the admin CLI of missiled. See ctl_args.h for the command line.
// Exit status: 0 done, 1 the daemon could not be reached, refused, or went away during `top`
// (`check`: a check failed), 2 bad usage.
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "ctl_args.h"
#include "ctl_check.h"
#include "ctl_client.h"
#include "ctl_top.h"
#include "grpc/support/log.h"
#include "missile/version.h"

namespace {

void Fail(const std::string& reason) { std::fprintf(stderr, "missilectl: %s\n", reason.c_str()); }

// gRPC logs connection failures on its own; the CLI reports each failure in one line instead.
// GRPC_VERBOSITY in the environment brings gRPC's log back for debugging.
void QuietGrpcLog(gpr_log_func_args*) {}

}  // namespace

int main(int argc, char** argv) {
  if (std::getenv("GRPC_VERBOSITY") == nullptr) gpr_set_log_function(QuietGrpcLog);
  std::vector<std::string> args(argv + 1, argv + argc);
  absl::StatusOr<missile::cli::CtlArgs> parsed =
      missile::cli::ParseCtlArgs(args, missile::cli::DefaultSocket(std::getenv("MISSILE_SOCKET")));
  if (!parsed.ok()) {
    Fail(std::string(parsed.status().message()));
    return 2;
  }
  if (parsed->command == missile::cli::CtlCommand::kHelp) {
    std::fputs(missile::cli::CtlUsage().c_str(), stdout);
    return 0;
  }
  if (parsed->command == missile::cli::CtlCommand::kVersion) {
    std::printf("missilectl %s\n", missile::kVersion);
    return 0;
  }
  if (parsed->command == missile::cli::CtlCommand::kTop) {
    absl::StatusOr<int> status = missile::cli::RunTop(*parsed);
    if (!status.ok()) Fail(std::string(status.status().message()));
    return status.ok() ? *status : 1;
  }
  if (parsed->command == missile::cli::CtlCommand::kCheck) {
    const missile::cli::CheckResult check = missile::cli::RunCheck(*parsed);
    std::fputs(check.out.c_str(), stdout);
    return std::fflush(stdout) == 0 ? check.exit_status : 1;
  }
  absl::StatusOr<std::string> out = missile::cli::RunCtl(*parsed);
  if (!out.ok()) {
    Fail(std::string(out.status().message()));
    return 1;
  }
  std::fputs(out->c_str(), stdout);
  return std::fflush(stdout) == 0 ? 0 : 1;
}
