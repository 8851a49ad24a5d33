// The copy channel: the data plane between a tenant's shim and missiled's PCIe scheduler for
// one GPU. gRPC is far too slow to sit between 2 MiB chunks that take 38 us each on the link
// (docs/hardware/h200.md, "PCIe": 55 GB/s), and so is waking a thread per chunk: requests go
// through a ring in shared memory (a memfd the daemon creates and passes on the side channel),
// and every chunk has a gate, a few words in the same memory that the tenant also registers
// with the driver, so that the GPU itself can wait on them and report to the daemon.
//
// Per direction (host-to-device, device-to-host):
//   requests  tenant -> daemon: {bytes, chunk bytes, first gate}; chunk k of the copy (offset
//             k * chunk bytes) uses gate (first + k) % kGates. The tenant cuts each copy by the
//             region's chunk_bytes as it reads it when posting; the daemon changes that word
//             with contention (a BE tenant copies in large chunks while no LS tenant is
//             copying, in small ones while one is). It always accepts the small size, and
//             the large one from a channel that was offered it within the last second.
//   gates     per chunk:
//     arrived  the copy has reached the head of its stream (written once per request, on the
//              first gate: by the GPU for an asynchronous copy, by the calling thread for a
//              synchronous one). Only then does the daemon queue the request: a copy that waits
//              behind a kernel must not hold the link it is not using.
//     go       written by the daemon when it grants the chunk; the GPU's stream waits for it
//              (cuStreamWaitValue32), or the calling thread does.
//     done     1 when the chunk's copy has finished (written by the GPU, or the calling
//              thread); 2 once the daemon has counted it, after which the tenant may reuse it.
// The request ring has a producer head in shared memory; the daemon keeps its tail privately.
// After each request the tenant sends a byte on the channel's doorbell, a socket pair of which
// it holds one end and the daemon the other.
//   head_start  per direction, 1 while the daemon lends the tenant a grant ahead of its next
//             request: the direction's link is idle and the daemon keeps an in-flight slot free
//             for it. A tenant posting a copy that starts at once (arrived) may take it
//             (exchange to 0), open the request's first gate itself and mark the request
//             kRequestStarted; the daemon then counts that chunk as granted when it reads the
//             request. The daemon takes the word back (exchange to 0) before it grants anything
//             else in that direction; when it finds it taken, it keeps the slot until the
//             marked request comes (or a grant's timeout passes). This saves the first chunk of
//             a copy after a quiet spell the round trip through a daemon thread that is asleep.
//             A request marked without a lent grant is malformed.
// A tenant never has more than kGates chunks outstanding per direction, so neither the ring
// nor the gates overflow.
//
// A tenant that writes garbage into its own region can only confuse its own copies: the daemon
// reads gates only of chunks it granted, validates every request (absurd sizes, gates out of
// range) and drops the tenant's channel on the first bad one.
#ifndef MISSILE_COMMON_COPY_CHANNEL_H_
#define MISSILE_COMMON_COPY_CHANNEL_H_

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>

namespace missile::copych {

inline constexpr uint32_t kMagic = 0x4d43484e;  // "MCHN"
inline constexpr uint32_t kVersion = 4;
inline constexpr uint32_t kGates = 4096;  // chunks outstanding per direction (8 GiB at 2 MiB)

enum Direction : uint32_t { kHostToDevice = 0, kDeviceToHost = 1 };

// Values of Gates::done.
inline constexpr uint32_t kDoneCopied = 1;
inline constexpr uint32_t kDoneCounted = 2;

// RequestEntry::flags.
inline constexpr uint32_t kRequestStarted = 1;  // its first chunk went on the lent grant

struct RequestEntry {
  uint64_t bytes;        // total bytes of the copy
  uint64_t chunk_bytes;  // how it is cut
  uint32_t first;        // the gate of its first chunk
  uint32_t flags;        // kRequestStarted or 0
};

struct alignas(64) Gates {
  std::atomic<uint32_t> arrived[kGates];
  std::atomic<uint32_t> go[kGates];
  std::atomic<uint32_t> done[kGates];
};

struct alignas(64) Ring {
  std::atomic<uint64_t> request_head;          // written by the tenant
  alignas(64) std::atomic<uint32_t> sync_waiters;  // tenant threads asleep on a go word
  alignas(64) std::atomic<uint32_t> head_start;    // 1: a grant lent ahead (see above)
  alignas(64) RequestEntry requests[kGates];
  Gates gates;
};

struct Region {
  uint32_t magic;
  uint32_t version;
  // How the tenant cuts its next copy; written by the daemon at any time, read per copy.
  std::atomic<uint64_t> chunk_bytes;
  uint64_t bypass_bytes;  // copies smaller than this skip the scheduler
  std::atomic<uint32_t> closed;  // set (and woken) by the daemon when it drops the channel
  Ring ring[2];           // by Direction
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);
static_assert(sizeof(std::atomic<uint32_t>) == sizeof(uint32_t));  // the GPU writes plain words

inline constexpr size_t kRegionBytes = (sizeof(Region) + 4095) / 4096 * 4096;

// The gate of chunk `index` of a request whose first gate is `first`.
inline uint32_t GateOf(uint32_t first, uint64_t index) {
  return static_cast<uint32_t>((first + index) % kGates);
}

// For the short spins on both sides: a pause that lets a sibling hyperthread run, and the
// monotonic clock the spin windows are measured on.
inline void CpuRelax() {
#if defined(__x86_64__) || defined(__i386__)
  __builtin_ia32_pause();
#elif defined(__aarch64__)
  asm volatile("yield");
#endif
}
inline uint64_t MonotonicNs() {
  return static_cast<uint64_t>(std::chrono::duration_cast<std::chrono::nanoseconds>(
                                   std::chrono::steady_clock::now().time_since_epoch())
                                   .count());
}

// Futex helpers on a shared mapping (not FUTEX_PRIVATE: the two sides are separate processes).
// Waits while *word == expected, at most timeout_us (0: forever). Returns on wake, timeout,
// interrupt or value change.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_us);
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace missile::copych

#endif  // MISSILE_COMMON_COPY_CHANNEL_H_
