// The shim's GPU memory: device allocations served from VRAM blocks that missiled owns.
//
// Every device allocation the program makes (cuMemAlloc, pitch, stream-ordered and its own VMM
// handles) is backed by blocks leased from the daemon within the tenant's quota. Large
// allocations map whole 2 MiB blocks into an address range the shim reserved per GPU; small ones
// (up to 1 MiB) are carved from blocks the shim already holds, with no round trip. A freed range
// stays mapped, with its blocks, for the next allocation of the same rounded size (a bounded
// cache per GPU); what leaves that cache goes back to the daemon in batches. Until then the
// daemon counts it against the tenant's quota, so an allocation that hits the quota and
// cuMemGetInfo first return the cache and the batch. Capacity queries report the tenant's
// quota and use, and pointer-range queries answer for Missile's allocations (the driver only
// knows the 2 MiB mappings behind them); a freed range is unknown to them even while cached.
//
// Each method returns std::nullopt when the call is not Missile's to serve (the hook then
// passes it to the driver): memory Missile did not allocate, host memory, or every new
// allocation and capacity query when the daemon cannot be reached, or its session ended (the
// daemon was stopped, restarted or killed), and MISSILE_NO_DAEMON=passthrough. Memory served
// before the session ended stays mapped and usable until the program frees it. A stream-ordered
// allocation on a stream being captured into a CUDA graph is served at capture, charged, and
// kept until the process exits (the graph may run again at any time): its frees do nothing.
//
// The facade over the pieces that do the work: the SessionManager (session_manager.h) gives
// the current daemon session and its SessionGpu of each GPU (session_gpu.h), whose GpuMemory
// (gpu_memory.h), made here, holds the mappings, the small-allocation chunks, the reuse cache
// and the queued frees; VmmHandles (vmm_handles.h) counts the program's VMM handles,
// DeferredFrees (deferred_frees.h) holds the frees of cuMemFreeAsync until their streams reach
// them. The manager itself keeps the allocation table and, for frees, each GpuMemory by the
// serial its allocations carry.
// Each GPU's state belongs to one session, so the memory of an ended session is unmapped
// locally when freed and its block ids never reach another daemon session; when the shim
// registered again into the same daemon session (the daemon kept it through a stall), the new
// state returns them (GpuMemory::AdoptedBy).
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_MEMORY_H_
#define MISSILE_LIBINTERCEPT_MEMORY_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "allocation_table.h"
#include "config.h"
#include "deferred_frees.h"
#include "driver_api.h"
#include "gpu_memory.h"
#include "session_manager.h"
#include "spdlog/logger.h"
#include "vmm_handles.h"

namespace missile::shim {

class MemoryManager {
 public:
  // `sessions` must outlive the manager.
  MemoryManager(const Config& config, const DriverApi& api, SessionManager* sessions,
                spdlog::logger* log);
  ~MemoryManager();
  MemoryManager(const MemoryManager&) = delete;
  MemoryManager& operator=(const MemoryManager&) = delete;

  std::optional<CUresult> Alloc(CUdeviceptr* dptr, size_t bytes);
  std::optional<CUresult> AllocPitch(CUdeviceptr* dptr, size_t* pitch, size_t width_bytes,
                                     size_t height, unsigned element_bytes);
  std::optional<CUresult> Free(CUdeviceptr dptr);
  std::optional<CUresult> AllocAsync(CUdeviceptr* dptr, size_t bytes, CUstream stream, bool ptsz);
  std::optional<CUresult> FreeAsync(CUdeviceptr dptr, CUstream stream, bool ptsz);

  std::optional<CUresult> GetInfo(size_t* free_bytes, size_t* total_bytes);
  std::optional<CUresult> TotalMem(size_t* bytes, CUdevice dev);
  // The allocation containing `ptr`, if Missile made it.
  std::optional<AllocationTable::Entry> Find(CUdeviceptr ptr) const { return table_.Find(ptr); }
  // Missile's allocations, for the copy path's classification of pointers.
  const AllocationTable& table() const { return table_; }

  // The program's own VMM calls (PyTorch's expandable segments).
  std::optional<CUresult> VmmCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                    const CUmemAllocationProp* prop, unsigned long long flags);
  std::optional<CUresult> VmmRelease(CUmemGenericAllocationHandle handle);
  void VmmRetained(CUmemGenericAllocationHandle handle) { vmm_.Retained(handle); }
  void VmmMapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle) {
    vmm_.Mapped(ptr, size, handle);
  }
  void VmmUnmapped(CUdeviceptr ptr, size_t size);

  // For the exit report: bytes of daemon blocks behind the program's live allocations (freed
  // ranges kept for reuse or waiting to go back are not counted, though the daemon counts them
  // until they are returned), and allocations served.
  uint64_t leased_bytes() const;
  uint64_t allocations() const { return allocations_.load(std::memory_order_relaxed); }
  bool connected() const { return sessions_->connected(); }
  // Allocations (and their bytes) that went to the driver directly, without a serving session.
  uint64_t passthrough_calls() const { return sessions_->passthrough_calls(); }
  uint64_t passthrough_bytes() const { return sessions_->passthrough_bytes(); }

  // For tests: the current session's state of CUDA device `dev`, if it has been set up.
  GpuMemory* StateOf(CUdevice dev);
  const VmmHandles& vmm_handles() const { return vmm_; }

 private:
  // The GPU of the calling thread's current context, or the given device, in the current
  // session; made on first use.
  absl::StatusOr<GpuMemory*> CurrentDevice();
  absl::StatusOr<GpuMemory*> DeviceOf(CUdevice dev);
  // What an allocation without a serving session does (MISSILE_NO_DAEMON); a passthrough of
  // `bytes` is counted for the session manager's reports.
  std::optional<CUresult> Unmanaged(const char* what, uint64_t bytes);
  // cuMemAllocAsync on a capturing stream: served like cuMemAlloc and kept until the process
  // exits; frees of it succeed and keep it.
  std::optional<CUresult> CapturedAlloc(CUdeviceptr* dptr, size_t bytes)
      ABSL_LOCKS_EXCLUDED(captured_mu_);
  bool Captured(CUdeviceptr dptr) const ABSL_LOCKS_EXCLUDED(captured_mu_);
  // Unmaps the reuse caches of an ended session's GPUs (the end listener).
  void SessionEnded(SessionClient* ended);
  absl::Status FreeManaged(CUdeviceptr dptr, const AllocationTable::Entry& entry, bool sync)
      ABSL_LOCKS_EXCLUDED(serials_mu_);
  void ReturnUnused(const VmmHandles::Unused& u);
  CUresult ToResult(const absl::Status& s, const char* what);

  const Config& config_;
  const DriverApi& api_;
  SessionManager* sessions_;
  spdlog::logger* log_;
  AllocationTable table_;
  VmmHandles vmm_;
  std::atomic<bool> setup_failure_logged_{false};
  std::atomic<bool> capture_logged_{false};
  std::atomic<bool> compression_logged_{false};
  // Allocations made during stream capture, which a graph may use until the process exits.
  mutable absl::Mutex captured_mu_;
  absl::flat_hash_set<CUdeviceptr> captured_ ABSL_GUARDED_BY(captured_mu_);
  std::atomic<bool> any_captured_{false};

  // Every GpuMemory made, by the serial its allocations carry in the table (each is owned by
  // its SessionGpu, which the session manager never destroys).
  mutable absl::Mutex serials_mu_;
  absl::flat_hash_map<uint64_t, GpuMemory*> by_serial_ ABSL_GUARDED_BY(serials_mu_);
  std::atomic<uint64_t> next_serial_{1};

  // The cuMemFreeAsync frees waiting for their streams; each is released by FreeManaged.
  DeferredFrees deferred_;

  std::atomic<uint64_t> allocations_{0};
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_MEMORY_H_
