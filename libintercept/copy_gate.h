// The shim's end of one GPU's copy channel (common/copy_channel.h): every host-device copy
// that crosses PCIe waits, chunk by chunk, for missiled's fair scheduler to grant it.
//
// The channel's gates live in memory shared with the daemon and registered with the driver,
// so the GPU reads and writes them directly and no thread of the tenant sits between a chunk
// and its grant:
// - Asynchronous copies stay asynchronous. The shim posts the request, then enqueues on the
//   caller's stream a write of the request's `arrived` gate, and per chunk a wait for its `go`
//   gate (cuStreamWaitValue32), the chunk's copy and a write of its `done` gate
//   (cuStreamWriteValue32), and returns. The daemon queues the request when the stream reaches
//   it, opens each chunk's gate when it grants the chunk, and sees it finish. Stream order is
//   kept because everything is on the stream. When the stream is idle (cuStreamQuery), the
//   shim marks the request arrived itself and waits up to 50 us for the first grant; chunks
//   already granted when they are enqueued get no wait on the stream.
// - Synchronous copies run in the calling thread: the request is marked arrived (by the thread
//   when the stream it is ordered on is idle, else by the GPU on that stream), then the thread
//   waits for each chunk's gate (spinning briefly, then on a futex the daemon wakes), copies the chunk with the
//   caller's own synchronous entry point and marks it done. The call returns when the copy is
//   done, as before.
// If the daemon goes away (it closes the channel, or its session dies), the gate opens: every
// waiting chunk is let through and later copies run unscheduled.
// Thread-safety: RunSync and EnqueueAsync may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_COPY_GATE_H_
#define MISSILE_LIBINTERCEPT_COPY_GATE_H_

#include <cuda.h>

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <thread>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "driver_api.h"
#include "missile/common/copy_channel.h"
#include "missile/common/shm_region.h"
#include "spdlog/logger.h"

namespace missile::shim {

class CopyGate {
 public:
  using Chunk = std::function<CUresult(uint64_t offset, uint64_t length)>;
  using AsyncChunk = std::function<CUresult(uint64_t offset, uint64_t length, CUstream stream)>;

  // Takes ownership of the region's memfd and the doorbell descriptor, and closes them when it
  // fails too. `daemon_alive` is polled
  // (every 20 ms): once it says false, the gate opens for good. Needs a current context.
  static absl::StatusOr<std::unique_ptr<CopyGate>> Open(int memfd, int doorbell,
                                                        const DriverApi& api,
                                                        spdlog::logger* log,
                                                        std::function<bool()> daemon_alive);
  ~CopyGate();

  uint64_t bypass_bytes() const { return bypass_bytes_; }
  // How the next copy is cut: the daemon's current word for this tenant (it changes with
  // contention), or the size the channel opened with if the word is not a sane size.
  uint64_t chunk_bytes() const;
  bool abandoned() const { return abandoned_.load(std::memory_order_acquire); }
  // Copies that found every gate taken and ran unscheduled.
  uint64_t overflowed() const { return overflowed_.load(std::memory_order_relaxed); }

  // A copy of more than a quarter of the gates' worth of chunks, or of more than 1 GiB, goes as
  // several requests, one after the other, so that no copy is too large to schedule.
  // RunSync: `order` is the stream the copy is ordered on (CU_STREAM_LEGACY or
  // CU_STREAM_PER_THREAD for the synchronous entry points, the caller's stream for a pageable
  // asynchronous copy; `ptsz`: with the per-thread flavour of the stream calls), so that the
  // request counts as arrived only once that stream's earlier work is done.
  CUresult RunSync(copych::Direction dir, uint64_t bytes, CUstream order, bool ptsz,
                   const Chunk& copy);
  // `host_paced` (a paced BE tenant): the calling thread waits for each chunk's grant itself
  // and enqueues the chunk then, so that nothing of the copy waits on the GPU for a gate (a
  // stream parked on a host flag makes its context runnable, and the GPU gives it a time
  // slice next to the LS tenants). The call returns once the last chunk is enqueued.
  CUresult EnqueueAsync(copych::Direction dir, uint64_t bytes, CUstream stream, bool ptsz,
                        const AsyncChunk& copy, bool host_paced = false);

  // Lets every waiting chunk go and stops scheduling (the daemon is gone).
  void Abandon();

 private:
  CopyGate() = default;
  // At most a quarter of the gates' worth of chunks, and at most about 1 GiB, so that a long
  // synchronous copy re-reads the chunk size (which changes with contention) every 1 GiB.
  static uint64_t PieceBytes(uint64_t chunk) {
    constexpr uint64_t kMaxPiece = uint64_t{1} << 30;
    return std::max(chunk, std::min(chunk * (copych::kGates / 4), kMaxPiece / chunk * chunk));
  }
  // `gpu_reports_done`: each chunk is enqueued on `order` (a host-paced asynchronous copy), so
  // a write on the stream reports it done; otherwise the chunk's copy returned when done.
  CUresult RunSyncPiece(copych::Direction dir, uint64_t bytes, uint64_t chunk, CUstream order,
                        bool ptsz, const Chunk& copy, bool gpu_reports_done = false);
  CUresult EnqueueAsyncPiece(copych::Direction dir, uint64_t bytes, uint64_t chunk,
                             CUstream stream, bool ptsz, const AsyncChunk& copy);
  CUresult EnqueueHostPacedPiece(copych::Direction dir, uint64_t bytes, uint64_t chunk,
                                 CUstream stream, bool ptsz, const AsyncChunk& copy);
  // Takes `chunks` consecutive gates, resets them and posts the request; the first gate, or
  // nullopt when the gates are all taken or the gate was abandoned. `arrived`: the request is
  // at the head of its stream already (a synchronous copy, or a stream with nothing queued);
  // such a request takes the grant the daemon lent ahead if there is one, and its first gate
  // is open on return.
  std::optional<uint32_t> Post(copych::Direction dir, uint64_t bytes, uint64_t chunk,
                               bool arrived);
  // Waits until the daemon opens the gate (true) or the gate is abandoned (false).
  bool WaitGo(copych::Direction dir, uint32_t gate);
  void Watch();
  CUdeviceptr DeviceAddress(const std::atomic<uint32_t>* word) const {
    return region_dev_ + static_cast<CUdeviceptr>(reinterpret_cast<const char*>(word) -
                                                  reinterpret_cast<const char*>(region_));
  }
  CUresult Unscheduled(const Chunk& copy, uint64_t bytes);

  const DriverApi* api_ = nullptr;
  spdlog::logger* log_ = nullptr;
  shm::ShmRegion memory_;
  int doorbell_ = -1;
  copych::Region* region_ = nullptr;  // in memory_
  bool registered_ = false;
  CUdeviceptr region_dev_ = 0;  // the region as the GPU sees it
  uint64_t opened_chunk_bytes_ = 0;  // the chunk size when the channel opened
  uint64_t bypass_bytes_ = 0;

  // Per direction: the gates [tail, head) (counted modulo kGates) belong to posted requests;
  // the tail moves on over gates the daemon has counted.
  struct Side {
    // Held from posting an asynchronous copy to enqueueing its last operation, so that two
    // threads' copies on one stream never interleave there: the daemon grants a tenant's
    // requests in order, and a later request's wait ahead of an earlier one's chunks would
    // stall both. Taken before mu.
    absl::Mutex enqueue_mu;
    absl::Mutex mu;
    uint64_t head ABSL_GUARDED_BY(mu) = 0;
    uint64_t tail ABSL_GUARDED_BY(mu) = 0;
  };
  Side side_[2];  // by copych::Direction

  std::function<bool()> daemon_alive_;
  std::atomic<bool> abandoned_{false};
  std::atomic<bool> stop_{false};
  std::atomic<uint64_t> overflowed_{0};
  std::atomic<bool> overflow_logged_{false};
  std::atomic<bool> memop_failure_logged_{false};
  std::thread watcher_;
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_COPY_GATE_H_
