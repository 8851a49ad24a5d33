// The policies of the host-device copy entry points: each asks the CopyManager for a gate and
// runs the copy through it (copy_gate.h), or passes it to the driver. Declared here so hooks.cc
// instantiates these; defined in copy_hooks.cc.
#ifndef MISSILE_LIBINTERCEPT_COPY_POLICY_H_
#define MISSILE_LIBINTERCEPT_COPY_POLICY_H_

#include <cuda.h>
#include <cudaTypedefs.h>

#include "policy.h"

namespace missile::shim {

// Policy<id>::Run with the entry point's exact ABI, defined and instantiated in copy_hooks.cc.
template <HookId id, typename Fn>
struct CopyPolicy;
template <HookId id, typename... Args>
struct CopyPolicy<id, CUresult(CUDAAPI*)(Args...)> {
  static CUresult Run(CUresult(CUDAAPI* real)(Args...), Args... args);
};

#define MISSILE_COPY_POLICY(sym, pfn, helper, per_thread) \
  template <>                                              \
  struct Policy<HookId::k_##sym> : CopyPolicy<HookId::k_##sym, pfn> {};
#include "copy_policy_list.inc"
#undef MISSILE_COPY_POLICY

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_COPY_POLICY_H_
