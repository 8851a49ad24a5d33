#include "ctl_top.h"

#include <poll.h>
#include <signal.h>
#include <sys/ioctl.h>
#include <termios.h>
#include <time.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <map>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "ctl_client.h"
#include "ctl_format.h"
#include "flags.h"
#include "grpcpp/client_context.h"
#include "grpcpp/create_channel.h"
#include "grpcpp/security/credentials.h"
#include "missile/common/size.h"
#include "missile/common/status_macros.h"

namespace missile::cli {
namespace {

std::string Share(double share) { return absl::StrFormat("%d%%", static_cast<int>(share * 100 + 0.5)); }

std::string Rate(uint64_t now, uint64_t before, double seconds) {
  if (seconds <= 0 || now < before) return "-";
  return FormatSize(static_cast<uint64_t>(std::llround(static_cast<double>(now - before) / seconds))) +
         "/s";
}

double MonotonicSeconds() {
  timespec ts{};
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return static_cast<double>(ts.tv_sec) + static_cast<double>(ts.tv_nsec) / 1e9;
}

// The tenant's figures on one GPU, keyed for finding the previous sample's.
struct PcieKey {
  uint64_t session;
  uint32_t gpu;
  bool operator<(const PcieKey& o) const {
    return session != o.session ? session < o.session : gpu < o.gpu;
  }
};

std::vector<std::string> GpuRow(const v1::PoolStatus& p) {
  return {absl::StrCat(p.gpu().index()), Printable(p.gpu().name()),
          FormatSize(p.leased_bytes()) + " / " + FormatSize(p.capacity_bytes()),
          FormatSize(p.created_bytes()), FormatSize(p.cached_bytes()), absl::StrCat(p.tenants()),
          absl::StrCat(p.gpu().colours())};
}

}  // namespace

std::string FormatTopFrame(const TopSample& now, const TopSample* before, double interval_s) {
  std::string out = absl::StrFormat(
      "missiled %s, up %s, tenants: %d; every %.1f s; q quits\n\n", Printable(now.status.version()),
      FormatDuration(now.status.uptime_s()), now.status.tenants(), interval_s);
  std::vector<std::vector<std::string>> gpus = {
      {"GPU", "NAME", "LEASED / CAPACITY", "CREATED", "CACHED", "TENANTS", "COLOURS"}};
  for (const v1::PoolStatus& p : now.status.pools()) gpus.push_back(GpuRow(p));
  absl::StrAppend(&out, FormatTable(gpus), "\n");

  std::map<PcieKey, v1::PcieUse> previous;
  if (before != nullptr) {
    for (const v1::TenantInfo& t : before->tenants.tenants()) {
      for (const v1::PcieUse& u : t.pcie()) previous[{t.session_id(), u.gpu_index()}] = u;
    }
  }
  const double seconds = before != nullptr ? now.at_s - before->at_s : 0;
  std::vector<std::vector<std::string>> rows = {{"PID", "NAME", "CLASS", "GPU", "MEMORY / QUOTA",
                                                 "H2D", "D2H", "H2D SHARE", "D2H SHARE", "HELD",
                                                 "HELD SHARE", "LS BUSY"}};
  for (const v1::TenantInfo& t : now.tenants.tenants()) {
    for (const v1::Usage& u : t.usage()) {
      std::vector<std::string> row = {absl::StrCat(t.pid()), Printable(t.name()),
                                      ClassName(t.tenant_class()), absl::StrCat(u.gpu_index()),
                                      FormatSize(u.used_bytes()) + " / " +
                                          FormatSize(u.quota_bytes())};
      std::vector<std::string> pcie = {"-", "-", "-", "-"};
      for (const v1::PcieUse& p : t.pcie()) {
        if (p.gpu_index() != u.gpu_index()) continue;
        auto prev = previous.find({t.session_id(), p.gpu_index()});
        if (prev != previous.end()) {
          pcie[0] = Rate(p.h2d_bytes(), prev->second.h2d_bytes(), seconds);
          pcie[1] = Rate(p.d2h_bytes(), prev->second.d2h_bytes(), seconds);
        }
        pcie[2] = Share(p.h2d_share());
        pcie[3] = Share(p.d2h_share());
      }
      row.insert(row.end(), pcie.begin(), pcie.end());
      std::vector<std::string> compute = {"-", "-", "-"};
      for (const v1::ComputeUse& c : t.compute()) {
        if (c.gpu_index() != u.gpu_index()) continue;
        const bool ls = t.tenant_class() == v1::LATENCY_SENSITIVE;
        compute = {ls ? "-" : FormatHeld(c.held_ms()), ls ? "-" : Share(c.held_share()),
                   ls ? Share(c.ls_busy_share()) : "-"};
      }
      row.insert(row.end(), compute.begin(), compute.end());
      rows.push_back(std::move(row));
    }
  }
  if (rows.size() == 1) {
    absl::StrAppend(&out, "no tenants\n");
  } else {
    absl::StrAppend(&out, FormatTable(rows));
  }
  return out;
}

namespace {

// The terminal as it was, for every way out. Written once before the handlers are installed,
// read by them: plain globals are what an async-signal handler may touch.
termios g_saved_termios;
bool g_raw = false;
volatile sig_atomic_t g_quit_signal = 0;

constexpr char kEnterScreen[] = "\x1b[?1049h\x1b[?25l";  // alternate screen, cursor hidden
constexpr char kLeaveScreen[] = "\x1b[?25h\x1b[?1049l";
constexpr char kHomeClear[] = "\x1b[H\x1b[2J";

void RestoreTerminal() {
  (void)!write(STDOUT_FILENO, kLeaveScreen, sizeof(kLeaveScreen) - 1);
  if (g_raw) tcsetattr(STDIN_FILENO, TCSAFLUSH, &g_saved_termios);
}

void OnSignal(int sig) { g_quit_signal = sig; }

constexpr int kQuitSignals[] = {SIGINT, SIGTERM, SIGHUP, SIGQUIT};

// Takes the terminal: handlers first (so no signal finds it half taken), then the modes.
void TakeTerminal() {
  struct sigaction sa {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: poll returns EINTR and the loop sees the signal
  for (int sig : kQuitSignals) sigaction(sig, &sa, nullptr);
  if (isatty(STDIN_FILENO) && tcgetattr(STDIN_FILENO, &g_saved_termios) == 0) {
    termios raw = g_saved_termios;
    raw.c_lflag &= ~static_cast<tcflag_t>(ICANON | ECHO);  // ISIG stays: Ctrl-C still signals
    raw.c_cc[VMIN] = 0;
    raw.c_cc[VTIME] = 0;
    g_raw = tcsetattr(STDIN_FILENO, TCSAFLUSH, &raw) == 0;
  }
  (void)!write(STDOUT_FILENO, kEnterScreen, sizeof(kEnterScreen) - 1);
}

// Waits up to `seconds` for a key; true when the view should end (q, end of input, a signal).
bool WaitForQuit(double seconds) {
  const double until = MonotonicSeconds() + seconds;
  for (;;) {
    if (g_quit_signal != 0) return true;
    const double left = until - MonotonicSeconds();
    if (left <= 0) return false;
    pollfd p{STDIN_FILENO, POLLIN, 0};
    const int n = poll(&p, 1, static_cast<int>(left * 1000) + 1);
    if (n <= 0) continue;  // timeout, or EINTR: checked above
    char c = 0;
    const ssize_t got = read(STDIN_FILENO, &c, 1);
    if (got == 0 && !g_raw) return true;  // end of input (a raw terminal reads 0 for "nothing")
    if (got == 1 && (c == 'q' || c == 'Q')) return true;
    if (p.revents & (POLLHUP | POLLERR)) return true;
  }
}

// `started`: the view has drawn a frame, so the daemon was there and a failure means it left.
absl::StatusOr<TopSample> Sample(v1::Admin::StubInterface& stub, const std::string& socket,
                                 bool started) {
  TopSample s;
  grpc::ClientContext status_ctx;
  status_ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
  grpc::Status st = stub.Status(&status_ctx, v1::StatusRequest(), &s.status);
  if (st.ok()) {
    grpc::ClientContext list_ctx;
    list_ctx.set_deadline(std::chrono::system_clock::now() + kCallDeadline);
    st = stub.ListTenants(&list_ctx, v1::ListTenantsRequest(), &s.tenants);
  }
  if (!st.ok()) {
    return absl::Status(static_cast<absl::StatusCode>(st.error_code()),
                        started ? TopEndedMessage(st, socket) : RpcErrorMessage(st, socket));
  }
  s.at_s = MonotonicSeconds();
  return s;
}

}  // namespace

std::string TopEndedMessage(const grpc::Status& status, const std::string& socket) {
  // A daemon stopping mid-call cancels the call ("CANCELLED: CANCELLED" before); one already
  // gone refuses the connection or has taken its socket away.
  if (status.error_code() == grpc::StatusCode::CANCELLED ||
      status.error_code() == grpc::StatusCode::UNAVAILABLE) {
    return "missiled went away (" + socket +
           "): it stopped or restarted while top ran; check 'systemctl status missiled'";
  }
  return RpcErrorMessage(status, socket);
}

absl::StatusOr<int> RunTop(const CtlArgs& args) {
  MISSILE_RETURN_IF_ERROR(CheckSocket(args.socket));
  std::unique_ptr<v1::Admin::Stub> stub = v1::Admin::NewStub(
      grpc::CreateChannel("unix:" + args.socket, grpc::InsecureChannelCredentials()));
  absl::StatusOr<TopSample> first = Sample(*stub, args.socket, /*started=*/false);
  if (!first.ok()) return first.status();
  if (args.top.once || !isatty(STDOUT_FILENO)) {
    std::fputs(FormatTopFrame(*first, nullptr, args.top.interval_s).c_str(), stdout);
    return std::fflush(stdout) == 0 ? 0 : 1;
  }
  TakeTerminal();
  TopSample before = *std::move(first);
  std::string frame = FormatTopFrame(before, nullptr, args.top.interval_s);
  absl::Status failed;
  for (;;) {
    const std::string screen = kHomeClear + frame;
    (void)!write(STDOUT_FILENO, screen.data(), screen.size());
    if (WaitForQuit(args.top.interval_s)) break;
    absl::StatusOr<TopSample> now = Sample(*stub, args.socket, /*started=*/true);
    if (!now.ok()) {
      failed = now.status();
      break;
    }
    frame = FormatTopFrame(*now, &before, args.top.interval_s);
    before = *std::move(now);
  }
  RestoreTerminal();
  if (g_quit_signal != 0) {
    signal(g_quit_signal, SIG_DFL);
    raise(g_quit_signal);
  }
  if (!failed.ok()) return failed;
  return 0;
}

}  // namespace missile::cli
