#include "side_channel_server.h"

#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "logger.h"

namespace missile::daemon {

SideChannelServer::~SideChannelServer() { Shutdown(); }

absl::Status SideChannelServer::Start(const std::string& path, unsigned mode,
                                      std::optional<unsigned> gid) {
  path_ = path;
  if (absl::Status s = fdpass::ListenUnix(path, mode, &listen_fd_); !s.ok()) return s;
  if (gid.has_value() && chown(path.c_str(), -1, *gid) != 0) {
    return absl::PermissionDeniedError("chown " + path + ": " + strerror(errno));
  }
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return absl::OkStatus();
}

void SideChannelServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (listen_fd_ >= 0) shutdown(listen_fd_, SHUT_RDWR);
  if (acceptor_.joinable()) acceptor_.join();
  {
    absl::MutexLock lock(&mu_);
    for (int s : socks_) shutdown(s, SHUT_RDWR);
    auto idle = [this]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return threads_ == 0; };
    mu_.Await(absl::Condition(&idle));
  }
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
    listen_fd_ = -1;
  }
}

void SideChannelServer::AcceptLoop() {
  while (!stopping_) {
    int sock = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC);
    if (sock < 0) {
      if (errno == EINTR || errno == ECONNABORTED) continue;
      break;  // shut down
    }
    absl::MutexLock lock(&mu_);
    socks_.push_back(sock);
    ++threads_;
    std::thread([this, sock] { Serve(sock); }).detach();
  }
}

absl::StatusOr<uint64_t> SideChannelServer::Greet(int sock, PeerCredentials* creds) {
  fdpass::Hello hello;
  if (absl::Status s = fdpass::GetPeerCredentials(sock, creds); !s.ok()) return s;
  if (absl::Status s = fdpass::ReceiveMessage(sock, &hello, sizeof(hello)); !s.ok()) return s;
  if (hello.magic != fdpass::kMagic || hello.version != fdpass::kVersion) {
    return absl::InvalidArgumentError("bad side-channel hello");
  }
  std::string_view token(reinterpret_cast<const char*>(hello.token), sizeof(hello.token));
  if (absl::Status s = core_->AuthenticateSideChannel(*creds, hello.session_id, token); !s.ok()) {
    return s;
  }
  return hello.session_id;
}

absl::StatusOr<std::vector<int>> SideChannelServer::Answer(const PeerCredentials& creds,
                                                           uint64_t session,
                                                           const fdpass::FetchRequest& req) {
  if (absl::Status s = core_->CheckGpu(req.gpu); !s.ok()) return s;
  switch (req.op) {
    case fdpass::kOpenCopyChannel: {
      auto pair = core_->OpenCopyChannel(creds, session, req.gpu);
      if (!pair.ok()) return pair.status();
      return std::vector<int>{pair->first, pair->second};
    }
    case fdpass::kOpenPacing: {
      auto fd = core_->OpenPacing(creds, session, req.gpu);
      if (!fd.ok()) return fd.status();
      return std::vector<int>{*fd};
    }
    case fdpass::kFetchBlocks: {
      if (req.count == 0 || req.count > fdpass::kMaxFdsPerMessage) {
        return absl::InvalidArgumentError("bad descriptor count");
      }
      return core_->FetchBlocks(creds, session, req.gpu,
                                std::vector<BlockId>(req.block_ids, req.block_ids + req.count));
    }
    default:
      return absl::InvalidArgumentError("unknown side-channel operation");
  }
}

void SideChannelServer::Serve(int sock) {
  PeerCredentials creds;
  absl::StatusOr<uint64_t> greeted = Greet(sock, &creds);
  fdpass::Reply reply;
  reply.status = static_cast<uint32_t>(greeted.status().code());
  uint64_t session = greeted.ok() ? *greeted : 0;
  if (!fdpass::SendMessage(sock, &reply, sizeof(reply)).ok() || !greeted.ok()) {
    if (!greeted.ok()) {
      GetLogger(kSideChannelLog)
          ->warn("side channel from pid {} refused: {}", creds.pid,
                 std::string(greeted.status().message()));
    }
    session = 0;
  }
  while (session != 0 && !stopping_ && !core_->stopping()) {
    fdpass::FetchRequest req;
    if (!fdpass::ReceiveMessage(sock, &req, sizeof(req)).ok()) {
      core_->EndSession(session, "side channel closed");
      break;
    }
    absl::StatusOr<std::vector<int>> fds = Answer(creds, session, req);
    fdpass::Reply out;
    out.status = static_cast<uint32_t>(fds.status().code());
    std::vector<int> sent_fds = fds.ok() ? *std::move(fds) : std::vector<int>();
    out.count = static_cast<uint32_t>(sent_fds.size());
    absl::Status sent = fdpass::SendMessage(sock, &out, sizeof(out), sent_fds);
    for (int fd : sent_fds) close(fd);
    if (!sent.ok()) {
      core_->EndSession(session, "side channel broken");
      break;
    }
  }
  absl::MutexLock lock(&mu_);
  socks_.erase(std::remove(socks_.begin(), socks_.end(), sock), socks_.end());
  close(sock);
  --threads_;
}

}  // namespace missile::daemon
