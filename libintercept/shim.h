// The shim's one owner of process state: configuration, the real driver, per-hook counters,
// the logger and the exit report.
//
// Created on first use (the first driver call, from whichever thread makes it) and never
// destroyed, so calls made from other libraries' exit handlers still find it. The real driver is
// loaded and every hook resolved exactly once, by the first call that needs it (EnsureResolved);
// a call re-entering the shim on the same thread while that happens gets
// CUDA_ERROR_NOT_INITIALIZED instead of a deadlock.
// Thread-safety: every member function may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_SHIM_H_
#define MISSILE_LIBINTERCEPT_SHIM_H_

#include <cuda.h>

#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>
#include <string_view>

#include "absl/container/flat_hash_map.h"
#include "config.h"
#include "driver_api.h"
#include "hooks.h"
#include "spdlog/logger.h"

namespace missile::shim {

class Shim {
 public:
  static Shim& Get() {
    static Shim* const instance = new Shim();
    return *instance;
  }

  // CUDA_SUCCESS once the real driver is loaded; otherwise the error every call returns.
  CUresult EnsureResolved() {
    if (state_.load(std::memory_order_acquire) == kResolved) [[likely]] {
      return CUDA_SUCCESS;
    }
    return ResolveSlow();
  }

  bool disabled() const { return config_.disabled; }
  bool tracing() const { return tracing_; }

  // The real driver's function for a hook (null if the driver lacks it). After EnsureResolved.
  void* real(HookId id) const { return real_[Index(id)]; }
  // The wrapper the shim hands out for a hook.
  void* hook_function(HookId id) const { return hook_fn_[Index(id)]; }

  void Count(HookId id) { counts_[Index(id)].fetch_add(1, std::memory_order_relaxed); }
  uint64_t count(HookId id) const { return counts_[Index(id)].load(std::memory_order_relaxed); }

  // Error for a hook whose real function the driver does not export (logged once per hook).
  CUresult MissingSymbol(HookId id);

  // The function to run for exported entry point `index` that the shim does not hook: the real
  // one, or a stub returning an error. Stores the answer in the entry table when final.
  void* ResolveForward(uint32_t index);

  // For cuGetProcAddress*: what to hand the caller instead of `real_fn` (the driver's answer
  // for `symbol`): the shim's hook when `real_fn` is one of the hooked functions, else real_fn.
  void* SwapProcAddress(const char* symbol, void* real_fn, int version, uint64_t flags);

  // Writes one traced call at debug level: "cuMemAlloc_v2(0x7f.., 4096) = 0".
  void Trace(HookId id, CUresult result, const std::string& args);

  spdlog::logger& log() { return *log_; }

  // The GPU memory served by missiled; null when disabled or before the driver is resolved.
  class MemoryManager* memory() const { return memory_.get(); }
  // Host-device copies through missiled's PCIe scheduler; null when disabled or unresolved.
  class CopyManager* copies() const { return copies_.get(); }
  // The daemon sessions and, per session and GPU, the copy gate and pacer (session_gpu.h);
  // null when disabled or unresolved.
  class SessionManager* sessions() const { return sessions_.get(); }
  // The real driver's functions the shim's own logic calls. After EnsureResolved.
  const DriverApi& api() const { return api_; }
  // A BE tenant's graphs, split into pieces; null when disabled or unresolved.
  class GraphSplitter* graphs() const { return graphs_.get(); }

  // Writes the per-hook counters to MISSILE_REPORT's destination (called at exit).
  void WriteReport();

 private:
  enum State : int { kUnresolved, kResolved, kFailed };

  Shim();
  CUresult ResolveSlow();
  void ResolveOnce();

  Config config_;
  bool tracing_ = false;
  std::shared_ptr<spdlog::logger> log_;

  std::once_flag once_;
  std::atomic<int> state_{kUnresolved};
  CUresult failure_ = CUDA_ERROR_NO_DEVICE;
  void* driver_ = nullptr;
  std::string driver_path_;

  DriverApi api_;
  // Created once, in this order, by ResolveOnce; the later ones hold pointers to the earlier.
  std::unique_ptr<class SessionConnector> connector_;
  std::unique_ptr<class TpcMasker> masker_;  // never destroyed (the driver calls into it)
  std::unique_ptr<class SessionManager> sessions_;
  std::unique_ptr<class MemoryManager> memory_;
  std::unique_ptr<class CopyManager> copies_;
  std::unique_ptr<class GraphSplitter> graphs_;
  void* real_[kHookCount] = {};
  void* hook_fn_[kHookCount] = {};
  std::atomic<uint64_t> counts_[kHookCount] = {};
  std::atomic<bool> handed_out_[kHookCount] = {};  // given out through cuGetProcAddress*
  std::atomic<bool> missing_logged_[kHookCount] = {};
  absl::flat_hash_map<void*, HookId> hook_by_real_;  // written once in ResolveOnce

  std::mutex unmatched_mu_;
  absl::flat_hash_map<std::string, uint64_t> unmatched_;  // hooked names the shim could not swap
  std::atomic<uint64_t> proc_lookups_{0};
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_SHIM_H_
