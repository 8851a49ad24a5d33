#include "metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <chrono>
#include <cstring>
#include <memory>
#include <unordered_map>

#include "absl/strings/str_cat.h"

namespace missile::daemon::metrics {
namespace {

using Clock = std::chrono::steady_clock;

// How often the loop wakes with nothing to do, to close connections past their deadline.
constexpr int kSweepMs = 100;

const char* Reason(int status) {
  switch (status) {
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 431:
      return "Request Header Fields Too Large";
    default:
      return "Internal Server Error";
  }
}

}  // namespace

HttpReply Answer(const std::string& head, const std::function<std::string()>& render) {
  const size_t eol = head.find("\r\n");
  const std::string line = head.substr(0, eol);
  const size_t sp1 = line.find(' ');
  const size_t sp2 = sp1 == std::string::npos ? sp1 : line.find(' ', sp1 + 1);
  if (eol == std::string::npos || sp1 == std::string::npos || sp2 == std::string::npos) {
    return {400, "bad request\n"};
  }
  const std::string version = line.substr(sp2 + 1);
  if (version != "HTTP/1.1" && version != "HTTP/1.0") return {400, "bad request\n"};
  const std::string method = line.substr(0, sp1);
  std::string target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  target = target.substr(0, target.find('?'));  // Prometheus may add parameters; none are used
  if (target != "/metrics") return {404, "not found: only /metrics is served\n"};
  // HEAD: what monitors and load balancers probe with; its headers are those of a GET.
  if (method == "HEAD") return {200, render(), /*head=*/true};
  if (method != "GET") return {405, "method not allowed: only GET and HEAD\n"};
  return {200, render()};
}

std::string FormatResponse(const HttpReply& reply) {
  const char* type = reply.status == 200 ? "text/plain; version=0.0.4; charset=utf-8"
                                         : "text/plain; charset=utf-8";
  return absl::StrCat("HTTP/1.1 ", reply.status, " ", Reason(reply.status), "\r\nContent-Type: ",
                      type, "\r\nContent-Length: ", reply.body.size(),
                      reply.status == 405 ? "\r\nAllow: GET, HEAD" : "",
                      "\r\nConnection: close\r\n\r\n", reply.head ? "" : reply.body);
}

struct HttpServer::Conn {
  int fd = -1;
  Clock::time_point deadline;
  std::string in;
  std::string out;
  size_t written = 0;
  bool replying = false;
  ~Conn() {
    if (fd >= 0) close(fd);
  }
};

absl::Status HttpServer::Start(const HttpOptions& options) {
  options_ = options;
  sockaddr_storage addr{};
  socklen_t len = 0;
  auto* v4 = reinterpret_cast<sockaddr_in*>(&addr);
  auto* v6 = reinterpret_cast<sockaddr_in6*>(&addr);
  if (inet_pton(AF_INET, options.address.c_str(), &v4->sin_addr) == 1) {
    v4->sin_family = AF_INET;
    v4->sin_port = htons(static_cast<uint16_t>(options.port));
    len = sizeof(*v4);
  } else if (inet_pton(AF_INET6, options.address.c_str(), &v6->sin6_addr) == 1) {
    v6->sin6_family = AF_INET6;
    v6->sin6_port = htons(static_cast<uint16_t>(options.port));
    len = sizeof(*v6);
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("metrics: '", options.address, "' is not an IP address"));
  }
  const std::string where = absl::StrCat(options.address, " port ", options.port);
  listen_fd_ = socket(addr.ss_family, SOCK_STREAM | SOCK_NONBLOCK | SOCK_CLOEXEC, 0);
  if (listen_fd_ < 0) return absl::ErrnoToStatus(errno, "metrics: socket");
  int one = 1;
  setsockopt(listen_fd_, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
  if (bind(listen_fd_, reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
      listen(listen_fd_, 64) != 0) {
    absl::Status s = absl::ErrnoToStatus(errno, absl::StrCat("metrics: cannot listen on ", where));
    close(listen_fd_);
    listen_fd_ = -1;
    return s;
  }
  sockaddr_storage bound{};
  socklen_t bound_len = sizeof(bound);
  getsockname(listen_fd_, reinterpret_cast<sockaddr*>(&bound), &bound_len);
  port_ = ntohs(bound.ss_family == AF_INET ? reinterpret_cast<sockaddr_in*>(&bound)->sin_port
                                           : reinterpret_cast<sockaddr_in6*>(&bound)->sin6_port);
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    absl::Status s = absl::ErrnoToStatus(errno, "metrics: epoll");
    Stop();
    return s;
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.fd = listen_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.fd = wake_fd_;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  thread_ = std::thread([this] { Run(); });
  return absl::OkStatus();
}

void HttpServer::Stop() {
  stop_ = true;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (thread_.joinable()) thread_.join();
  for (int* fd : {&listen_fd_, &epoll_fd_, &wake_fd_}) {
    if (*fd >= 0) close(*fd);
    *fd = -1;
  }
}

// long: the whole event loop (accept, read, answer, write, sweep) reads best in one place.
void HttpServer::Run() {
  prctl(PR_SET_NAME, "missile-metrics");
  std::unordered_map<int, std::unique_ptr<Conn>> conns;
  auto drop = [&](int fd) {
    epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
    conns.erase(fd);
  };
  // Sends what the connection still owes; drops it when done or broken.
  auto flush = [&](Conn& c) {
    while (c.written < c.out.size()) {
      ssize_t n = send(c.fd, c.out.data() + c.written, c.out.size() - c.written, MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return;
      if (n <= 0) break;
      c.written += static_cast<size_t>(n);
    }
    drop(c.fd);
  };
  auto reply = [&](Conn& c, HttpReply r) {
    c.replying = true;
    c.out = FormatResponse(r);
    epoll_event ev{};
    ev.events = EPOLLOUT;
    ev.data.fd = c.fd;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, c.fd, &ev);
    flush(c);
  };
  epoll_event events[32];
  while (!stop_) {
    const int n = epoll_wait(epoll_fd_, events, 32, kSweepMs);
    for (int i = 0; i < n && !stop_; ++i) {
      const int fd = events[i].data.fd;
      if (fd == wake_fd_) continue;
      if (fd == listen_fd_) {
        for (;;) {
          int cfd = accept4(listen_fd_, nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC);
          if (cfd < 0) break;
          if (conns.size() >= static_cast<size_t>(options_.max_connections)) {
            close(cfd);
            continue;
          }
          auto c = std::make_unique<Conn>();
          c->fd = cfd;
          c->deadline = Clock::now() + std::chrono::milliseconds(options_.io_timeout_ms);
          epoll_event ev{};
          ev.events = EPOLLIN | EPOLLRDHUP;
          ev.data.fd = cfd;
          epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, cfd, &ev);
          conns[cfd] = std::move(c);
        }
        continue;
      }
      auto it = conns.find(fd);
      if (it == conns.end()) continue;
      Conn& c = *it->second;
      if (c.replying) {
        flush(c);
        continue;
      }
      char buf[2048];
      ssize_t got = recv(fd, buf, sizeof(buf), 0);
      if (got < 0 && (errno == EAGAIN || errno == EINTR)) continue;
      if (got <= 0) {
        drop(fd);
        continue;
      }
      c.in.append(buf, static_cast<size_t>(got));
      const size_t end = c.in.find("\r\n\r\n");
      if (end != std::string::npos && end + 4 <= options_.max_request_bytes) {
        reply(c, Answer(c.in.substr(0, end + 4), render_));
      } else if (c.in.size() >= options_.max_request_bytes) {
        reply(c, {431, "request too large\n"});
      }
    }
    const Clock::time_point now = Clock::now();
    for (auto it = conns.begin(); it != conns.end();) {
      if (now < it->second->deadline) {
        ++it;
        continue;
      }
      epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, it->first, nullptr);
      it = conns.erase(it);
    }
  }
}

}  // namespace missile::daemon::metrics
