// The daemon's fixed limits and timeouts on what tenants may hold open: connections, streams,
// threads. Every number here bounds what one misbehaving (or merely stuck) process can take
// from the daemon, so that the daemon and the other tenants keep working. docs/operations.md
// ("Limits and timeouts") lists them for operators; deploy/missiled.service sets TasksMax and
// LimitNOFILE to match.
// Thread-safety: constants only.
// (Named daemon_limits.h, not limits.h: the daemon directory is on the include path, where a
// limits.h would stand in for the C library's.)
#ifndef MISSILE_DAEMON_DAEMON_LIMITS_H_
#define MISSILE_DAEMON_DAEMON_LIMITS_H_

#include <chrono>
#include <cstddef>

namespace missile::daemon::limits {

// --- side channel (SideChannelServer) ---

// A side connection must send its hello within this time, or it is closed. An honest shim sends
// it right after connecting, from the thread that registered, so it arrives within microseconds;
// 2 s leaves room for a loaded machine and still clears a flood of idle connections quickly.
inline constexpr std::chrono::milliseconds kSideHandshakeTimeout{2000};

// Once the first byte of a request has arrived, the rest must follow within this time, or the
// connection is closed (ending its session). A request is one write of ~1 KiB by the shim, so
// only a peer that dribbles bytes on purpose runs into it. An authenticated connection that
// sends nothing is never closed for it: closing the side channel ends the session, and a tenant
// may go hours without an allocation.
inline constexpr std::chrono::milliseconds kSideMessageTimeout{2000};

// Side connections (greeted or not) one uid may hold open, unless limits.max_side_connections_
// per_uid says otherwise; a connection beyond it is closed at once. Each session needs one.
// Root and the admin group are not held to it, nor to kMaxSideConnections.
inline constexpr size_t kMaxSideConnectionsPerUid = 64;

// Side connections of all uids together (one per session once greeted).
inline constexpr size_t kMaxSideConnections = 4096;

// Connections that have not greeted yet, all uids together. At this many, the oldest such
// connection is closed to make room for the new one, so a flood of idle connections cannot keep
// a real tenant's hello out (a real tenant's hello is read as soon as it is accepted).
inline constexpr size_t kMaxPendingSideConnections = 128;

// --- both accept loops (side channel and gRPC) ---

// After a transient accept failure (EMFILE, ENFILE, ENOBUFS, ENOMEM, ...) the loop waits this
// long before it accepts again, instead of spinning on a full descriptor table.
inline constexpr std::chrono::milliseconds kAcceptBackoff{50};

// Repeated warnings of one kind (refused connections, accept failures) are logged at most once
// per this interval, with the number suppressed in between.
inline constexpr std::chrono::seconds kLogInterval{10};

// --- gRPC (RpcServer) ---

// Open Watch streams per session. The shim opens one per session; more are refused with
// RESOURCE_EXHAUSTED.
inline constexpr int kMaxWatchStreamsPerSession = 4;

// Threads the gRPC server may use for calls. A Watch stream is served without a thread of its
// own (callback API), so this bounds the unary calls running at once; a call beyond it is
// refused with RESOURCE_EXHAUSTED by gRPC. Unary calls take microseconds to milliseconds.
inline constexpr int kMaxRpcThreads = 64;

// --- the whole process ---
// deploy/missiled.service sets TasksMax=1024: kMaxRpcThreads, one copy arbiter and one pacing
// sampler per GPU, the process watcher, the two accept threads, and gRPC's own event-engine
// threads (a small pool that grows with the number of cores), with room to spare. With no
// thread per connection or stream, the count does not grow with tenants.
// LimitNOFILE=1048576: one descriptor per VRAM block held (a 141 GB GPU is about 70,000 blocks
// of 2 MiB), plus at most kMaxSideConnections side connections, limits.max_connections gRPC
// connections (two descriptors each: gRPC's and the registry's duplicate) and the
// administrators' reserve, limits.admin_reserve_fds. The per-uid gRPC limits and the idle
// timeout of connections without a session are in the [limits] section of the configuration
// (config.h, LimitsSection), not here.

}  // namespace missile::daemon::limits

#endif  // MISSILE_DAEMON_DAEMON_LIMITS_H_
