// Fuzzes the side channel's wire format from both ends.
//
// Daemon end (the first byte's bit 2 clear): a SideChannelServer over a DaemonCore (both fresh
// per input) listens on a socket in a private directory; this process registers a session
// and allocates four blocks, connects, and sends the rest of the input as the connection's
// bytes, then shuts its writing side. With bit 0 set, a valid Hello (the session's id and
// token) goes first, so the fuzzer reaches the requests; with bit 1, block ids below 256 in
// whole FetchRequests are replaced by the session's blocks. It then reads Replies (with their
// descriptors) until the server closes the connection, which it must do once the bytes end:
// a server that stops answering is a hang (the read times out after 10 s and aborts).
//
// Tenant end (bit 2 set): the rest of the input is a series of segments
//   u8 descriptors (0-3 memfds attached), u8 receive size, u16 length, `length` bytes
// sent on one end of a socket pair; fdpass::ReceiveMessage reads the other end in pieces of
// the sizes given until it fails. Every descriptor that arrives must be handed to the caller.
//
// Either way, no descriptor may stay open once the input is done.
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "daemon/side_channel_server.h"
#include "fuzz_daemon.h"
#include "missile/common/fd_passing.h"

namespace missile::daemon::fuzz {
namespace {

namespace fdpass = ::missile::fdpass;

const std::string& SocketPath() {
  static const std::string path = [] {
    char dir[] = "/tmp/missile-side-fuzz-XXXXXX";
    if (mkdtemp(dir) == nullptr) {
      perror("mkdtemp");
      abort();
    }
    return std::string(dir) + "/side.sock";
  }();
  return path;
}

void Die(const char* what) {
  fprintf(stderr, "fuzz: %s\n", what);
  abort();
}

// Replaces small block ids in the whole FetchRequests of `bytes` (after the hello) with leases.
void MapBlockIds(std::string* bytes, size_t offset, const std::vector<uint64_t>& blocks) {
  for (size_t at = offset; at + sizeof(fdpass::FetchRequest) <= bytes->size();
       at += sizeof(fdpass::FetchRequest)) {
    fdpass::FetchRequest req;
    memcpy(&req, bytes->data() + at, sizeof(req));
    for (uint64_t& id : req.block_ids) {
      if (id < 256 && !blocks.empty()) id = blocks[id % blocks.size()];
    }
    memcpy(bytes->data() + at, &req, sizeof(req));
  }
}

void FuzzServer(uint8_t flags, Bytes* in) {
  std::unique_ptr<DaemonCore> core = MakeCore(SocketPath());
  SideChannelServer server(core.get());
  if (!server.Start(SocketPath(), 0600, std::nullopt).ok()) Die("side channel did not start");
  const PeerCredentials me{getpid(), getuid(), getgid()};
  auto session = core->Register(me, "fuzz", TenantClass::kLatencySensitive, 0);
  if (!session.ok()) Die("register failed");
  std::vector<uint64_t> blocks;
  if (auto leases = core->Allocate(me, session->id, 0, false, 4 * kGranule); leases.ok()) {
    for (const Lease& l : *leases) blocks.push_back(l.id);
  }

  std::string bytes;
  if (flags & 1) {
    fdpass::Hello hello;
    hello.session_id = session->id;
    memcpy(hello.token, session->token.data(), sizeof(hello.token));
    bytes.append(reinterpret_cast<const char*>(&hello), sizeof(hello));
  }
  const size_t requests_at = bytes.size();
  bytes += in->Take(in->left());
  if (flags & 2) MapBlockIds(&bytes, requests_at, blocks);

  int sock = -1;
  if (!fdpass::ConnectUnix(SocketPath(), &sock, /*timeout_ms=*/10000).ok()) Die("connect failed");
  if (!bytes.empty() && !fdpass::SendMessage(sock, bytes.data(), bytes.size()).ok()) {
    // The server may close a connection it refused before reading everything: not a failure.
  }
  shutdown(sock, SHUT_WR);
  while (true) {
    fdpass::Reply reply;
    std::vector<int> fds;
    absl::Status s = fdpass::ReceiveMessage(sock, &reply, sizeof(reply), &fds);
    for (int fd : fds) close(fd);
    if (s.code() == absl::StatusCode::kDeadlineExceeded) Die("the side channel stopped answering");
    if (!s.ok()) break;
    if (reply.status == 0 && reply.count != fds.size()) Die("a reply's count is not its descriptors");
    if (reply.status != 0 && !fds.empty()) Die("a refusal carried descriptors");
  }
  close(sock);
  server.Shutdown();
}

void FuzzReceiver(Bytes* in) {
  int pair[2];
  if (socketpair(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0, pair) != 0) Die("socketpair");
  fdpass::SetIoTimeout(pair[1], 10000).IgnoreError();
  std::vector<uint8_t> sizes;
  while (!in->empty()) {
    const uint8_t attach = in->Get<uint8_t>() % 4;
    sizes.push_back(in->Get<uint8_t>());
    const std::string segment = in->Take(in->Get<uint16_t>() % 4096);
    if (segment.empty()) continue;
    std::vector<int> fds;
    for (int i = 0; i < attach; ++i) fds.push_back(memfd_create("fuzz-passed", MFD_CLOEXEC));
    fdpass::SendMessage(pair[0], segment.data(), segment.size(), fds).IgnoreError();
    for (int fd : fds) close(fd);
  }
  shutdown(pair[0], SHUT_WR);
  std::vector<int> received;
  std::vector<char> buf(256);
  for (size_t i = 0;; ++i) {
    const size_t want = sizes.empty() ? sizeof(fdpass::Reply) : sizes[i % sizes.size()] % 256 + 1;
    absl::Status s = fdpass::ReceiveMessage(pair[1], buf.data(), want, &received);
    if (s.code() == absl::StatusCode::kDeadlineExceeded) Die("ReceiveMessage waited on a closed peer");
    if (!s.ok()) break;
  }
  for (int fd : received) {
    if (close(fd) != 0) Die("ReceiveMessage handed back a descriptor that was not open");
  }
  close(pair[0]);
  close(pair[1]);
}

}  // namespace
}  // namespace missile::daemon::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace missile::daemon::fuzz;
  static const bool silenced = (SilenceDaemonLogs(), true);
  (void)silenced;
  const int fds_before = OpenDescriptors();
  Bytes in(data, size);
  const uint8_t flags = in.Get<uint8_t>();
  if (flags & 4) {
    FuzzReceiver(&in);
  } else {
    FuzzServer(flags, &in);
  }
  const int fds_after = OpenDescriptors();
  if (fds_after != fds_before) {
    fprintf(stderr, "fuzz: %d descriptors open before the input, %d after\n", fds_before,
            fds_after);
    abort();
  }
  return 0;
}
