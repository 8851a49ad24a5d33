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
// passes it to the driver): memory Missile did not allocate, host memory, calls made while
// a stream is being captured into a CUDA graph, or every new allocation and capacity query when
// the daemon cannot be reached, or its session ended (the daemon was stopped, restarted or
// killed), and MISSILE_NO_DAEMON=passthrough. Memory served before the session ended stays
// mapped and usable until the program frees it.
//
// Sessions: the first is opened on first use (and tried once). When it ends, a thread watches
// for a restarted daemon (a different instance id) and registers the process again; a session
// that a still running daemon ended is not replaced (that daemon took its blocks back while
// this process still maps them). Each GPU's state (Device) belongs to one session: its RPCs go
// to that session only, so an old session's block ids never reach a new one, and the memory of
// an ended session is unmapped locally when freed.
// Thread-safety: every method may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_MEMORY_H_
#define MISSILE_LIBINTERCEPT_MEMORY_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <optional>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/container/btree_map.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "allocation_table.h"
#include "config.h"
#include "daemon_client.h"
#include "driver_api.h"
#include "spdlog/logger.h"

namespace missile::shim {

class MemoryManager {
 public:
  MemoryManager(const Config& config, const DriverApi& api, spdlog::logger* log);
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

  // The program's own VMM calls (PyTorch's expandable segments).
  std::optional<CUresult> VmmCreate(CUmemGenericAllocationHandle* handle, size_t size,
                                    const CUmemAllocationProp* prop, unsigned long long flags);
  std::optional<CUresult> VmmRelease(CUmemGenericAllocationHandle handle);
  void VmmRetained(CUmemGenericAllocationHandle handle);
  void VmmMapped(CUdeviceptr ptr, size_t size, CUmemGenericAllocationHandle handle);
  void VmmUnmapped(CUdeviceptr ptr, size_t size);

  // For the exit report: bytes of daemon blocks behind the program's live allocations (freed
  // ranges kept for reuse or waiting to go back are not counted, though the daemon counts them
  // until they are returned), and allocations served.
  uint64_t leased_bytes() const { return leased_bytes_.load(std::memory_order_relaxed); }
  uint64_t allocations() const { return allocations_.load(std::memory_order_relaxed); }
  bool connected() const;

  // The current daemon session (the newest), connected on first use; nullptr when unreachable.
  // It may have ended: see connected().
  DaemonClient* Client();
  // The current session while it serves: nullptr when unreachable or once it ended (logged
  // once per session, which also starts watching for a restarted daemon).
  DaemonClient* Serving();
  // The daemon's index for a device, if the daemon manages it.
  std::optional<uint32_t> GpuIndex(CUdevice dev);

 private:
  struct Device;
  // Daemon blocks mapped, in order, at an address of the shim's range.
  struct Mapping {
    uint64_t bytes;
    std::vector<uint64_t> blocks;
  };
  struct DeferredFree {
    CUevent event;
    CUdeviceptr ptr;
    CUcontext ctx;
  };
  struct VmmHandle {
    uint32_t gpu;
    uint64_t block;
    uint64_t bytes;
    int refs = 1;      // handle references: create + retains - releases
    int mappings = 0;  // live cuMemMap ranges
  };

  TenantIdentity Identity() const;
  // Watches for a restarted daemon while the current session has ended (section comment above).
  void ReconnectLoop();
  // Registers again if a different daemon instance listens; true when it never should (the
  // daemon that ended the session still runs).
  bool TryRegisterAgain(DaemonClient* ended);
  // The GPU of the calling thread's current context, or the given device, in the current session.
  absl::StatusOr<Device*> CurrentDevice();
  absl::StatusOr<Device*> DeviceOf(CUdevice dev);
  std::optional<CUresult> Unmanaged(const char* what);

  // A freed range of exactly `bytes` taken from the reuse cache (the newest), or else: reserves
  // addresses, leases `bytes` from the daemon (one block if `single`, else one per granule),
  // maps them. Records the mapping either way.
  absl::StatusOr<CUdeviceptr> MapNew(Device& d, uint64_t bytes, bool single);
  absl::StatusOr<CUdeviceptr> AllocLarge(Device& d, uint64_t bytes);
  absl::StatusOr<CUdeviceptr> AllocSmall(Device& d, uint64_t bytes);
  absl::Status MapBlocks(Device& d, CUdeviceptr va, std::vector<BlockLease>& leases);
  absl::StatusOr<std::vector<BlockLease>> Lease(Device& d, bool single, uint64_t bytes);
  // The helpers below that say "the caller holds d.mu" carry ABSL_EXCLUSIVE_LOCKS_REQUIRED(d.mu)
  // on their definitions in memory.cc: Device is complete only there.
  // Takes the mapping at `va` out of use: keeps it mapped in the reuse cache, evicting the
  // oldest ranges past the cache's bounds. The caller holds d.mu.
  void ReleaseRange(Device& d, CUdeviceptr va);
  // The newest cached range of exactly `bytes`, moved back to the mappings. The caller holds d.mu.
  std::optional<CUdeviceptr> TakeCached(Device& d, uint64_t bytes);
  // Evicts every cached range. The caller holds d.mu.
  void DrainCache(Device& d);
  // Unmaps a range, frees its addresses and queues its blocks for return. The caller holds d.mu.
  void UnmapRange(Device& d, CUdeviceptr va, const Mapping& m);
  // Sends the daemon the queued blocks: once a batch is full, or now if `force`.
  void FlushFrees(Device& d, bool force);
  // Returns everything freed that the daemon still counts against the tenant on this GPU: the
  // reuse cache and the queued blocks.
  void ReturnFreed(Device& d);
  absl::Status FreeManaged(CUdeviceptr dptr, const AllocationTable::Entry& entry, bool sync);
  void ReapDeferred(bool wait);
  // Returns a program VMM handle's block once it is released and unmapped everywhere.
  void MaybeReturnVmm(CUmemGenericAllocationHandle handle);
  CUresult ToResult(const absl::Status& s, const char* what);

  const Config& config_;
  const DriverApi& api_;
  spdlog::logger* log_;
  AllocationTable table_;

  absl::Mutex client_mu_;
  // Every session of this process, oldest first; ended ones stay, since their Devices (and
  // threads in calls) may still point at them.
  std::vector<std::unique_ptr<DaemonClient>> clients_ ABSL_GUARDED_BY(client_mu_);
  bool client_tried_ ABSL_GUARDED_BY(client_mu_) = false;
  std::atomic<DaemonClient*> client_ptr_{nullptr};  // clients_.back()
  std::atomic<bool> client_failed_{false};  // the first connection attempt failed
  std::atomic<DaemonClient*> lost_logged_for_{nullptr};
  std::atomic<bool> register_failure_logged_{false};
  std::atomic<bool> reserve_failure_logged_{false};

  absl::Mutex reconnect_mu_;
  absl::CondVar reconnect_cv_;
  bool stop_reconnect_ ABSL_GUARDED_BY(reconnect_mu_) = false;
  std::atomic<bool> reconnect_started_{false};
  std::thread reconnect_;

  absl::Mutex devices_mu_;
  // Every Device ever made (they are never destroyed: allocations refer to them by serial).
  std::vector<std::unique_ptr<Device>> all_devices_ ABSL_GUARDED_BY(devices_mu_);
  absl::flat_hash_map<uint64_t, Device*> by_serial_ ABSL_GUARDED_BY(devices_mu_);
  // The current session's Device per CUDA ordinal.
  absl::flat_hash_map<int, Device*> devices_ ABSL_GUARDED_BY(devices_mu_);
  uint64_t next_serial_ ABSL_GUARDED_BY(devices_mu_) = 1;

  absl::Mutex deferred_mu_;
  std::vector<DeferredFree> deferred_ ABSL_GUARDED_BY(deferred_mu_);
  absl::flat_hash_map<CUdeviceptr, AllocationTable::Entry> deferred_entries_
      ABSL_GUARDED_BY(deferred_mu_);

  absl::Mutex vmm_mu_;
  absl::flat_hash_map<CUmemGenericAllocationHandle, VmmHandle> vmm_ ABSL_GUARDED_BY(vmm_mu_);
  absl::flat_hash_map<CUmemGenericAllocationHandle, Device*> vmm_devices_ ABSL_GUARDED_BY(vmm_mu_);
  absl::btree_map<CUdeviceptr, std::pair<CUmemGenericAllocationHandle, size_t>> vmm_maps_
      ABSL_GUARDED_BY(vmm_mu_);

  std::atomic<uint64_t> leased_bytes_{0};
  std::atomic<uint64_t> allocations_{0};
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_MEMORY_H_
