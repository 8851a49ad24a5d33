// missile-webhook: the Kubernetes mutating admission webhook of Missile. See webhook_args.h
// for the command line and admission.h for what it answers. Runs until SIGTERM or SIGINT.
// Exit status: 0 stopped by a signal (or --help, --version), 1 could not start, 2 bad usage.
#include <signal.h>

#include <cstdio>
#include <string>
#include <vector>

#include "missile/version.h"
#include "server.h"
#include "webhook_args.h"

namespace {

void Fail(const std::string& reason) {
  std::fprintf(stderr, "missile-webhook: %s\n", reason.c_str());
}

}  // namespace

int main(int argc, char** argv) {
  absl::StatusOr<missile::webhook::WebhookArgs> args =
      missile::webhook::ParseWebhookArgs(std::vector<std::string>(argv + 1, argv + argc));
  if (!args.ok()) {
    Fail(std::string(args.status().message()));
    return 2;
  }
  if (args->help) {
    std::fputs(missile::webhook::kWebhookUsage, stdout);
    return 0;
  }
  if (args->version) {
    std::printf("missile-webhook %s\n", missile::kVersion);
    return 0;
  }
  // Block the stop signals before any thread starts, then wait for one on this thread.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGTERM);
  sigaddset(&stop, SIGINT);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);

  missile::webhook::WebhookServer server(*args);
  if (absl::Status s = server.Start(); !s.ok()) {
    Fail(std::string(s.message()));
    return 1;
  }
  int sig = 0;
  sigwait(&stop, &sig);
  server.Stop();
  return 0;
}
