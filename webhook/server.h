// The HTTPS layer of missile-webhook: POST /mutate answers an AdmissionReview (admission.h),
// GET /healthz answers 200 "ok". A body that is not an AdmissionReview, or is over
// kMaxBodyBytes, gets HTTP 400 with the reason as text. Each review is logged (spdlog logger
// "missile-webhook", on stderr).
// Thread safety: Start and Stop from one thread; requests are served on the HTTP library's
// worker threads, each over shared read-only configuration.
#ifndef MISSILE_WEBHOOK_SERVER_H_
#define MISSILE_WEBHOOK_SERVER_H_

#include <atomic>
#include <cstddef>
#include <memory>
#include <thread>

#include "absl/status/status.h"
#include "webhook_args.h"

namespace httplib {
class SSLServer;
}

namespace missile::webhook {

// An AdmissionReview of a large pod is some tens of KiB; the API server keeps objects under
// 1.5 MiB.
inline constexpr size_t kMaxBodyBytes = 3 << 20;

class WebhookServer {
 public:
  explicit WebhookServer(WebhookArgs args);
  ~WebhookServer();  // Stops
  WebhookServer(const WebhookServer&) = delete;
  WebhookServer& operator=(const WebhookServer&) = delete;

  // Checks the TLS files, binds the address and serves on a thread of its own. An error names
  // the file or the address that failed.
  absl::Status Start();
  // Stops serving and waits for the serving thread. Idempotent.
  void Stop();

 private:
  void AddRoutes();

  const WebhookArgs args_;
  std::unique_ptr<httplib::SSLServer> server_;
  std::thread serving_;
  std::atomic<bool> listen_returned_{false};
};

}  // namespace missile::webhook

#endif  // MISSILE_WEBHOOK_SERVER_H_
