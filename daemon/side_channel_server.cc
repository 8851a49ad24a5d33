#include "side_channel_server.h"

#include <fcntl.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <cstring>
#include <string_view>

#include "daemon_limits.h"
#include "logger.h"

namespace missile::daemon {
namespace {

// epoll tags: connections are tagged by descriptor, which is never negative.
constexpr uint64_t kListenTag = ~uint64_t{0};
constexpr uint64_t kWakeTag = ~uint64_t{0} - 1;
static_assert(sizeof(fdpass::FetchRequest) >= sizeof(fdpass::Hello));
// How often deadlines are checked: the timeouts are accurate to this.
constexpr int kSweepMs = 100;

int64_t Ms(std::chrono::steady_clock::duration d) {
  return std::chrono::duration_cast<std::chrono::milliseconds>(d).count();
}

}  // namespace

SideChannelServer::SideChannelServer(DaemonCore* core, size_t max_per_uid)
    : core_(core),
      max_per_uid_(max_per_uid),
      refusals_log_(limits::kLogInterval),
      accept_log_(limits::kLogInterval) {}

SideChannelServer::~SideChannelServer() { Shutdown(); }

absl::Status SideChannelServer::Start(const std::string& path, unsigned mode,
                                      std::optional<unsigned> gid) {
  path_ = path;
  if (absl::Status s = fdpass::ListenUnix(path, mode, &listen_fd_, gid); !s.ok()) return s;
  if (fcntl(listen_fd_, F_SETFL, fcntl(listen_fd_, F_GETFL) | O_NONBLOCK) != 0) {
    return absl::InternalError(std::string("fcntl(O_NONBLOCK): ") + strerror(errno));
  }
  epoll_fd_ = epoll_create1(EPOLL_CLOEXEC);
  wake_fd_ = eventfd(0, EFD_CLOEXEC | EFD_NONBLOCK);
  if (epoll_fd_ < 0 || wake_fd_ < 0) {
    return absl::InternalError(std::string("epoll/eventfd: ") + strerror(errno));
  }
  epoll_event ev{};
  ev.events = EPOLLIN;
  ev.data.u64 = kListenTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, listen_fd_, &ev);
  ev.data.u64 = kWakeTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, wake_fd_, &ev);
  loop_ = std::thread([this] { Loop(); });
  return absl::OkStatus();
}

void SideChannelServer::Shutdown() {
  if (stopping_.exchange(true)) return;
  if (wake_fd_ >= 0) {
    uint64_t one = 1;
    (void)!write(wake_fd_, &one, sizeof(one));
  }
  if (loop_.joinable()) loop_.join();
  // The loop has exited: its connections are ours to close now.
  std::vector<Conn*> all;
  for (auto& [fd, c] : conns_) all.push_back(c.get());
  for (Conn* c : all) Close(c, "side channel closed");
  if (listen_fd_ >= 0) {
    close(listen_fd_);
    unlink(path_.c_str());
    listen_fd_ = -1;
  }
  if (epoll_fd_ >= 0) close(epoll_fd_);
  if (wake_fd_ >= 0) close(wake_fd_);
  epoll_fd_ = wake_fd_ = -1;
}

void SideChannelServer::Loop() {
  std::vector<epoll_event> events(256);
  while (!stopping_) {
    int n = epoll_wait(epoll_fd_, events.data(), static_cast<int>(events.size()), kSweepMs);
    if (n < 0 && errno != EINTR) {
      GetLogger(kSideChannelLog)->error("epoll_wait: {}", strerror(errno));
      std::this_thread::sleep_for(limits::kAcceptBackoff);
      continue;
    }
    for (int i = 0; i < n && !stopping_; ++i) {
      uint64_t tag = events[i].data.u64;
      if (tag == kWakeTag) continue;
      if (tag == kListenTag) {
        AcceptReady();
        continue;
      }
      auto it = conns_.find(static_cast<int>(tag));
      if (it == conns_.end()) continue;  // closed by an earlier event of this round
      OnReadable(it->second.get());
    }
    ExpireDeadlines(Clock::now());
  }
}

void SideChannelServer::PauseAccepting(Clock::time_point now) {
  // Level-triggered: the waiting connection would wake the loop at once. Stop listening for it
  // until the pause is over (ExpireDeadlines re-arms it).
  epoll_event ev{};
  ev.data.u64 = kListenTag;
  epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  accept_paused_until_ = now + limits::kAcceptBackoff;
}

void SideChannelServer::AcceptReady() {
  while (!stopping_) {
    int fd = accept4(listen_fd_, nullptr, nullptr, SOCK_CLOEXEC | SOCK_NONBLOCK);
    if (fd < 0) {
      int err = errno;
      if (err == EAGAIN || err == EWOULDBLOCK) return;
      if (err == EINTR || err == ECONNABORTED || err == EPROTO) continue;
      uint64_t suppressed = 0;
      if (accept_log_.Allow(&suppressed)) {
        GetLogger(kSideChannelLog)
            ->warn("side channel: accept failed: {}; retrying in {} ms ({} more since the last "
                   "warning)", strerror(err), Ms(limits::kAcceptBackoff), suppressed);
      }
      // Transient or not, the loop goes on: a side channel that stopped accepting would leave
      // every later tenant without memory.
      PauseAccepting(Clock::now());
      return;
    }
    auto c = std::make_unique<Conn>();
    c->fd = fd;
    c->serial = next_serial_++;
    c->accepted = Clock::now();
    c->deadline = c->accepted + limits::kSideHandshakeTimeout;
    if (absl::Status s = fdpass::GetPeerCredentials(fd, &c->creds); !s.ok()) {
      close(fd);
      continue;
    }
    size_t& of_uid = per_uid_[c->creds.uid];
    // IsAdmin only at a cap: it may read the group database.
    if ((of_uid >= max_per_uid_ || conns_.size() >= limits::kMaxSideConnections) &&
        !core_->IsAdmin(c->creds)) {
      Refused(c->creds, of_uid >= max_per_uid_
                            ? "too many side connections of this uid"
                            : "too many side connections");
      if (of_uid == 0) per_uid_.erase(c->creds.uid);
      close(fd);
      continue;
    }
    while (pending_count_ >= limits::kMaxPendingSideConnections && !pending_.empty()) {
      auto [old_fd, serial] = pending_.front();
      pending_.pop_front();
      auto it = conns_.find(old_fd);
      if (it == conns_.end() || it->second->serial != serial || it->second->session != 0) continue;
      Refused(it->second->creds, "pushed out by newer connections before its hello");
      Close(it->second.get(), nullptr);
    }
    ++of_uid;
    ++pending_count_;
    pending_.emplace_back(fd, c->serial);
    Conn* raw = c.get();
    conns_[fd] = std::move(c);
    epoll_event ev{};
    ev.events = EPOLLIN | EPOLLRDHUP;
    ev.data.u64 = static_cast<uint64_t>(fd);
    epoll_ctl(epoll_fd_, EPOLL_CTL_ADD, fd, &ev);
    // A real shim sends its hello right after connecting: read it now, before a flood of
    // accepts can push this connection out.
    OnReadable(raw);
  }
}

bool SideChannelServer::OnReadable(Conn* c) {
  while (!stopping_) {
    const size_t want = c->session == 0 ? sizeof(fdpass::Hello) : sizeof(fdpass::FetchRequest);
    // recv without room for control messages: descriptors a peer attaches are discarded (and
    // closed) by the kernel.
    ssize_t n = recv(c->fd, c->buf + c->got, want - c->got, 0);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) return true;
      Close(c, "side channel broken");
      return false;
    }
    if (n == 0) {
      Close(c, "side channel closed");
      return false;
    }
    if (c->got == 0 && c->session != 0) c->deadline = Clock::now() + limits::kSideMessageTimeout;
    c->got += static_cast<size_t>(n);
    if (c->got < want) continue;
    c->got = 0;
    // Answering may close the connection and free `c`: what tells whether it is still open is
    // read now.
    const int fd = c->fd;
    const uint64_t serial = c->serial;
    if (c->session == 0) {
      fdpass::Hello hello;
      memcpy(&hello, c->buf, sizeof(hello));
      OnHello(c, hello);
    } else {
      c->deadline.reset();
      fdpass::FetchRequest req;
      memcpy(&req, c->buf, sizeof(req));
      OnRequest(c, req);
    }
    auto open = conns_.find(fd);
    if (open == conns_.end() || open->second->serial != serial) return false;  // closed
  }
  return true;
}

void SideChannelServer::OnHello(Conn* c, const fdpass::Hello& hello) {
  absl::StatusOr<uint64_t> greeted = Greet(*c, hello);
  fdpass::Reply reply;
  reply.status = static_cast<uint32_t>(greeted.status().code());
  absl::Status sent = fdpass::SendMessage(c->fd, &reply, sizeof(reply));
  if (!greeted.ok()) {
    Refused(c->creds, std::string(greeted.status().message()));
    Close(c, nullptr);
    return;
  }
  if (!sent.ok()) {
    // The session was authenticated but cannot be served: as if its side channel broke.
    Close(c, nullptr);
    return;
  }
  if (auto old = greeted_sessions_.find(*greeted); old != greeted_sessions_.end()) {
    // The same process (pid and token checked) connected again: it gave up on the old one.
    auto it = conns_.find(old->second);
    if (it != conns_.end()) Close(it->second.get(), "side channel replaced by a new connection");
  }
  c->session = *greeted;
  c->deadline.reset();
  --pending_count_;
  greeted_sessions_[c->session] = c->fd;
}

void SideChannelServer::OnRequest(Conn* c, const fdpass::FetchRequest& req) {
  absl::StatusOr<std::vector<int>> fds = Answer(c->creds, c->session, req);
  fdpass::Reply out;
  out.status = static_cast<uint32_t>(fds.status().code());
  std::vector<int> sent_fds = fds.ok() ? *std::move(fds) : std::vector<int>();
  out.count = static_cast<uint32_t>(sent_fds.size());
  absl::Status sent = fdpass::SendMessage(c->fd, &out, sizeof(out), sent_fds);
  for (int fd : sent_fds) close(fd);
  if (!sent.ok()) Close(c, "side channel broken");
}

void SideChannelServer::Close(Conn* c, const char* reason) {
  const int fd = c->fd;
  if (c->session != 0) {
    greeted_sessions_.erase(c->session);
    if (reason != nullptr) core_->SideChannelClosed(c->session, reason);
  } else {
    --pending_count_;
  }
  auto uid = per_uid_.find(c->creds.uid);
  if (uid != per_uid_.end() && --uid->second == 0) per_uid_.erase(uid);
  if (epoll_fd_ >= 0) epoll_ctl(epoll_fd_, EPOLL_CTL_DEL, fd, nullptr);
  close(fd);
  conns_.erase(fd);  // destroys *c
}

void SideChannelServer::ExpireDeadlines(Clock::time_point now) {
  if (accept_paused_until_ && now >= *accept_paused_until_) {
    accept_paused_until_.reset();
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.u64 = kListenTag;
    epoll_ctl(epoll_fd_, EPOLL_CTL_MOD, listen_fd_, &ev);
  }
  std::vector<Conn*> expired;
  for (auto& [fd, c] : conns_) {
    if (c->deadline && now >= *c->deadline) expired.push_back(c.get());
  }
  for (Conn* c : expired) {
    if (c->session == 0) {
      Refused(c->creds, "no hello within " + std::to_string(Ms(limits::kSideHandshakeTimeout)) +
                            " ms");
      Close(c, nullptr);
    } else {
      GetLogger(kSideChannelLog)
          ->warn("side channel of session {} (pid {}): request incomplete after {} ms", c->session,
                 c->creds.pid, Ms(limits::kSideMessageTimeout));
      Close(c, "side channel request timed out");
    }
  }
  // Drop queue entries of connections that greeted or closed, so the queue stays as long as
  // the connections still pending.
  while (!pending_.empty()) {
    auto it = conns_.find(pending_.front().first);
    if (it != conns_.end() && it->second->serial == pending_.front().second &&
        it->second->session == 0) {
      break;
    }
    pending_.pop_front();
  }
}

void SideChannelServer::Refused(const PeerCredentials& creds, const std::string& why) {
  // A peer can cause these at will: one warning per interval, the rest at debug level.
  uint64_t suppressed = 0;
  if (refusals_log_.Allow(&suppressed)) {
    GetLogger(kSideChannelLog)
        ->warn("side channel from pid {} (uid {}) refused: {} ({} more refused since the last "
               "warning)", creds.pid, creds.uid, why, suppressed);
  } else {
    GetLogger(kSideChannelLog)->debug("side channel from pid {} refused: {}", creds.pid, why);
  }
}

absl::StatusOr<uint64_t> SideChannelServer::Greet(const Conn& c, const fdpass::Hello& hello) {
  if (hello.magic != fdpass::kMagic || hello.version != fdpass::kVersion) {
    return absl::InvalidArgumentError(hello.magic != fdpass::kMagic
                                          ? "bad side-channel hello"
                                          : "side-channel protocol version " +
                                                std::to_string(hello.version) + ", expected " +
                                                std::to_string(fdpass::kVersion));
  }
  std::string_view token(reinterpret_cast<const char*>(hello.token), sizeof(hello.token));
  if (absl::Status s = core_->AuthenticateSideChannel(c.creds, hello.session_id, token); !s.ok()) {
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
      auto pair = core_->OpenPacing(creds, session, req.gpu);
      if (!pair.ok()) return pair.status();
      return std::vector<int>{pair->first, pair->second};
    }
    case fdpass::kOpenPeerLanes: {
      auto fd = core_->OpenPeerLanes(creds, session, req.gpu, req.reserved, req.block_ids[0]);
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

}  // namespace missile::daemon
