// The side channel between the shim and missiled: gRPC cannot carry file descriptors, so the
// descriptors of VRAM blocks travel on a second Unix socket with SCM_RIGHTS. This header holds
// the wire format (fixed-size little-endian structs, same host on both ends) and the
// sendmsg/recvmsg helpers. The protocol:
//   client -> daemon  Hello{magic, version, session_id, token}
//   daemon -> client  Reply{status, count = 0}
//   client -> daemon  FetchRequest{kFetchBlocks, gpu, count, block ids} (count <= kMaxFdsPerMessage)
//   daemon -> client  Reply{status, count} + `count` descriptors, in the order of the ids
//   client -> daemon  FetchRequest{kOpenCopyChannel, gpu}
//   daemon -> client  Reply{status, 2} + the copy channel's memfd and the tenant's end of its doorbell socket pair
//                     (see copy_channel.h)
//   client -> daemon  FetchRequest{kOpenPacing, gpu}
//   daemon -> client  Reply{status, 2} + the GPU's pacing directory (sealed: read-only to the
//                     tenant) and the session's lanes page (pacing_region.h); the tenant finds
//                     its entry by its session id
//   client -> daemon  FetchRequest{kOpenPeerLanes, gpu, reserved = slot, block_ids[0] = epoch}
//   daemon -> client  Reply{status, 1} + that slot's lanes page (sealed: read-only), for a BE
//                     session, if the directory publishes it with that epoch
// A status other than 0 is an absl::StatusCode; the message then carries no descriptors.
// Thread-safety: the helpers are reentrant; one socket must not be used by two threads at once.
#ifndef MISSILE_COMMON_FD_PASSING_H_
#define MISSILE_COMMON_FD_PASSING_H_

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"

namespace missile::fdpass {

inline constexpr uint32_t kMagic = 0x4d534c31;  // "MSL1"
inline constexpr uint32_t kVersion = 3;
// Under the kernel's SCM_MAX_FD (253), and small enough that a tenant never holds many
// unimported descriptors at once.
inline constexpr uint32_t kMaxFdsPerMessage = 128;

struct Hello {
  uint32_t magic = kMagic;
  uint32_t version = kVersion;
  uint64_t session_id = 0;
  uint8_t token[16] = {};
};

enum Op : uint32_t { kFetchBlocks = 1, kOpenCopyChannel = 2, kOpenPacing = 3, kOpenPeerLanes = 4 };

struct FetchRequest {
  uint32_t op = kFetchBlocks;
  uint32_t gpu = 0;
  uint32_t count = 0;
  uint32_t reserved = 0;
  uint64_t block_ids[kMaxFdsPerMessage] = {};
};

struct Reply {
  uint32_t status = 0;  // absl::StatusCode
  uint32_t count = 0;   // descriptors attached
};

// Sends exactly `len` bytes with `fds` attached to the first byte. Retries on EINTR.
absl::Status SendMessage(int sock, const void* data, size_t len, const std::vector<int>& fds = {});

// Receives exactly `len` bytes; descriptors that arrive are appended to `fds` (close-on-exec)
// and are the caller's to close, also when an error is returned. End of stream before any byte
// -> absl::UnavailableError; a receive timeout (SO_RCVTIMEO) or a non-blocking socket with
// nothing to read -> absl::DeadlineExceededError.
absl::Status ReceiveMessage(int sock, void* data, size_t len, std::vector<int>* fds = nullptr);

// A connected Unix stream socket to `path`, close-on-exec. With `timeout_ms` > 0 the socket's
// send and receive timeouts (SetIoTimeout) are set first, so the connect itself (which blocks
// while a stopped server's backlog is full) and every later send and receive on it are bounded.
absl::Status ConnectUnix(const std::string& path, int* sock, int timeout_ms = 0);

// A listening Unix stream socket at `path` (an existing socket file there is replaced) with
// the given mode and, if set, group; close-on-exec. The directory must be owned by root or the
// caller's effective uid and writable by its owner only (FAILED_PRECONDITION otherwise): the
// mode and group are set relative to it without following links.
absl::Status ListenUnix(const std::string& path, unsigned mode, int* sock,
                        std::optional<unsigned> gid = std::nullopt);

// Sets the socket's send and receive timeouts (SO_SNDTIMEO, SO_RCVTIMEO): a blocking send or
// receive then fails after `ms` milliseconds instead of waiting for ever.
absl::Status SetIoTimeout(int sock, int ms);

// Whether accept(2) failing with `err` says something about the moment (descriptors or memory
// exhausted, a connection aborted before it was accepted) rather than about the listening
// socket: an accept loop retries these, after a pause where resources ran out.
bool IsTransientAcceptError(int err);

struct PeerCredentials {
  int pid = 0;
  unsigned uid = 0;
  unsigned gid = 0;
};

// The kernel's record of who is on the other end of a connected Unix socket (SO_PEERCRED).
absl::Status GetPeerCredentials(int sock, PeerCredentials* creds);

}  // namespace missile::fdpass

#endif  // MISSILE_COMMON_FD_PASSING_H_
