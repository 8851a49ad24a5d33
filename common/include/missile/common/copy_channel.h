// The copy channel: the data plane between a tenant's shim and missiled's PCIe scheduler for
// one GPU. gRPC is far too slow to sit between 2 MiB chunks that take 38 us each on the link
// (shared/device/H200.md: 55 GB/s), so requests, grants and completions travel through a page
// of shared memory (a memfd the daemon creates and passes on the side channel), with a futex
// per ring for the tenant to sleep on and an eventfd doorbell for the daemon.
//
// Per direction (host-to-device, device-to-host) three single-producer rings:
//   requests     tenant -> daemon  {tenant request id, bytes}
//   completions  tenant -> daemon  {grant id}
//   grants       daemon -> tenant  {tenant request id, offset, length, grant id}
// Each ring has a producer head in shared memory; the consumer keeps its own tail privately.
// The tenant keeps at most kRingSlots requests outstanding per direction; the daemon never has
// more grants in flight than its scheduler allows (far below kRingSlots), so rings never
// overflow. A tenant that writes garbage into its own region can only confuse its own copies:
// the daemon validates every entry it reads (unknown ids, absurd sizes) and drops the tenant's
// channel on the first bad one.
#ifndef MISSILE_COMMON_COPY_CHANNEL_H_
#define MISSILE_COMMON_COPY_CHANNEL_H_

#include <atomic>
#include <cstddef>
#include <cstdint>

namespace missile::copych {

inline constexpr uint32_t kMagic = 0x4d43484e;  // "MCHN"
inline constexpr uint32_t kVersion = 1;
inline constexpr uint32_t kRingSlots = 256;

enum Direction : uint32_t { kHostToDevice = 0, kDeviceToHost = 1 };

struct RequestEntry {
  uint64_t id;     // the tenant's request id (nonzero)
  uint64_t bytes;  // total bytes of the copy
};

struct GrantEntry {
  uint64_t request;  // the tenant's request id
  uint64_t offset;   // bytes into the copy
  uint64_t length;
  uint64_t grant;    // the daemon's grant id, echoed in the completion
};

struct alignas(64) Ring {
  std::atomic<uint64_t> request_head;     // written by the tenant
  alignas(64) std::atomic<uint64_t> completion_head;  // written by the tenant
  alignas(64) std::atomic<uint64_t> grant_head;       // written by the daemon
  alignas(64) std::atomic<uint32_t> grant_futex;      // bumped by the daemon with each grant batch
  alignas(64) RequestEntry requests[kRingSlots];
  uint64_t completions[kRingSlots];
  GrantEntry grants[kRingSlots];
};

struct Region {
  uint32_t magic;
  uint32_t version;
  uint64_t chunk_bytes;   // the scheduler's chunk size, for the tenant's information
  uint64_t bypass_bytes;  // copies smaller than this skip the scheduler
  std::atomic<uint32_t> closed;  // set by the daemon when it drops the channel
  Ring ring[2];           // by Direction
};

static_assert(std::atomic<uint64_t>::is_always_lock_free);
static_assert(std::atomic<uint32_t>::is_always_lock_free);

inline constexpr size_t kRegionBytes = (sizeof(Region) + 4095) / 4096 * 4096;

// Futex helpers on a shared mapping (not FUTEX_PRIVATE: the two sides are separate processes).
// Waits while *word == expected, at most timeout_us (0: forever). Returns on wake, timeout,
// interrupt or value change.
void FutexWait(std::atomic<uint32_t>* word, uint32_t expected, uint64_t timeout_us);
void FutexWakeAll(std::atomic<uint32_t>* word);

}  // namespace missile::copych

#endif  // MISSILE_COMMON_COPY_CHANNEL_H_
