// The policy seam: what a hooked call does between the shim's bookkeeping and the real driver.
//
// Policy<id>::Run(real, args...) is called by the hook for entry point `id` with the real
// driver function and the caller's arguments, after counting and tracing. The primary template
// passes the call through unchanged. Later components (the daemon client: VRAM from the daemon,
// copies through the PCIe scheduler) specialise it for the entry points they own, in their own
// files, so each hook stays a thin edge and the logic lives in plain, testable code.
// Thread-safety: called concurrently from any thread of the host program.
#ifndef MISSILE_LIBINTERCEPT_POLICY_H_
#define MISSILE_LIBINTERCEPT_POLICY_H_

#include <cuda.h>

#include "hooks.h"

namespace missile::shim {

template <HookId id>
struct Policy {
  template <typename Fn, typename... Args>
  static CUresult Run(Fn real, Args... args) {
    return real(args...);
  }
};

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_POLICY_H_
