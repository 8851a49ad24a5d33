// Stream-ordered allocation: memory pools (cuMemPoolCreate, the default pool of each device) and
// cuMemAllocAsync / cuMemFreeAsync / cuMemAllocFromPoolAsync.
//
// An allocation is charged (like cuMemAlloc, page rounded) and mapped when the call is made, so
// the pointer can be returned at once and is usable by any work queued after the call; frees
// happen in stream order (the free runs on the stream's worker when earlier work is done). Freed
// blocks stay reserved in the pool (and charged) while the pool's reserved memory is within
// CU_MEMPOOL_ATTR_RELEASE_THRESHOLD (default 0: released at once), are reused by later
// allocations of a fitting size, and are released by cuMemPoolTrimTo.
// A CUmemoryPool handle is the address of its Pool, looked up in a registry.
// Thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_POOLS_H_
#define MISSILE_TESTS_FAKECUDA_POOLS_H_

#include <cuda.h>

#include <array>
#include <cstdint>
#include <map>
#include <memory>
#include <mutex>
#include <unordered_map>

#include "config.h"
#include "streams.h"
#include "thread_annotations.h"

namespace fakecuda {

class FakeState;
struct Context;

class PoolManager {
 public:
  explicit PoolManager(FakeState* state);
  PoolManager(const PoolManager&) = delete;
  PoolManager& operator=(const PoolManager&) = delete;

  CUresult DefaultPool(CUdevice dev, CUmemoryPool* out);
  CUresult CurrentPool(CUdevice dev, CUmemoryPool* out);
  CUresult SetCurrentPool(CUdevice dev, CUmemoryPool pool);
  CUresult Create(const CUmemPoolProps* props, CUmemoryPool* out);
  CUresult Destroy(CUmemoryPool pool);
  CUresult SetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value);
  CUresult GetAttribute(CUmemoryPool pool, CUmemPool_attribute attr, void* value);
  CUresult TrimTo(CUmemoryPool pool, size_t min_bytes_to_keep);

  // pool nullptr: the current pool of the stream's device.
  CUresult AllocAsync(CUdeviceptr* dptr, size_t bytes, CUmemoryPool pool, CUstream stream,
                      DefaultStream mode);
  CUresult FreeAsync(CUdeviceptr dptr, CUstream stream, DefaultStream mode);
  // cuMemFree of a pool allocation: freed now.
  CUresult FreeNow(CUdeviceptr dptr);

 private:
  struct Pool {
    int device = 0;
    bool is_default = false;
    bool destroyed = false;
    uint64_t release_threshold = 0;
    int reuse_follow_event_dependencies = 1;
    int reuse_allow_opportunistic = 1;
    int reuse_allow_internal_dependencies = 1;
    uint64_t used = 0;
    uint64_t reserved = 0;  // used + cached
    uint64_t used_high = 0;
    uint64_t reserved_high = 0;
    std::multimap<size_t, uintptr_t> cached;      // free blocks by size
    std::unordered_map<uintptr_t, size_t> live;   // allocated blocks by address
    std::unordered_map<uintptr_t, bool> freeing;  // cuMemFreeAsync queued, not yet run
    CUmemoryPool handle() { return reinterpret_cast<CUmemoryPool>(this); }
  };

  Pool* LookupLocked(CUmemoryPool pool) FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Pool* DefaultLocked(int device) FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Returns a block to its pool (the stream-ordered part of a free).
  void ReturnBlock(Pool* pool, uintptr_t ptr) FAKECUDA_LOCKS_EXCLUDED(mu_);
  // Unmaps cached blocks until reserved <= keep.
  void TrimLocked(Pool* pool, uint64_t keep) FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  FakeState* state_;
  Mutex mu_;
  std::unordered_map<Pool*, std::unique_ptr<Pool>> pools_ FAKECUDA_GUARDED_BY(mu_);
  std::array<Pool*, kMaxDevices> default_ FAKECUDA_GUARDED_BY(mu_){};
  std::array<Pool*, kMaxDevices> current_ FAKECUDA_GUARDED_BY(mu_){};
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_POOLS_H_
