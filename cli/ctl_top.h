// `missilectl top`: a refreshing terminal view of missiled's GPUs and tenants, like
// `nvidia-smi dmon` or top(1): per GPU the pool; per tenant and GPU its memory against its
// quota, PCIe rates per direction (from the byte counters of two successive samples) and its
// share of the link, and its pacing figures (BE: time held and held share; LS: busy share).
// It uses only the Admin service's Status and ListTenants.
//
// On a terminal it takes the screen (the alternate screen, cursor hidden, the terminal in
// non-canonical mode without echo), redraws every --interval seconds and quits on `q`; the
// terminal is restored on every way out: `q`, end of input, an error, and SIGINT, SIGTERM,
// SIGHUP and SIGQUIT (after which the signal takes its default course). When stdout is not a
// terminal, or with --once, it prints one frame (rates need two samples: shown as "-") and exits.
// Plain ANSI escapes only, so it works over ssh.
// Thread-safety: FormatTopFrame is pure; RunTop owns the terminal and must run on one thread.
#ifndef MISSILE_CLI_CTL_TOP_H_
#define MISSILE_CLI_CTL_TOP_H_

#include <string>

#include "absl/status/statusor.h"
#include "ctl_args.h"
#include "grpcpp/support/status.h"
#include "missile/v1/missile.pb.h"

namespace missile::cli {

// One reading of the daemon.
struct TopSample {
  v1::StatusResponse status;
  v1::ListTenantsResponse tenants;
  double at_s = 0;  // when it was read, on a monotonic clock
};

// The frame's text: a header line, a GPU table and a tenant table (one row per tenant and
// GPU). Rates are computed against `before` when given (same session and GPU), else "-".
// `interval_s` is shown in the header.
std::string FormatTopFrame(const TopSample& now, const TopSample* before, double interval_s);

// Runs `top` as described above. Returns the exit status (0 on `q` or after one frame); an
// error when the daemon cannot be reached, as RunCtl's, or goes away while the view runs
// (TopEndedMessage; missilectl then exits with status 1).
absl::StatusOr<int> RunTop(const CtlArgs& args);

// The line for a sample that failed after the first frame: "missiled went away (SOCKET): ..."
// when the daemon stopped (the call cancelled, or no daemon to connect to), else RpcErrorMessage.
std::string TopEndedMessage(const grpc::Status& status, const std::string& socket);

}  // namespace missile::cli

#endif  // MISSILE_CLI_CTL_TOP_H_
