// Devices and contexts: primary contexts (refcounted per device), created contexts, and the
// per-thread stack of current contexts.
//
// A CUcontext handle is the address of a Context. Contexts are never freed (they are small), so a
// handle that was destroyed stays recognisable and gets CUDA_ERROR_INVALID_CONTEXT /
// CUDA_ERROR_CONTEXT_IS_DESTROYED instead of touching freed memory. Destroying a context (or
// releasing/resetting a primary context to inactive) drains and ends its streams, unloads its
// modules and frees the memory it allocated or registered, as the real driver does; VMM and pool
// memory are device-level and survive. Thread-safe; the current-context stack is per thread.

#ifndef MISSILE_TESTS_FAKECUDA_CONTEXT_H_
#define MISSILE_TESTS_FAKECUDA_CONTEXT_H_

#include <cuda.h>

#include <array>
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <unordered_set>
#include <vector>

#include "config.h"
#include "thread_annotations.h"

namespace fakecuda {

class FakeState;

struct Context {
  int device = 0;
  bool primary = false;
  uint64_t id = 0;
  std::atomic<bool> active{false};  // primary: retained and not reset; created: not destroyed
  std::atomic<unsigned> flags{0};

  CUcontext handle() { return reinterpret_cast<CUcontext>(this); }
};

class ContextManager {
 public:
  explicit ContextManager(FakeState* state);
  ContextManager(const ContextManager&) = delete;
  ContextManager& operator=(const ContextManager&) = delete;

  int device_count() const;
  CUresult CheckDevice(CUdevice dev) const;  // CUDA_ERROR_INVALID_DEVICE if out of range

  // The calling thread's current context: CUDA_ERROR_INVALID_CONTEXT if there is none,
  // CUDA_ERROR_CONTEXT_IS_DESTROYED if it was destroyed or its primary context is inactive.
  CUresult Current(Context** ctx) const;
  // A live context by handle; nullptr means the current context.
  CUresult Resolve(CUcontext handle, Context** ctx) const;

  CUresult PrimaryRetain(CUdevice dev, CUcontext* out);
  CUresult PrimaryRelease(CUdevice dev);
  CUresult PrimaryReset(CUdevice dev);
  CUresult PrimarySetFlags(CUdevice dev, unsigned flags);
  CUresult PrimaryGetState(CUdevice dev, unsigned* flags, int* active);

  CUresult Create(CUdevice dev, unsigned flags, CUcontext* out);
  CUresult Destroy(CUcontext handle);

  CUresult SetCurrent(CUcontext handle);
  CUresult GetCurrent(CUcontext* out) const;
  CUresult Push(CUcontext handle);
  CUresult Pop(CUcontext* out);

  // Waits for all work of every stream of the context.
  CUresult Synchronize(Context* ctx);

  // In a forked child: forgets the (parent's) contexts of the calling thread.
  static void ResetThreadAfterFork();

 private:
  bool KnownLocked(Context* ctx) const FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  Context* NewContextLocked(int device, bool primary) FAKECUDA_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Ends the context's streams, unloads its modules and frees its memory. Called without mu_ held.
  void Teardown(Context* ctx) FAKECUDA_LOCKS_EXCLUDED(mu_);

  FakeState* state_;
  mutable Mutex mu_;
  std::vector<std::unique_ptr<Context>> all_ FAKECUDA_GUARDED_BY(mu_);
  std::unordered_set<Context*> known_ FAKECUDA_GUARDED_BY(mu_);
  std::array<Context*, kMaxDevices> primary_ FAKECUDA_GUARDED_BY(mu_){};
  std::array<int, kMaxDevices> primary_refs_ FAKECUDA_GUARDED_BY(mu_){};
  std::array<unsigned, kMaxDevices> primary_flags_ FAKECUDA_GUARDED_BY(mu_){};
  uint64_t next_id_ FAKECUDA_GUARDED_BY(mu_) = 1;
};

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_CONTEXT_H_
