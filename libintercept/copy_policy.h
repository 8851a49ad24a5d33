// The policies of the host-device copy entry points: each asks the CopyManager for the gate of
// its GPU's SessionGpu and runs the copy through it (copy_gate.h), or passes it to the driver.
// They run inside the pacing step (pacing_hooks.h, RunPaced), which hands them the call's
// WorkCall: its GPU and its stream's capture state, resolved once. Declared here so hooks.cc
// instantiates these; defined in copy_hooks.cc.
#ifndef MISSILE_LIBINTERCEPT_COPY_POLICY_H_
#define MISSILE_LIBINTERCEPT_COPY_POLICY_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "policy.h"
#include "session_gpu.h"

namespace missile::shim {

// Policy<id>::Run with the entry point's exact ABI, defined and instantiated in copy_hooks.cc.
template <HookId id, typename Fn>
struct CopyPolicy;
template <HookId id, typename... Args>
struct CopyPolicy<id, CUresult(CUDAAPI*)(Args...)> {
  static CUresult Run(WorkCall& call, CUresult(CUDAAPI* real)(Args...), Args... args);
};

#define MISSILE_COPY_POLICY(sym, pfn, helper, per_thread) \
  template <>                                              \
  struct Policy<HookId::k_##sym> : CopyPolicy<HookId::k_##sym, pfn> {};
#include "copy_policy_list.inc"
#undef MISSILE_COPY_POLICY

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_COPY_POLICY_H_
