// The metrics HTTP server: what it answers (pure), and a real server on a loopback port with
// its bounds: oversized requests, silent clients, too many connections.
#include "metrics_http.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace missile::daemon::metrics {
namespace {

using ::testing::EndsWith;
using ::testing::HasSubstr;
using ::testing::StartsWith;

std::string Body() { return "up 1\n"; }

TEST(MetricsHttpTest, AnswersGetAndHeadMetricsOnly) {
  EXPECT_EQ(Answer("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", Body).status, 200);
  EXPECT_EQ(Answer("GET /metrics HTTP/1.1\r\nHost: x\r\n\r\n", Body).body, "up 1\n");
  EXPECT_EQ(Answer("GET /metrics?x=1 HTTP/1.0\r\n\r\n", Body).status, 200);
  EXPECT_EQ(Answer("GET / HTTP/1.1\r\n\r\n", Body).status, 404);
  EXPECT_EQ(Answer("GET /metricsx HTTP/1.1\r\n\r\n", Body).status, 404);
  EXPECT_EQ(Answer("POST /metrics HTTP/1.1\r\n\r\n", Body).status, 405);
  EXPECT_EQ(Answer("HEAD /metrics HTTP/1.1\r\n\r\n", Body).status, 200);
  EXPECT_TRUE(Answer("HEAD /metrics HTTP/1.1\r\n\r\n", Body).head);
  EXPECT_EQ(Answer("HEAD / HTTP/1.1\r\n\r\n", Body).status, 404);
  EXPECT_EQ(Answer("PUT /metrics HTTP/1.1\r\n\r\n", Body).status, 405);
  EXPECT_EQ(Answer("GET /metrics\r\n\r\n", Body).status, 400);
  EXPECT_EQ(Answer("GET /metrics SPDY/3\r\n\r\n", Body).status, 400);
  EXPECT_EQ(Answer("\r\n\r\n", Body).status, 400);
}

TEST(MetricsHttpTest, ResponseCarriesLengthTypeAndClose) {
  std::string r = FormatResponse({200, "abc"});
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Type: text/plain; version=0.0.4; charset=utf-8\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Length: 3\r\n"));
  EXPECT_THAT(r, HasSubstr("Connection: close\r\n\r\nabc"));
  EXPECT_THAT(FormatResponse({404, ""}), StartsWith("HTTP/1.1 404 Not Found\r\n"));
  // HEAD: the length of the body a GET gets, and no body.
  r = FormatResponse({200, "abc", /*head=*/true});
  EXPECT_THAT(r, HasSubstr("Content-Length: 3\r\n"));
  EXPECT_THAT(r, EndsWith("Connection: close\r\n\r\n"));
  EXPECT_THAT(FormatResponse({405, "x"}), HasSubstr("\r\nAllow: GET, HEAD\r\n"));
}

int Connect(int port) {
  int fd = socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
  sockaddr_in a{};
  a.sin_family = AF_INET;
  a.sin_port = htons(static_cast<uint16_t>(port));
  a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  if (connect(fd, reinterpret_cast<sockaddr*>(&a), sizeof(a)) != 0) {
    close(fd);
    return -1;
  }
  return fd;
}

// Everything the server sends until it closes (or 10 s pass: a hang fails the test).
std::string ReadAll(int fd) {
  std::string out;
  char buf[4096];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    if (poll(&p, 1, 10000) <= 0) return out + "<no close>";
    ssize_t n = recv(fd, buf, sizeof(buf), 0);
    if (n <= 0) return out;
    out.append(buf, static_cast<size_t>(n));
  }
}

std::string Request(int port, const std::string& text) {
  int fd = Connect(port);
  if (fd < 0) return "<no connection>";
  send(fd, text.data(), text.size(), MSG_NOSIGNAL);
  std::string out = ReadAll(fd);
  close(fd);
  return out;
}

TEST(MetricsHttpTest, ServesOnLoopback) {
  HttpServer server([] { return std::string("missile_up 1\n"); });
  HttpOptions o;
  o.port = 0;
  ASSERT_TRUE(server.Start(o).ok());
  ASSERT_GT(server.port(), 0);
  std::string r = Request(server.port(), "GET /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, EndsWith("\r\n\r\nmissile_up 1\n"));
  EXPECT_THAT(Request(server.port(), "GET /other HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 404"));
  r = Request(server.port(), "HEAD /metrics HTTP/1.1\r\nHost: a\r\n\r\n");
  EXPECT_THAT(r, StartsWith("HTTP/1.1 200 OK\r\n"));
  EXPECT_THAT(r, HasSubstr("Content-Length: 13\r\n"));
  EXPECT_THAT(r, EndsWith("\r\n\r\n"));  // and nothing after the headers
  // The request may arrive in pieces.
  int fd = Connect(server.port());
  ASSERT_GE(fd, 0);
  send(fd, "GET /met", 8, MSG_NOSIGNAL);
  usleep(20000);
  send(fd, "rics HTTP/1.1\r\n\r\n", 17, MSG_NOSIGNAL);
  EXPECT_THAT(ReadAll(fd), EndsWith("missile_up 1\n"));
  close(fd);
}

TEST(MetricsHttpTest, BoundsRequestsTimeAndConnections) {
  HttpServer server([] { return std::string("x 1\n"); });
  HttpOptions o;
  o.port = 0;
  o.max_request_bytes = 256;
  o.io_timeout_ms = 300;
  o.max_connections = 2;
  ASSERT_TRUE(server.Start(o).ok());
  EXPECT_THAT(Request(server.port(), "GET /metrics HTTP/1.1\r\nX: " + std::string(400, 'a')),
              StartsWith("HTTP/1.1 431"));
  // Two silent clients take every connection; a third is closed at once; once the silent ones
  // time out and are closed, the server answers again.
  int a = Connect(server.port());
  int b = Connect(server.port());
  ASSERT_GE(a, 0);
  ASSERT_GE(b, 0);
  usleep(50000);
  EXPECT_EQ(Request(server.port(), "GET /metrics HTTP/1.1\r\n\r\n"), "");
  EXPECT_EQ(ReadAll(a), "");  // closed by the server for its silence, with nothing sent
  EXPECT_EQ(ReadAll(b), "");
  close(a);
  close(b);
  EXPECT_THAT(Request(server.port(), "GET /metrics HTTP/1.1\r\n\r\n"), StartsWith("HTTP/1.1 200"));
}

TEST(MetricsHttpTest, RefusesBadAddressAndBusyPort) {
  HttpServer a([] { return std::string(); });
  HttpOptions o;
  o.address = "localhost";
  EXPECT_EQ(a.Start(o).code(), absl::StatusCode::kInvalidArgument);
  HttpServer b([] { return std::string(); });
  o.address = "127.0.0.1";
  o.port = 0;
  ASSERT_TRUE(b.Start(o).ok());
  HttpServer c([] { return std::string(); });
  o.port = b.port();
  absl::Status busy = c.Start(o);
  EXPECT_FALSE(busy.ok());
  EXPECT_THAT(busy.message(), HasSubstr("cannot listen on 127.0.0.1 port"));
}

}  // namespace
}  // namespace missile::daemon::metrics
