#include "missile/common/fd_passing.h"

#include <fcntl.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>
#include <utility>

namespace missile::fdpass {
namespace {

absl::Status Errno(const std::string& what) {
  return absl::Status(absl::ErrnoToStatusCode(errno), what + ": " + strerror(errno));
}

absl::Status MakeAddress(const std::string& path, sockaddr_un* addr) {
  memset(addr, 0, sizeof(*addr));
  addr->sun_family = AF_UNIX;
  if (path.empty() || path.size() >= sizeof(addr->sun_path)) {
    return absl::InvalidArgumentError("unix socket path '" + path + "' is empty or too long");
  }
  memcpy(addr->sun_path, path.data(), path.size());
  return absl::OkStatus();
}

// The socket's directory must be writable only by its owner, and the owner must be root or
// the daemon's own user: anyone else who can write it can replace the socket (or the name the
// daemon is about to chmod) with a link to another file.
absl::Status CheckSocketDirectory(const std::string& dir, const struct stat& st) {
  if (st.st_uid != 0 && st.st_uid != geteuid()) {
    return absl::FailedPreconditionError("socket directory " + dir + " is owned by uid " +
                                         std::to_string(st.st_uid) +
                                         ", not by root or the daemon's user");
  }
  if (st.st_mode & (S_IWGRP | S_IWOTH)) {
    return absl::FailedPreconditionError(
        "socket directory " + dir + " is writable by " +
        ((st.st_mode & S_IWOTH) ? "every user" : "its group") +
        ": a user who may write it can redirect the daemon's chmod/chown; use a directory only "
        "its owner may write (chmod go-w " + dir + ")");
  }
  return absl::OkStatus();
}

// Closes the descriptor it holds when it goes out of scope.
class FileDescriptor {
 public:
  explicit FileDescriptor(int fd) : fd_(fd) {}
  FileDescriptor(const FileDescriptor&) = delete;
  FileDescriptor& operator=(const FileDescriptor&) = delete;
  ~FileDescriptor() {
    if (fd_ >= 0) close(fd_);
  }
  int get() const { return fd_; }
  int release() { return std::exchange(fd_, -1); }

 private:
  int fd_;
};

}  // namespace

absl::Status SendMessage(int sock, const void* data, size_t len, const std::vector<int>& fds) {
  if (fds.size() > kMaxFdsPerMessage) {
    return absl::InvalidArgumentError("too many descriptors for one message");
  }
  const char* p = static_cast<const char*>(data);
  size_t sent = 0;
  bool fds_sent = fds.empty();
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  while (sent < len) {
    iovec iov{const_cast<char*>(p + sent), len - sent};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (!fds_sent) {
      msg.msg_control = control;
      msg.msg_controllen = CMSG_SPACE(sizeof(int) * fds.size());
      cmsghdr* cmsg = CMSG_FIRSTHDR(&msg);
      cmsg->cmsg_level = SOL_SOCKET;
      cmsg->cmsg_type = SCM_RIGHTS;
      cmsg->cmsg_len = CMSG_LEN(sizeof(int) * fds.size());
      memcpy(CMSG_DATA(cmsg), fds.data(), sizeof(int) * fds.size());
    }
    ssize_t n = sendmsg(sock, &msg, MSG_NOSIGNAL);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return absl::DeadlineExceededError("sendmsg: the peer does not read");
      }
      return Errno("sendmsg");
    }
    fds_sent = true;
    sent += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ReceiveMessage(int sock, void* data, size_t len, std::vector<int>* fds) {
  char* p = static_cast<char*>(data);
  size_t got = 0;
  alignas(cmsghdr) char control[CMSG_SPACE(sizeof(int) * kMaxFdsPerMessage)];
  while (got < len) {
    iovec iov{p + got, len - got};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof(control);
    ssize_t n = recvmsg(sock, &msg, MSG_CMSG_CLOEXEC);
    if (n < 0) {
      if (errno == EINTR) continue;
      if (errno == EAGAIN || errno == EWOULDBLOCK) {
        return absl::DeadlineExceededError("recvmsg: no reply in time");
      }
      return Errno("recvmsg");
    }
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
      if (c->cmsg_level == SOL_SOCKET && c->cmsg_type == SCM_RIGHTS) {
        size_t count = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        const int* received = reinterpret_cast<const int*>(CMSG_DATA(c));
        for (size_t i = 0; i < count; ++i) {
          if (fds != nullptr) {
            fds->push_back(received[i]);
          } else {
            close(received[i]);  // nobody asked for them: do not leak
          }
        }
      }
    }
    if (msg.msg_flags & MSG_CTRUNC) {
      return absl::DataLossError("recvmsg: descriptors were truncated");
    }
    if (n == 0) {
      return got == 0 ? absl::UnavailableError("connection closed")
                      : absl::DataLossError("connection closed mid-message");
    }
    got += static_cast<size_t>(n);
  }
  return absl::OkStatus();
}

absl::Status ConnectUnix(const std::string& path, int* sock, int timeout_ms) {
  sockaddr_un addr;
  if (absl::Status s = MakeAddress(path, &addr); !s.ok()) return s;
  int fd = socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0);
  if (fd < 0) return Errno("socket");
  if (timeout_ms > 0) {
    if (absl::Status s = SetIoTimeout(fd, timeout_ms); !s.ok()) {
      close(fd);
      return s;
    }
  }
  if (connect(fd, reinterpret_cast<sockaddr*>(&addr), sizeof(addr)) != 0) {
    absl::Status s = Errno("connect " + path);
    close(fd);
    return s;
  }
  *sock = fd;
  return absl::OkStatus();
}

absl::Status ListenUnix(const std::string& path, unsigned mode, int* sock,
                        std::optional<unsigned> gid) {
  sockaddr_un addr;
  if (absl::Status s = MakeAddress(path, &addr); !s.ok()) return s;
  const size_t slash = path.rfind('/');
  const std::string dir = slash == std::string::npos ? "." : path.substr(0, slash + 1);
  const std::string name = slash == std::string::npos ? path : path.substr(slash + 1);
  if (name.empty()) return absl::InvalidArgumentError("unix socket path '" + path + "' is a directory");
  // Everything after this point names the socket relative to this descriptor, never by path.
  // That alone does not stop a tenant that can write the directory from swapping the entry for a
  // symlink between two calls, and the daemon (often root) would then change another file's
  // mode or group; so such a directory is refused outright.
  FileDescriptor dir_fd(open(dir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
  if (dir_fd.get() < 0) return Errno("open socket directory " + dir);
  struct stat st;
  if (fstat(dir_fd.get(), &st) != 0) return Errno("stat socket directory " + dir);
  if (absl::Status s = CheckSocketDirectory(dir, st); !s.ok()) return s;
  if (fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) == 0) {
    if (!S_ISSOCK(st.st_mode)) {
      return absl::FailedPreconditionError(path + " exists and is not a socket");
    }
    if (unlinkat(dir_fd.get(), name.c_str(), 0) != 0) return Errno("unlink " + path);
  }
  FileDescriptor fd(socket(AF_UNIX, SOCK_STREAM | SOCK_CLOEXEC, 0));
  if (fd.get() < 0) return Errno("socket");
  // Created with no permissions for anyone but the owner, then opened up to `mode`: no window
  // in which the socket is more open than configured. (fchmod on an AF_UNIX socket's descriptor
  // does not reach the filesystem node, hence the umask.)
  const mode_t old = umask(0177);
  const int rc = bind(fd.get(), reinterpret_cast<sockaddr*>(&addr), sizeof(addr));
  umask(old);
  if (rc != 0) return Errno("bind " + path);
  struct stat bound;
  if (fstatat(dir_fd.get(), name.c_str(), &bound, AT_SYMLINK_NOFOLLOW) != 0) {
    return Errno("stat " + path);
  }
  if (!S_ISSOCK(bound.st_mode) || bound.st_uid != geteuid()) {
    return absl::FailedPreconditionError(path + " was replaced right after it was bound");
  }
  if (fchmodat(dir_fd.get(), name.c_str(), mode, 0) != 0) return Errno("chmod " + path);
  if (gid.has_value() &&
      fchownat(dir_fd.get(), name.c_str(), static_cast<uid_t>(-1), static_cast<gid_t>(*gid),
               AT_SYMLINK_NOFOLLOW) != 0) {
    return absl::PermissionDeniedError("chown " + path + ": " + strerror(errno));
  }
  if (fstatat(dir_fd.get(), name.c_str(), &st, AT_SYMLINK_NOFOLLOW) != 0 ||
      st.st_dev != bound.st_dev || st.st_ino != bound.st_ino) {
    return absl::FailedPreconditionError(path + " was replaced while its mode was set");
  }
  if (listen(fd.get(), 128) != 0) return Errno("listen " + path);
  *sock = fd.release();
  return absl::OkStatus();
}

absl::Status SetIoTimeout(int sock, int ms) {
  timeval tv{ms / 1000, (ms % 1000) * 1000};
  if (setsockopt(sock, SOL_SOCKET, SO_RCVTIMEO, &tv, sizeof(tv)) != 0 ||
      setsockopt(sock, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof(tv)) != 0) {
    return Errno("setsockopt(SO_RCVTIMEO/SO_SNDTIMEO)");
  }
  return absl::OkStatus();
}

bool IsTransientAcceptError(int err) {
  switch (err) {
    case EINTR:
    case EAGAIN:
    case ECONNABORTED:
    case EPROTO:
    case EMFILE:
    case ENFILE:
    case ENOBUFS:
    case ENOMEM:
    case EPERM:  // a security module refused this one connection
      return true;
    default:
      return false;
  }
}

absl::Status GetPeerCredentials(int sock, PeerCredentials* creds) {
  ucred cred{};
  socklen_t len = sizeof(cred);
  if (getsockopt(sock, SOL_SOCKET, SO_PEERCRED, &cred, &len) != 0) {
    return Errno("getsockopt(SO_PEERCRED)");
  }
  creds->pid = cred.pid;
  creds->uid = cred.uid;
  creds->gid = cred.gid;
  return absl::OkStatus();
}

}  // namespace missile::fdpass
