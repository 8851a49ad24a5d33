#include "copy_gate.h"

#include <sys/mman.h>
#include <sys/prctl.h>
#include <time.h>
#include <unistd.h>

#include <chrono>
#include <deque>

namespace missile::shim {
namespace {

constexpr uint32_t kSlots = 4096;  // chunks of asynchronous copies waiting or in flight

}  // namespace

// One request: a synchronous copy waiting in its thread, or an asynchronous one on a stream.
struct CopyGate::Pending {
  bool async = false;
  uint64_t bytes = 0;
  // Synchronous: grants handed over by the dispatcher.
  absl::Mutex mu;
  absl::CondVar cv;
  std::deque<copych::GrantEntry> grants ABSL_GUARDED_BY(mu);
  bool released ABSL_GUARDED_BY(mu) = false;  // the gate was abandoned
  // Asynchronous: one slot per chunk; chunks not yet done.
  std::vector<uint32_t> slots;
  uint64_t remaining = 0;
};

absl::StatusOr<std::unique_ptr<CopyGate>> CopyGate::Open(int memfd, int doorbell,
                                                         const DriverApi& api,
                                                         spdlog::logger* log,
                                                         std::function<bool()> daemon_alive) {
  std::unique_ptr<CopyGate> g(new CopyGate());
  g->daemon_alive_ = std::move(daemon_alive);
  g->api_ = &api;
  g->log_ = log;
  g->memfd_ = memfd;
  g->doorbell_ = doorbell;
  void* p = mmap(nullptr, copych::kRegionBytes, PROT_READ | PROT_WRITE, MAP_SHARED, memfd, 0);
  if (p == MAP_FAILED) return absl::InternalError("mapping the copy channel failed");
  g->region_ = static_cast<copych::Region*>(p);
  if (g->region_->magic != copych::kMagic || g->region_->version != copych::kVersion) {
    return absl::FailedPreconditionError("copy channel: unknown format (daemon too old or new)");
  }
  g->chunk_bytes_ = g->region_->chunk_bytes;
  g->bypass_bytes_ = g->region_->bypass_bytes;
  if (g->chunk_bytes_ == 0) return absl::FailedPreconditionError("copy channel: no chunk size");
  if (api.MemHostAlloc == nullptr || api.MemHostGetDevicePointer == nullptr ||
      api.StreamWaitValue32 == nullptr || api.StreamWriteValue32 == nullptr) {
    return absl::UnimplementedError("the driver lacks stream memory operations");
  }
  void* host = nullptr;
  CUresult r = api.MemHostAlloc(&host, 2 * kSlots * sizeof(uint32_t),
                                CU_MEMHOSTALLOC_DEVICEMAP | CU_MEMHOSTALLOC_PORTABLE);
  if (r != CUDA_SUCCESS) return absl::InternalError("cuMemHostAlloc for copy flags failed");
  g->flags_ = static_cast<volatile uint32_t*>(host);
  g->done_ = g->flags_ + kSlots;
  CUdeviceptr dev = 0;
  if (api.MemHostGetDevicePointer(&dev, host, 0) != CUDA_SUCCESS) {
    return absl::InternalError("cuMemHostGetDevicePointer for copy flags failed");
  }
  g->flags_dev_ = dev;
  g->done_dev_ = dev + kSlots * sizeof(uint32_t);
  {
    absl::MutexLock lock(&g->slot_mu_);
    for (uint32_t i = kSlots; i > 0; --i) g->free_slots_.push_back(i - 1);
  }
  for (int d = 0; d < 2; ++d) {
    g->request_head_[d] = g->region_->ring[d].request_head.load();
    g->completion_head_[d] = g->region_->ring[d].completion_head.load();
    // Read here, not in the dispatcher: a grant may land before the thread first runs.
    g->grant_tail_[d] = g->region_->ring[d].grant_head.load();
  }
  CopyGate* raw = g.get();
  g->dispatchers_[0] = std::thread([raw] { raw->Dispatch(0); });
  g->dispatchers_[1] = std::thread([raw] { raw->Dispatch(1); });
  return g;
}

CopyGate::~CopyGate() {
  stop_ = true;
  Abandon();
  for (auto& t : dispatchers_) {
    if (t.joinable()) t.join();
  }
  if (region_ != nullptr) munmap(region_, copych::kRegionBytes);
  if (memfd_ >= 0) close(memfd_);
  if (doorbell_ >= 0) close(doorbell_);
}

void CopyGate::Ring() {
  uint64_t one = 1;
  (void)!write(doorbell_, &one, sizeof(one));
}

bool CopyGate::Submit(copych::Direction dir, uint64_t bytes, Pending* p) {
  uint64_t id = next_request_.fetch_add(1);
  {
    absl::MutexLock lock(&pending_mu_);
    pending_[id] = p;
  }
  {
    absl::MutexLock lock(&ring_mu_[dir]);
    copych::Ring& r = region_->ring[dir];
    r.requests[request_head_[dir] % copych::kRingSlots] = {id, bytes};
    r.request_head.store(++request_head_[dir], std::memory_order_release);
  }
  Ring();
  return true;
}

void CopyGate::Complete(copych::Direction dir, uint64_t grant) {
  {
    absl::MutexLock lock(&ring_mu_[dir]);
    copych::Ring& r = region_->ring[dir];
    r.completions[completion_head_[dir] % copych::kRingSlots] = grant;
    r.completion_head.store(++completion_head_[dir], std::memory_order_release);
  }
  Ring();
}

std::vector<uint32_t> CopyGate::TakeSlots(size_t n) {
  absl::MutexLock lock(&slot_mu_);
  if (free_slots_.size() < n) return {};
  std::vector<uint32_t> out(free_slots_.end() - n, free_slots_.end());
  free_slots_.resize(free_slots_.size() - n);
  return out;
}

void CopyGate::ReturnSlot(uint32_t slot) {
  absl::MutexLock lock(&slot_mu_);
  free_slots_.push_back(slot);
}

CUresult CopyGate::RunSync(copych::Direction dir, uint64_t bytes, const Chunk& copy) {
  if (abandoned()) return copy(0, bytes);
  Pending p;
  p.bytes = bytes;
  Submit(dir, bytes, &p);
  CUresult result = CUDA_SUCCESS;
  uint64_t done = 0;
  while (done < bytes) {
    copych::GrantEntry g{};
    bool released = false;
    {
      absl::MutexLock lock(&p.mu);
      while (p.grants.empty() && !p.released) p.cv.Wait(&p.mu);
      if (!p.grants.empty()) {
        g = p.grants.front();
        p.grants.pop_front();
      } else {
        released = true;
      }
    }
    if (released) {
      // The daemon is gone: copy what is left without it (grants arrive in offset order).
      if (result == CUDA_SUCCESS) result = copy(done, bytes - done);
      break;
    }
    if (result == CUDA_SUCCESS) result = copy(g.offset, g.length);
    Complete(dir, g.grant);  // even after an error: the daemon's books must balance
    done = g.offset + g.length;
  }
  absl::MutexLock lock(&pending_mu_);
  for (auto it = pending_.begin(); it != pending_.end(); ++it) {
    if (it->second == &p) {
      pending_.erase(it);
      break;
    }
  }
  return result;
}

CUresult CopyGate::EnqueueAsync(copych::Direction dir, uint64_t bytes, CUstream stream, bool ptsz,
                                const AsyncChunk& copy) {
  if (abandoned()) return copy(0, bytes, stream);
  uint64_t chunks = (bytes + chunk_bytes_ - 1) / chunk_bytes_;
  std::vector<uint32_t> slots = TakeSlots(chunks);
  if (slots.empty()) {
    // More chunks in flight than slots: schedule it from this thread instead.
    return RunSync(dir, bytes, [&](uint64_t off, uint64_t len) { return copy(off, len, stream); });
  }
  auto wait = ptsz ? api_->StreamWaitValue32Ptsz : api_->StreamWaitValue32;
  auto write = ptsz ? api_->StreamWriteValue32Ptsz : api_->StreamWriteValue32;
  for (uint32_t s : slots) {
    flags_[s] = 0;
    done_[s] = 0;
  }
  // Submit before enqueueing: a long copy fills the stream's command queue, and the driver
  // then blocks the enqueue until the GPU drains it, which it can only do once chunks are
  // granted. Grants that arrive before their wait is enqueued just set the flag early.
  auto* p = new Pending();  // owned by the dispatcher from here; freed when the last chunk is done
  p->async = true;
  p->bytes = bytes;
  p->slots = slots;
  p->remaining = chunks;
  Submit(dir, bytes, p);
  CUresult r = CUDA_SUCCESS;
  uint64_t i = 0;
  for (; i < chunks && r == CUDA_SUCCESS; ++i) {
    uint32_t s = slots[i];
    uint64_t off = i * chunk_bytes_;
    uint64_t len = std::min(chunk_bytes_, bytes - off);
    r = wait(stream, flags_dev_ + s * sizeof(uint32_t), 1, CU_STREAM_WAIT_VALUE_GEQ);
    if (r == CUDA_SUCCESS) r = copy(off, len, stream);
    if (r == CUDA_SUCCESS) r = write(stream, done_dev_ + s * sizeof(uint32_t), 1, 0);
  }
  if (r != CUDA_SUCCESS) {
    // The chunks from the failed one on never reach the GPU: mark them done so the dispatcher
    // completes their grants, and let any wait already queued through.
    for (uint64_t k = i == 0 ? 0 : i - 1; k < chunks; ++k) done_[slots[k]] = 1;
    for (uint32_t s : slots) flags_[s] = 1;
    log_->error("enqueueing a scheduled asynchronous copy failed ({})", static_cast<int>(r));
    return r;
  }
  return CUDA_SUCCESS;
}

void CopyGate::Abandon() {
  if (abandoned_.exchange(true)) return;
  absl::MutexLock lock(&pending_mu_);
  for (auto& [id, p] : pending_) {
    if (p->async) {
      for (uint32_t s : p->slots) flags_[s] = 1;
    } else {
      absl::MutexLock plock(&p->mu);
      p->released = true;
      p->cv.SignalAll();
    }
  }
}

void CopyGate::Dispatch(int d) {
  prctl(PR_SET_TIMERSLACK, 1000UL);  // make the short naps below as short as asked
  auto dir = static_cast<copych::Direction>(d);
  copych::Ring& r = region_->ring[d];
  uint64_t tail = grant_tail_[d];
  struct InFlight {
    uint64_t grant;
    uint32_t slot;
    uint64_t request;
    Pending* p;
  };
  std::vector<InFlight> inflight;
  while (!stop_) {
    uint32_t seen = r.grant_futex.load(std::memory_order_acquire);
    uint64_t head = r.grant_head.load(std::memory_order_acquire);
    for (; tail < head; ++tail) {
      copych::GrantEntry g = r.grants[tail % copych::kRingSlots];
      Pending* p = nullptr;
      {
        // A synchronous request's Pending lives on its caller's stack until the caller erases
        // it from pending_: hand the grant over while holding pending_mu_.
        absl::MutexLock lock(&pending_mu_);
        auto it = pending_.find(g.request);
        if (it == pending_.end()) continue;  // not ours any more (an honest daemon never does this)
        p = it->second;
        if (!p->async) {
          absl::MutexLock plock(&p->mu);
          p->grants.push_back(g);
          p->cv.Signal();
          continue;
        }
      }
      uint64_t index = g.offset / chunk_bytes_;
      if (index >= p->slots.size()) continue;
      uint32_t slot = p->slots[index];
      std::atomic_thread_fence(std::memory_order_release);
      flags_[slot] = 1;  // the GPU may start this chunk
      inflight.push_back({g.grant, slot, g.request, p});
    }
    // Chunks the GPU has finished: report them.
    for (size_t i = 0; i < inflight.size();) {
      if (done_[inflight[i].slot] == 1) {
        std::atomic_thread_fence(std::memory_order_acquire);
        Complete(dir, inflight[i].grant);
        ReturnSlot(inflight[i].slot);
        Pending* p = inflight[i].p;
        if (--p->remaining == 0) {
          absl::MutexLock lock(&pending_mu_);
          pending_.erase(inflight[i].request);
          delete p;
        }
        inflight[i] = inflight.back();
        inflight.pop_back();
      } else {
        ++i;
      }
    }
    if (!abandoned()) {
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
    if (!inflight.empty()) {
      // Nothing tells the host when the GPU writes a done flag: look again shortly. A 2 MiB
      // chunk takes 38 us on the H200's link (shared/device/H200.md), so 10 us keeps the
      // detection delay small without spinning a core.
      timespec nap{0, 10 * 1000};
      nanosleep(&nap, nullptr);
      continue;
    }
    if (r.grant_head.load(std::memory_order_acquire) == tail) {
      copych::FutexWait(&r.grant_futex, seen, 100000);
    }
  }
}

}  // namespace missile::shim
