#include "copy_gate.h"

#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/prctl.h>
#include <unistd.h>

namespace missile::shim {
namespace {

using copych::kGates;

// A synchronous copy's thread spins this long for its grant before sleeping: an uncontended
// grant comes back within microseconds when the daemon is polling (2.0 us median, 6.9 us p99 on
// the development machine: bench/results/2026-11-29-grant-latency-cpu).
constexpr uint64_t kSyncSpinNs = 50'000;
// An asynchronous copy on an idle stream waits this long for its first grant before it leaves
// the waiting to the GPU (see EnqueueAsync): about one 2 MiB chunk on the H200's link, so an LS
// copy behind a BE chunk is usually granted within it.
constexpr uint64_t kAsyncGrantSpinNs = 50'000;

bool SaneChunk(uint64_t bytes) {
  return bytes != 0 && bytes % 4096 == 0 && bytes <= (uint64_t{1} << 30);
}

}  // namespace

uint64_t CopyGate::chunk_bytes() const {
  const uint64_t now = region_->chunk_bytes.load(std::memory_order_relaxed);
  return SaneChunk(now) ? now : opened_chunk_bytes_;
}

absl::StatusOr<std::unique_ptr<CopyGate>> CopyGate::Open(int memfd, int doorbell,
                                                         const DriverApi& api,
                                                         spdlog::logger* log,
                                                         std::function<bool()> daemon_alive) {
  std::unique_ptr<CopyGate> g(new CopyGate());
  g->daemon_alive_ = std::move(daemon_alive);
  g->api_ = &api;
  g->log_ = log;
  g->doorbell_ = doorbell;
  absl::StatusOr<shm::ShmRegion> memory =
      shm::ShmRegion::Attach(memfd, copych::kRegionBytes, shm::Access::kReadWrite);
  if (!memory.ok()) return memory.status();
  g->memory_ = *std::move(memory);
  void* p = g->memory_.data();
  g->region_ = static_cast<copych::Region*>(p);
  if (g->region_->magic != copych::kMagic || g->region_->version != copych::kVersion) {
    return absl::FailedPreconditionError("copy channel: unknown format (daemon too old or new)");
  }
  g->opened_chunk_bytes_ = g->region_->chunk_bytes.load(std::memory_order_relaxed);
  g->bypass_bytes_ = g->region_->bypass_bytes;
  if (!SaneChunk(g->opened_chunk_bytes_)) {
    return absl::FailedPreconditionError("copy channel: no valid chunk size");
  }
  if (api.MemHostRegister == nullptr || api.MemHostUnregister == nullptr ||
      api.MemHostGetDevicePointer == nullptr || api.StreamWaitValue32 == nullptr ||
      api.StreamWriteValue32 == nullptr || api.StreamWaitValue32Ptsz == nullptr ||
      api.StreamWriteValue32Ptsz == nullptr) {
    return absl::UnimplementedError("the driver lacks host registration or stream memory operations");
  }
  CUresult r = api.MemHostRegister(p, copych::kRegionBytes,
                                   CU_MEMHOSTREGISTER_DEVICEMAP | CU_MEMHOSTREGISTER_PORTABLE);
  if (r != CUDA_SUCCESS) {
    return absl::InternalError("cuMemHostRegister of the copy channel failed (" +
                               std::to_string(static_cast<int>(r)) + ")");
  }
  g->registered_ = true;
  CUdeviceptr dev = 0;
  if (api.MemHostGetDevicePointer(&dev, p, 0) != CUDA_SUCCESS) {
    return absl::InternalError("cuMemHostGetDevicePointer for the copy channel failed");
  }
  g->region_dev_ = dev;
  CopyGate* raw = g.get();
  g->watcher_ = std::thread([raw] { raw->Watch(); });
  return g;
}

CopyGate::~CopyGate() {
  stop_ = true;
  Abandon();
  if (watcher_.joinable()) watcher_.join();
  if (registered_) api_->MemHostUnregister(region_);
  if (doorbell_ >= 0) close(doorbell_);
}

std::optional<uint32_t> CopyGate::Post(copych::Direction dir, uint64_t bytes, uint64_t chunk,
                                       bool arrived) {
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  copych::Ring& r = region_->ring[dir];
  copych::Gates& g = r.gates;
  uint32_t first = 0;
  {
    Side& side = side_[dir];
    absl::MutexLock lock(&side.mu);
    if (abandoned()) return std::nullopt;  // Abandon opened only the gates taken before it
    while (side.tail < side.head &&
           g.done[side.tail % kGates].load(std::memory_order_acquire) == copych::kDoneCounted) {
      ++side.tail;
    }
    if (chunks > kGates - (side.head - side.tail)) return std::nullopt;
    first = static_cast<uint32_t>(side.head % kGates);
    side.head += chunks;
    for (uint64_t k = 0; k < chunks; ++k) {
      uint32_t gate = copych::GateOf(first, k);
      g.go[gate].store(0, std::memory_order_relaxed);
      g.done[gate].store(0, std::memory_order_relaxed);
    }
    g.arrived[first].store(arrived ? 1 : 0, std::memory_order_relaxed);
    // A copy that starts at once may go on a grant the daemon lent ahead: its first gate opens
    // now, without a round trip through the daemon's thread. One behind other work on its
    // stream may not: it would hold the slot while it waits.
    uint32_t flags = 0;
    if (arrived && r.head_start.load(std::memory_order_relaxed) == 1 &&
        r.head_start.exchange(0, std::memory_order_acq_rel) == 1) {
      g.go[first].store(1, std::memory_order_relaxed);
      flags = copych::kRequestStarted;
    }
    // This process is the head's only writer, and writes it under side.mu.
    const uint64_t head = r.request_head.load(std::memory_order_relaxed);
    r.requests[head % kGates] = {bytes, chunk, first, flags};
    r.request_head.store(head + 1, std::memory_order_release);
  }
  // Never blocks (a full doorbell has rung already) and never raises SIGPIPE (the daemon may be
  // gone; the watcher notices that).
  const char one = 1;
  (void)!send(doorbell_, &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL);
  return first;
}

bool CopyGate::WaitGo(copych::Direction dir, uint32_t gate) {
  copych::Ring& r = region_->ring[dir];
  std::atomic<uint32_t>& go = r.gates.go[gate];
  const uint64_t spin_until = copych::MonotonicNs() + kSyncSpinNs;
  while (go.load(std::memory_order_acquire) == 0) {
    if (abandoned()) return false;
    if (copych::MonotonicNs() < spin_until) {
      for (int i = 0; i < 16; ++i) copych::CpuRelax();
      continue;
    }
    r.sync_waiters.fetch_add(1, std::memory_order_seq_cst);
    if (go.load(std::memory_order_seq_cst) == 0) copych::FutexWait(&go, 0, 2000);
    r.sync_waiters.fetch_sub(1, std::memory_order_seq_cst);
  }
  return true;
}

CUresult CopyGate::Unscheduled(const Chunk& copy, uint64_t bytes) {
  if (!abandoned()) {
    overflowed_.fetch_add(1, std::memory_order_relaxed);
    if (!overflow_logged_.exchange(true)) {
      log_->warn("more than {} chunks of copies outstanding in one direction: further copies run "
                 "unscheduled until some finish", kGates);
    }
  }
  return copy(0, bytes);
}

CUresult CopyGate::RunSync(copych::Direction dir, uint64_t bytes, CUstream order, bool ptsz,
                           const Chunk& copy) {
  CUresult r = CUDA_SUCCESS;
  for (uint64_t off = 0; off < bytes && r == CUDA_SUCCESS;) {
    const uint64_t chunk = chunk_bytes();  // per piece: a long copy follows the daemon's word
    const uint64_t len = std::min(PieceBytes(chunk), bytes - off);
    r = RunSyncPiece(dir, len, chunk, order, ptsz,
                     [&](uint64_t o, uint64_t l) { return copy(off + o, l); });
    off += len;
  }
  return r;
}

CUresult CopyGate::EnqueueAsync(copych::Direction dir, uint64_t bytes, CUstream stream, bool ptsz,
                                const AsyncChunk& copy, bool host_paced) {
  CUresult r = CUDA_SUCCESS;
  for (uint64_t off = 0; off < bytes && r == CUDA_SUCCESS;) {
    const uint64_t chunk = chunk_bytes();
    const uint64_t len = std::min(PieceBytes(chunk), bytes - off);
    auto part = [&](uint64_t o, uint64_t l, CUstream s) { return copy(off + o, l, s); };
    r = host_paced ? EnqueueHostPacedPiece(dir, len, chunk, stream, ptsz, part)
                   : EnqueueAsyncPiece(dir, len, chunk, stream, ptsz, part);
    off += len;
  }
  return r;
}

CUresult CopyGate::EnqueueHostPacedPiece(copych::Direction dir, uint64_t bytes, uint64_t chunk,
                                         CUstream stream, bool ptsz, const AsyncChunk& copy) {
  // A synchronous copy's chunk loop in this thread, each chunk enqueued on the caller's stream
  // and reported done by the GPU: nothing of it waits on the stream for a gate.
  absl::MutexLock in_order(&side_[dir].enqueue_mu);
  return RunSyncPiece(
      dir, bytes, chunk, stream, ptsz,
      [&](uint64_t off, uint64_t len) { return copy(off, len, stream); },
      /*gpu_reports_done=*/true);
}

CUresult CopyGate::RunSyncPiece(copych::Direction dir, uint64_t bytes, uint64_t chunk,
                                CUstream order, bool ptsz, const Chunk& copy,
                                bool gpu_reports_done) {
  if (abandoned()) return copy(0, bytes);
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  // The copy starts only after the work already on its stream (a synchronous copy waits for
  // it): until then its chunks must not hold the link, so a busy stream reports the arrival.
  auto query = ptsz ? api_->StreamQueryPtsz : api_->StreamQuery;
  const bool idle = query == nullptr || query(order) == CUDA_SUCCESS;
  std::optional<uint32_t> first = Post(dir, bytes, chunk, /*arrived=*/idle);
  if (!first.has_value()) return Unscheduled(copy, bytes);
  copych::Gates& g = region_->ring[dir].gates;
  if (!idle) {
    // The gate is not reused before this call returns: its first chunk is granted only after
    // this write has run, and copied (and reported) by this thread.
    auto write = ptsz ? api_->StreamWriteValue32Ptsz : api_->StreamWriteValue32;
    if (write(order, DeviceAddress(&g.arrived[*first]), 1, CU_STREAM_WRITE_VALUE_DEFAULT) !=
        CUDA_SUCCESS) {
      g.arrived[*first].store(1, std::memory_order_release);
    }
  }
  CUresult result = CUDA_SUCCESS;
  for (uint64_t k = 0; k < chunks; ++k) {
    uint32_t gate = copych::GateOf(*first, k);
    // After an error the rest is not copied, so it need not wait for its grants: reported done
    // now, it is counted when the daemon grants it (as an asynchronous copy's are).
    if (result == CUDA_SUCCESS) {
      WaitGo(dir, gate);  // abandoned: go ahead without the daemon
      uint64_t off = k * chunk;
      result = copy(off, std::min(chunk, bytes - off));
      if (result == CUDA_SUCCESS && gpu_reports_done) {
        auto write = ptsz ? api_->StreamWriteValue32Ptsz : api_->StreamWriteValue32;
        if (write(order, DeviceAddress(&g.done[gate]), 1, CU_STREAM_WRITE_VALUE_DEFAULT) ==
            CUDA_SUCCESS) {
          continue;
        }
        // The GPU cannot report this chunk: report it once it is surely done.
        auto sync = ptsz ? api_->StreamSynchronizePtsz : api_->StreamSynchronize;
        if (sync != nullptr) sync(order);
      }
    }
    g.done[gate].store(copych::kDoneCopied, std::memory_order_release);
  }
  return result;
}

CUresult CopyGate::EnqueueAsyncPiece(copych::Direction dir, uint64_t bytes, uint64_t chunk,
                                     CUstream stream, bool ptsz, const AsyncChunk& copy) {
  if (abandoned()) return copy(0, bytes, stream);
  absl::MutexLock in_order(&side_[dir].enqueue_mu);
  const uint64_t chunks = (bytes + chunk - 1) / chunk;
  // A stream with nothing queued reaches the copy at once: say so now rather than have the GPU
  // say it. On the H200, a stream of another process that is copying keeps the copy engine
  // for a time slice (about a millisecond) before this stream runs even its first operation,
  // and an LS copy that the daemon learns of only then has lost its head start.
  auto query = ptsz ? api_->StreamQueryPtsz : api_->StreamQuery;
  const bool idle = query != nullptr && query(stream) == CUDA_SUCCESS;
  // Post before enqueueing: a long copy fills the stream's command queue, and the driver then
  // blocks the enqueue until the GPU drains it, which it can only do once chunks are granted.
  std::optional<uint32_t> first = Post(dir, bytes, chunk, /*arrived=*/idle);
  if (!first.has_value()) {
    return Unscheduled([&](uint64_t off, uint64_t len) { return copy(off, len, stream); }, bytes);
  }
  auto wait = ptsz ? api_->StreamWaitValue32Ptsz : api_->StreamWaitValue32;
  auto write = ptsz ? api_->StreamWriteValue32Ptsz : api_->StreamWriteValue32;
  copych::Gates& g = region_->ring[dir].gates;
  CUresult r = CUDA_SUCCESS;
  if (idle) {
    // The daemon usually grants an arrived request within microseconds. A chunk whose gate is
    // open when it is enqueued needs no wait on the stream, and a stream that never waits on
    // an unopened gate never gives up the copy engine, so wait a little for the first grant.
    const uint64_t until = copych::MonotonicNs() + kAsyncGrantSpinNs;
    while (g.go[*first].load(std::memory_order_acquire) == 0 && copych::MonotonicNs() < until && !abandoned()) {
      for (int i = 0; i < 16; ++i) copych::CpuRelax();
    }
  } else {
    r = write(stream, DeviceAddress(&g.arrived[*first]), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
  }
  bool queued_ops = !idle && r == CUDA_SUCCESS;  // something on the stream refers to the gates
  // Chunks [0, enqueued) have their copy on the stream, [0, reported) also their done write.
  uint64_t enqueued = 0;
  uint64_t reported = 0;
  CUresult copy_result = CUDA_SUCCESS;
  for (uint64_t k = 0; k < chunks && r == CUDA_SUCCESS; ++k) {
    uint32_t gate = copych::GateOf(*first, k);
    uint64_t off = k * chunk;
    if (g.go[gate].load(std::memory_order_acquire) == 0) {
      r = wait(stream, DeviceAddress(&g.go[gate]), 1, CU_STREAM_WAIT_VALUE_GEQ);
      if (r != CUDA_SUCCESS) break;
      queued_ops = true;
    }
    copy_result = copy(off, std::min(chunk, bytes - off), stream);
    if (copy_result != CUDA_SUCCESS) {
      r = copy_result;
      break;
    }
    enqueued = k + 1;
    r = write(stream, DeviceAddress(&g.done[gate]), 1, CU_STREAM_WRITE_VALUE_DEFAULT);
    if (r == CUDA_SUCCESS) reported = k + 1;
  }
  if (r == CUDA_SUCCESS) return CUDA_SUCCESS;
  // The request must be queued at all, so that its gates open.
  g.arrived[*first].store(1, std::memory_order_release);
  if (queued_ops) {
    // Operations on these gates may still be queued on the stream (a wait whose copy failed,
    // the arrived write): let them run first, or a stale one could meet a gate's next request
    // once the daemon has counted it and it is reused.
    auto sync = ptsz ? api_->StreamSynchronizePtsz : api_->StreamSynchronize;
    if (sync != nullptr) sync(stream);
  }
  // The chunks whose done write is not on the stream are reported done from here, so the
  // daemon counts them once it grants them.
  for (uint64_t j = reported; j < chunks; ++j) {
    g.done[copych::GateOf(*first, j)].store(copych::kDoneCopied, std::memory_order_release);
  }
  if (copy_result != CUDA_SUCCESS) return copy_result;  // the program's own copy failed
  // Only the scheduling around it failed: the rest of the copy goes unscheduled, so the
  // program gets the copy it asked for.
  if (!memop_failure_logged_.exchange(true)) {
    log_->error("a stream memory operation for a scheduled copy failed ({}); the copy goes on "
                "unscheduled", static_cast<int>(r));
  }
  const uint64_t from = enqueued * chunk;
  return from >= bytes ? CUDA_SUCCESS : copy(from, bytes - from, stream);
}

void CopyGate::Abandon() {
  if (abandoned_.exchange(true)) return;
  for (int d = 0; d < 2; ++d) {
    absl::MutexLock lock(&side_[d].mu);
    copych::Ring& r = region_->ring[d];
    for (uint64_t i = side_[d].tail; i < side_[d].head; ++i) {
      r.gates.go[i % kGates].store(1, std::memory_order_release);
      copych::FutexWakeAll(&r.gates.go[i % kGates]);
    }
  }
}

void CopyGate::Watch() {
  prctl(PR_SET_NAME, "missile-copies");
  while (!stop_ && !abandoned()) {
    copych::FutexWait(&region_->closed, 0, 20000);
    if (stop_ || abandoned()) break;
    if (region_->closed.load(std::memory_order_acquire) != 0) {
      log_->warn("missiled closed the copy channel; copies now run unscheduled");
      Abandon();
    } else if (daemon_alive_ && !daemon_alive_()) {
      // The daemon died without closing the channel (killed, crashed): nobody will grant
      // anything any more. Let every waiting chunk go rather than hang the program.
      log_->warn("missiled is gone; copies now run unscheduled");
      Abandon();
    }
  }
}

}  // namespace missile::shim
