// The shim's state on one GPU in one daemon session: the GPU's memory (gpu_memory.h), its copy
// gate (copy_gate.h) and its pacer (pacer.h), and the per-call context a hook hands down with it.
//
// The SessionManager creates one SessionGpu per (session, CUDA device), at the first call that
// asks for it, and never destroys it: once the session has ended and a new one serves, the old
// object stays valid for threads still inside its gate or pacer and for the allocations its
// memory served, and new calls get the new session's object. The gate and the pacer are opened
// lazily, each once, by the first call that needs it (a copy of a scheduled size, a work item);
// a failure is logged once (unless the session had ended) and kept, so that GPU's copies run
// unscheduled, or its work unpaced, for the rest of the session. The memory is made by the
// first allocation that succeeds in making it (the memory manager's factory); a failure is not
// kept, and the next allocation tries again.
//
// Which GPU a hook resolves: a work item (launch, memset, graph launch, and the pacing step of
// every copy) is the current context's device's; a copy's gate is that of the GPU holding its
// device-side pointer (the PCIe link it crosses), the current context's device when there is
// no such pointer (an array) or the driver does not say. Both are the same object unless a
// thread copies another GPU's memory.
// Thread-safety: every method may be called from any thread; a WorkCall belongs to one call.
#ifndef MISSILE_LIBINTERCEPT_SESSION_GPU_H_
#define MISSILE_LIBINTERCEPT_SESSION_GPU_H_

#include <cuda.h>

#include <atomic>
#include <memory>
#include <optional>

#include "absl/base/thread_annotations.h"
#include "absl/functional/function_ref.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "copy_gate.h"
#include "driver_api.h"
#include "gpu_memory.h"
#include "pacer.h"
#include "session_client.h"
#include "spdlog/logger.h"
#include "tpc_mask.h"

namespace missile::shim {

class SessionManager;

class SessionGpu {
 public:
  // `sessions` (which created it), `session`, `log` and `masker` (null: no LS reserve) must
  // outlive the object.
  SessionGpu(SessionManager* sessions, SessionClient* session, CUdevice device,
             const DriverApi& api, spdlog::logger* log, TpcMasker* masker)
      : sessions_(sessions),
        session_(session),
        device_(device),
        api_(api),
        log_(log),
        masker_(masker) {}
  SessionGpu(const SessionGpu&) = delete;
  SessionGpu& operator=(const SessionGpu&) = delete;

  SessionClient* session() const { return session_; }
  CUdevice device() const { return device_; }

  // The GPU's copy gate, opened at the first call; null when opening failed in this session,
  // or the session has ended (then the session manager is told, as an allocation would, so a
  // program that only copies comes back under the scheduler after a restart).
  CopyGate* Gate() ABSL_LOCKS_EXCLUDED(gate_mu_);
  // The GPU's pacer, opened at the first call; null when opening failed, or the session ended
  // before it was opened.
  Pacer* pacer() ABSL_LOCKS_EXCLUDED(pacer_mu_);
  // The pacer if one was opened, without opening it (the exit report).
  const Pacer* opened_pacer() const { return pacer_ptr_.load(std::memory_order_acquire); }
  // Whether opening the pacer was tried in this session (the exit report's reserve lines).
  bool pacer_tried() const { return pacer_tried_.load(std::memory_order_acquire); }

  // The GPU's memory in this session, made by `make` (given the daemon's GPU) under this
  // object's lock at the first call, when the session is still connected; earlier memory of
  // this device in the same daemon session (the shim registered again into a session the daemon
  // kept through a stall) then returns its blocks through this session. A failure (of `make`,
  // or the daemon does not manage the GPU, or the session ended) is returned, not kept.
  using MemoryFactory =
      absl::FunctionRef<absl::StatusOr<std::unique_ptr<GpuMemory>>(const GpuLink&)>;
  absl::StatusOr<GpuMemory*> Memory(MemoryFactory make) ABSL_LOCKS_EXCLUDED(memory_mu_);
  // The memory if it was made, without making it.
  GpuMemory* memory() const { return memory_ptr_.load(std::memory_order_acquire); }

  // Whether asynchronous copies whose work runs on this GPU go as host-paced pieces
  // (CopyGate::EnqueueAsync): a paced BE tenant on a GPU with an LS tenant.
  bool HostPacedCopies();

 private:
  SessionManager* const sessions_;
  SessionClient* const session_;
  const CUdevice device_;
  const DriverApi& api_;
  spdlog::logger* const log_;
  TpcMasker* const masker_;

  // Each is opened once, under its lock (a lanes page can be mapped writable once only, and the
  // daemon refuses a second copy channel), then read through the atomics without it.
  absl::Mutex gate_mu_;
  std::unique_ptr<CopyGate> gate_ ABSL_GUARDED_BY(gate_mu_);
  std::atomic<bool> gate_tried_{false};
  std::atomic<CopyGate*> gate_ptr_{nullptr};
  absl::Mutex memory_mu_;
  std::unique_ptr<GpuMemory> memory_ ABSL_GUARDED_BY(memory_mu_);
  std::atomic<GpuMemory*> memory_ptr_{nullptr};
  absl::Mutex pacer_mu_;
  std::unique_ptr<Pacer> pacer_ ABSL_GUARDED_BY(pacer_mu_);
  std::atomic<bool> pacer_tried_{false};
  std::atomic<Pacer*> pacer_ptr_{nullptr};
};

// What a GPU-work hook resolves once per call and hands down to its policy (pacing_hooks.h to
// copy_hooks.cc): the SessionGpu of the GPU the work runs on (the current context's device,
// null without a daemon session), and its stream's capture state, asked of the driver at most
// once per call and only when someone needs it.
class WorkCall {
 public:
  WorkCall(const DriverApi& api, SessionGpu* gpu, CUstream stream, bool ptsz)
      : api_(api), gpu_(gpu), stream_(stream), ptsz_(ptsz) {}
  WorkCall(const WorkCall&) = delete;
  WorkCall& operator=(const WorkCall&) = delete;

  SessionGpu* gpu() const { return gpu_; }

  // Whether `stream` (the per-thread flavour: `ptsz`) is being captured into a graph, or the
  // driver cannot say. The call's own stream is asked once; another stream every time.
  bool Capturing(CUstream stream, bool ptsz);
  bool Capturing() { return Capturing(stream_, ptsz_); }

 private:
  const DriverApi& api_;
  SessionGpu* const gpu_;
  const CUstream stream_;
  const bool ptsz_;
  std::optional<bool> capturing_;
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_SESSION_GPU_H_
