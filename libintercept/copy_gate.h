// The shim's end of one GPU's copy channel (common/copy_channel.h): every host-device copy
// that crosses PCIe waits, chunk by chunk, for missiled's fair scheduler to grant it.
//
// Synchronous copies run in the calling thread: each granted chunk is copied with the caller's
// own synchronous entry point, so the call returns when the copy is done, as before.
// Asynchronous copies from pinned memory stay asynchronous: for each chunk the shim enqueues on
// the caller's stream a wait on a device-visible host flag (cuStreamWaitValue32), the chunk's
// copy, and a write of a done flag (cuStreamWriteValue32), then returns. A dispatcher thread
// per direction sets a chunk's flag when its grant arrives and reports the chunk complete when
// the GPU has written its done flag. Stream order is kept because everything is on the stream.
// If the daemon goes away, the gate opens: every waiting chunk is released and later copies
// run unscheduled.
// Thread-safety: RunSync and EnqueueAsync may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_COPY_GATE_H_
#define MISSILE_LIBINTERCEPT_COPY_GATE_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "driver_api.h"
#include "missile/common/copy_channel.h"
#include "spdlog/logger.h"

namespace missile::shim {

class CopyGate {
 public:
  using Chunk = std::function<CUresult(uint64_t offset, uint64_t length)>;
  using AsyncChunk = std::function<CUresult(uint64_t offset, uint64_t length, CUstream stream)>;

  // Takes ownership of the region's memfd and the doorbell eventfd. `daemon_alive` is polled
  // by the dispatchers (at least every 100 ms): once it says false, the gate opens for good.
  static absl::StatusOr<std::unique_ptr<CopyGate>> Open(int memfd, int doorbell,
                                                        const DriverApi& api,
                                                        spdlog::logger* log,
                                                        std::function<bool()> daemon_alive);
  ~CopyGate();

  uint64_t bypass_bytes() const { return bypass_bytes_; }
  uint64_t chunk_bytes() const { return chunk_bytes_; }
  bool abandoned() const { return abandoned_.load(std::memory_order_acquire); }

  CUresult RunSync(copych::Direction dir, uint64_t bytes, const Chunk& copy);
  CUresult EnqueueAsync(copych::Direction dir, uint64_t bytes, CUstream stream, bool ptsz,
                        const AsyncChunk& copy);

  // Lets every waiting chunk go and stops scheduling (the daemon is gone).
  void Abandon();

 private:
  struct Pending;
  struct Slot;
  CopyGate() = default;
  bool Submit(copych::Direction dir, uint64_t bytes, Pending* p);
  void Complete(copych::Direction dir, uint64_t grant);
  void Ring();
  void Dispatch(int dir);
  std::vector<uint32_t> TakeSlots(size_t n);
  void ReturnSlot(uint32_t slot);

  const DriverApi* api_ = nullptr;
  spdlog::logger* log_ = nullptr;
  int memfd_ = -1;
  int doorbell_ = -1;
  copych::Region* region_ = nullptr;
  uint64_t chunk_bytes_ = 0;
  uint64_t bypass_bytes_ = 0;

  // Device-visible host flags: flags_[i] = 1 lets chunk i start; done_[i] = 1 once copied.
  volatile uint32_t* flags_ = nullptr;
  volatile uint32_t* done_ = nullptr;
  CUdeviceptr flags_dev_ = 0;
  CUdeviceptr done_dev_ = 0;
  absl::Mutex slot_mu_;
  std::vector<uint32_t> free_slots_ ABSL_GUARDED_BY(slot_mu_);

  absl::Mutex ring_mu_[2];  // writers of the request and completion rings
  uint64_t request_head_[2] = {0, 0};
  uint64_t completion_head_[2] = {0, 0};
  uint64_t grant_tail_[2] = {0, 0};  // where each dispatcher starts reading grants

  absl::Mutex pending_mu_;
  absl::flat_hash_map<uint64_t, Pending*> pending_ ABSL_GUARDED_BY(pending_mu_);
  std::atomic<uint64_t> next_request_{1};

  std::function<bool()> daemon_alive_;
  std::atomic<bool> abandoned_{false};
  std::atomic<bool> stop_{false};
  std::thread dispatchers_[2];
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_COPY_GATE_H_
