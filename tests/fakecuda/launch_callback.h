// The driver's launch callback: how a process masks the TPCs its kernels may use (tpcs.h).
//
// On Hopper with driver 580 this is an undocumented export table (cuGetExportTable with
// kCallbackTableId): entry 0 is the table's size in bytes; entry 3 subscribes a callback
//   int subscribe(uint32_t* handle, void (*cb)(void* userdata, int domain, int cbid,
//                                              const void* params), void* userdata)
// (0 and a new handle >= 1; nonzero for a null handle or callback); entry 6
//   int enable(uint32_t on, uint32_t handle, int domain, int cbid)
// turns one callback site on or off for a subscriber (0; nonzero for an unknown handle). The
// fake's other entries return nonzero. Only domain 0xb, cbid 1 ("before the launch descriptor is
// uploaded") has an effect; other sites are accepted and never called. At every launch (not while
// a stream captures) and, for a graph's kernel nodes, at the graph's upload, each enabled
// subscriber is called on the launching thread with a params block of kParamsSize bytes, zero
// but for its first uint32, its size, and its 8-byte word at kParamsDescOffset, which points
// directly to the launch descriptor: kLaunchDescSize zeroed bytes with the version byte at
// kLaunchDescVersionOffset. What the subscribers leave in the descriptor's mask words and enable
// bit (tpcs.h) is the launch's disable mask.
//
// Subscribers live as long as the process. Thread-safe: subscribe and enable may race with
// launches on other threads; the callbacks run without any lock held.

#ifndef MISSILE_TESTS_FAKECUDA_LAUNCH_CALLBACK_H_
#define MISSILE_TESTS_FAKECUDA_LAUNCH_CALLBACK_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <vector>

#include "thread_annotations.h"
#include "tpcs.h"

namespace fakecuda {

// The bytes of the table's CUuuid.
inline constexpr unsigned char kCallbackTableId[16] = {
    0x2c, 0x8e, 0x0a, 0xd8, 0x07, 0x10, 0xab, 0x4e, 0x90, 0xdd, 0x54, 0x71, 0x9f, 0xe5, 0xf7, 0x4b};
inline constexpr int kLaunchDomain = 0xb;
inline constexpr int kLaunchCbid = 1;
inline constexpr uint32_t kParamsSize = 0x30;
inline constexpr size_t kParamsDescOffset = 32;  // pointer index 4
static_assert(kParamsDescOffset + sizeof(void*) <= kParamsSize);
inline constexpr uint8_t kDefaultLaunchDescVersion = 0x40;

using LaunchCallbackFn = void (*)(void* userdata, int domain, int cbid, const void* params);

class LaunchCallbacks {
 public:
  explicit LaunchCallbacks(uint8_t desc_version) : desc_version_(desc_version) {}
  LaunchCallbacks(const LaunchCallbacks&) = delete;
  LaunchCallbacks& operator=(const LaunchCallbacks&) = delete;

  // The export table's entries 3 and 6.
  int Subscribe(uint32_t* handle, LaunchCallbackFn cb, void* userdata) FAKECUDA_LOCKS_EXCLUDED(mu_);
  int Enable(uint32_t on, uint32_t handle, int domain, int cbid) FAKECUDA_LOCKS_EXCLUDED(mu_);

  // One launch: calls every subscriber enabled for the launch site on a fresh descriptor and
  // returns the TPCs it disables. Without one, an atomic load and no mask.
  TpcMask DisabledTpcs() const FAKECUDA_LOCKS_EXCLUDED(mu_);

 private:
  struct Subscriber {
    uint32_t handle = 0;
    LaunchCallbackFn cb = nullptr;
    void* userdata = nullptr;
    bool on_launch = false;  // enabled for (kLaunchDomain, kLaunchCbid)
  };

  const uint8_t desc_version_;
  mutable Mutex mu_;
  std::vector<Subscriber> subscribers_ FAKECUDA_GUARDED_BY(mu_);
  std::atomic<int> enabled_{0};  // subscribers with on_launch
};

// The table cuGetExportTable hands out for kCallbackTableId.
const void* CallbackExportTable();

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_LAUNCH_CALLBACK_H_
