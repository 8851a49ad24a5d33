// FakeState: the one owner of the fake driver's process-wide state.
//
// Created on first use (any entry point or control function), thread-safely, and never destroyed:
// stream worker threads may still run while the process exits, so nothing they touch is torn
// down by static destructors. In a child created by fork() the state starts afresh (the parent's
// worker threads do not exist there and its locks may be held): the child must call cuInit again,
// and knows nothing of the parent's contexts, streams and allocations. (The real driver does not
// support CUDA in a forked child at all; starting afresh lets tests fork helpers freely.)
//
// The components are built at construction; the ones that need the shared-memory state (physical
// frames, PCIe link, compute engines) exist from the first successful cuInit on, and every entry
// point that uses them runs only after that (FAKECUDA_ENTER). All accessors are thread-safe.

#ifndef MISSILE_TESTS_FAKECUDA_FAKE_STATE_H_
#define MISSILE_TESTS_FAKECUDA_FAKE_STATE_H_

#include <cuda.h>

#include <atomic>
#include <memory>
#include <mutex>

#include "address_space.h"
#include "call_stats.h"
#include "config.h"
#include "context.h"
#include "copy_engine.h"
#include "engine.h"
#include "graphs.h"
#include "kernels.h"
#include "launch_callback.h"
#include "memory.h"
#include "pcie_link.h"
#include "phys_allocator.h"
#include "pools.h"
#include "shared_state.h"
#include "streams.h"
#include "thread_annotations.h"
#include "tpcs.h"
#include "vmm.h"

namespace fakecuda {

class FakeState {
 public:
  // The process's state, created on first use.
  static FakeState& Get();

  FakeState(const FakeState&) = delete;
  FakeState& operator=(const FakeState&) = delete;

  // cuInit: checks the environment and opens the shared state. Idempotent once it succeeded.
  CUresult Init(unsigned flags);
  bool initialized() const { return initialized_.load(std::memory_order_acquire); }

  const Config& config() const { return config_; }
  const TpcLayout& tpcs() const { return tpcs_; }
  LaunchCallbacks& launch_callbacks() { return launch_callbacks_; }
  CallStats& stats() { return stats_; }
  ContextManager& contexts() { return contexts_; }
  AddressSpace& address_space() { return address_space_; }
  MemoryManager& memory() { return memory_; }
  VmmManager& vmm() { return vmm_; }
  StreamManager& streams() { return streams_; }
  PoolManager& pools() { return pools_; }
  CopyEngine& copies() { return copies_; }
  ModuleManager& modules() { return modules_; }
  GraphManager& graphs() { return graphs_; }
  // Valid after a successful Init.
  PhysAllocator& phys() { return *phys_; }
  const PcieLink& link() const { return *link_; }
  ComputeEngine& engine() { return *engine_; }

 private:
  FakeState();

  const Config config_;
  const TpcLayout tpcs_;
  LaunchCallbacks launch_callbacks_;
  CallStats stats_;
  ContextManager contexts_;
  AddressSpace address_space_;
  MemoryManager memory_;
  VmmManager vmm_;
  StreamManager streams_;
  PoolManager pools_;
  CopyEngine copies_;
  ModuleManager modules_;
  GraphManager graphs_;

  std::mutex init_mu_;
  std::atomic<bool> initialized_{false};
  std::unique_ptr<SharedState> shared_;  // set once under init_mu_, then read-only
  std::unique_ptr<PhysAllocator> phys_;
  std::unique_ptr<PcieLink> link_;
  std::unique_ptr<ComputeEngine> engine_;
};

// Shorthand used by the entry points.
inline FakeState& State() { return FakeState::Get(); }

}  // namespace fakecuda

#endif  // MISSILE_TESTS_FAKECUDA_FAKE_STATE_H_
