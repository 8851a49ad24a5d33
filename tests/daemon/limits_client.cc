// A client of missiled for the limits tests, run as another uid (setpriv) by the test: the test
// process itself is root, and root is never held to the per-uid limits.
//
//   limits_client register SOCKET NAME   Register (best effort) over gRPC; prints
//                                        "register ok <id>" or "register err <code> <message>",
//                                        then holds the session until stdin closes.
//   limits_client flood SOCKET N         opens N plain connections (no HTTP/2) and prints
//                                        "opened <n>"; then, each time the count changes,
//                                        "closed <c>": how many the daemon has closed. Ends when
//                                        stdin closes.
#include <grpcpp/grpcpp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>
#include <vector>

#include "missile/common/fd_passing.h"
#include "missile/v1/missile.grpc.pb.h"

namespace {

namespace v1 = ::missile::v1;

// Whether stdin has closed, waiting at most `ms`.
bool StdinClosed(int ms) {
  pollfd p{0, POLLIN, 0};
  if (poll(&p, 1, ms) <= 0) return false;
  char c;
  return read(0, &c, 1) <= 0;
}

int Register(const std::string& socket, const std::string& name) {
  auto channel = grpc::CreateChannel("unix:" + socket, grpc::InsecureChannelCredentials());
  auto tenant = v1::Tenant::NewStub(channel);
  v1::RegisterRequest req;
  req.set_protocol_version(1);
  req.set_name(name);
  req.set_tenant_class(v1::BEST_EFFORT);
  v1::RegisterResponse resp;
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  grpc::Status s = tenant->Register(&ctx, req, &resp);
  if (s.ok()) {
    printf("register ok %llu\n", static_cast<unsigned long long>(resp.session_id()));
  } else {
    printf("register err %d %s\n", static_cast<int>(s.error_code()), s.error_message().c_str());
  }
  fflush(stdout);
  while (!StdinClosed(1000)) {
  }
  return 0;
}

int Flood(const std::string& path, int n) {
  std::vector<int> socks;
  for (int i = 0; i < n; ++i) {
    int s = -1;
    if (!missile::fdpass::ConnectUnix(path, &s, 500).ok()) break;
    socks.push_back(s);
  }
  printf("opened %zu\n", socks.size());
  fflush(stdout);
  size_t reported = 0;
  std::vector<bool> closed(socks.size(), false);
  size_t count = 0;
  while (!StdinClosed(100)) {
    for (size_t i = 0; i < socks.size(); ++i) {
      if (closed[i]) continue;
      // The daemon's gRPC sends its HTTP/2 settings first: read past whatever has arrived.
      char buf[4096];
      ssize_t got;
      while ((got = recv(socks[i], buf, sizeof(buf), MSG_DONTWAIT)) > 0) {
      }
      if (got == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
        closed[i] = true;
        ++count;
      }
    }
    if (count != reported) {
      reported = count;
      printf("closed %zu\n", count);
      fflush(stdout);
    }
  }
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 4 && std::string(argv[1]) == "register") return Register(argv[2], argv[3]);
  if (argc == 4 && std::string(argv[1]) == "flood") return Flood(argv[2], atoi(argv[3]));
  fprintf(stderr, "usage: limits_client register SOCKET NAME | flood SOCKET N\n");
  return 2;
}
