// A small HTTP/1.1 server for the Prometheus endpoint: GET and HEAD /metrics only, one thread
// running an epoll loop, every connection closed after its one response.
//
// Bounds, so that a scraper that misbehaves (or anything else that connects) cannot hurt the
// daemon: a request head larger than max_request_bytes gets 431; a connection that has not
// sent its request and taken its response within io_timeout_ms is closed; beyond
// max_connections open at once, new connections are closed at once. Other paths get 404, other
// methods 405, a malformed request 400. The body comes from `render`, called on the server's
// thread once per GET or HEAD /metrics (HEAD: to send the Content-Length a GET would).
// Thread-safety: Start and Stop from one thread (the owner); `render` runs on the server thread.
#ifndef MISSILE_DAEMON_METRICS_HTTP_H_
#define MISSILE_DAEMON_METRICS_HTTP_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <string>
#include <thread>

#include "absl/status/status.h"

namespace missile::daemon::metrics {

struct HttpOptions {
  std::string address = "127.0.0.1";  // IPv4 or IPv6 literal
  int port = 9850;                    // 0: any free port (tests; see port())
  size_t max_request_bytes = 8192;    // a request head (line and headers), at most
  int io_timeout_ms = 5000;           // from accept to the last byte of the response
  int max_connections = 32;
};

class HttpServer {
 public:
  using Render = std::function<std::string()>;
  explicit HttpServer(Render render) : render_(std::move(render)) {}
  ~HttpServer() { Stop(); }
  HttpServer(const HttpServer&) = delete;
  HttpServer& operator=(const HttpServer&) = delete;

  // Binds and listens, then starts the thread. INVALID_ARGUMENT for an address that is not an
  // IP literal; the socket error (with address and port) when it cannot listen.
  absl::Status Start(const HttpOptions& options);
  // Stops the thread and closes every connection. Idempotent.
  void Stop();
  // The port it listens on (after Start; the one chosen when options.port was 0).
  int port() const { return port_; }

 private:
  struct Conn;
  void Run();

  Render render_;
  HttpOptions options_;
  int listen_fd_ = -1;
  int epoll_fd_ = -1;
  int wake_fd_ = -1;
  int port_ = 0;
  std::atomic<bool> stop_{false};
  std::thread thread_;
};

// What the server answers to one complete request head (pure, for tests): the status code and
// the body. `head` ends with the empty line.
struct HttpReply {
  int status = 200;
  std::string body;
  bool head = false;  // a HEAD request: the headers of `body`, without it
};
HttpReply Answer(const std::string& head, const std::function<std::string()>& render);
// The whole response: status line, Content-Type, Content-Length, Allow (405), Connection: close,
// body (not for HEAD).
std::string FormatResponse(const HttpReply& reply);

}  // namespace missile::daemon::metrics

#endif  // MISSILE_DAEMON_METRICS_HTTP_H_
