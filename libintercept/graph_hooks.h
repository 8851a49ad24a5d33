// The graph family's step (hook_list.inc, family "graph"): instantiation, upload, destruction
// and every call that changes an executable graph tell the GraphSplitter (graph_split.h), after
// (or, for destruction, before) the real call. Launches go through RunPaced (pacing_hooks.h).
// Thread-safety: RunGraphHook may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_GRAPH_HOOKS_H_
#define MISSILE_LIBINTERCEPT_GRAPH_HOOKS_H_

#include <cuda.h>

#include <optional>
#include <string_view>
#include <tuple>
#include <utility>

#include "graph_split.h"
#include "hooks.h"
#include "pacing_hooks.h"
#include "policy.h"
#include "shim.h"
#include "tpc_mask.h"

namespace missile::shim {

constexpr bool IsGraphHook(HookId id) {
  const size_t i = Index(id);
  return i < Index(HookId::kGetProcAddress) && kHookInfo[i].family == "graph";
}

static_assert(IsGraphHook(HookId::k_cuGraphInstantiateWithFlags) &&
              IsGraphHook(HookId::k_cuGraphExecUpdate_v2) &&
              !IsGraphHook(HookId::k_cuGraphLaunch));

template <HookId id, typename Fn, typename... Args>
CUresult RunGraphHook(Fn real, Args... args) {
  constexpr std::string_view sym = kHookInfo[Index(id)].symbol;
  GraphSplitter* splitter = Shim::Get().graphs();
  if (splitter == nullptr) return Policy<id>::Run(real, args...);
  auto t = std::make_tuple(args...);
  // A graph's kernels take their TPC mask when it is uploaded (at instantiation with the
  // upload flag, or by cuGraphUpload): a BE's leave the LS reserve free, like its launches.
  Pacer* pacer = nullptr;
  std::optional<pacing::TpcMask> mask;
  if constexpr (sym.starts_with("cuGraphInstantiate") || sym.starts_with("cuGraphUpload")) {
    SessionGpu* gpu = CurrentGpu();
    pacer = gpu != nullptr ? gpu->pacer() : nullptr;
    if (pacer != nullptr) mask = pacer->BeMask();
  }
  const TpcMasker::Scope masked(mask.has_value() ? &*mask : nullptr);
  if constexpr (sym == "cuGraphExecDestroy") {
    splitter->Destroyed(std::get<0>(t));
    return Policy<id>::Run(real, args...);
  } else {
    const CUresult result = Policy<id>::Run(real, args...);
    if (result != CUDA_SUCCESS) return result;
    if constexpr (sym.starts_with("cuGraphInstantiate")) {
      CUgraphExec* exec = std::get<0>(t);
      const CUgraph graph = std::get<1>(t);
      uint64_t flags = 0;
      std::optional<std::pair<CUstream, bool>> upload;
      if constexpr (sym.starts_with("cuGraphInstantiateWithFlags")) {
        flags = std::get<2>(t);
      } else if constexpr (sym.starts_with("cuGraphInstantiateWithParams")) {
        const CUDA_GRAPH_INSTANTIATE_PARAMS* p = std::get<2>(t);
        flags = p->flags;
        if ((flags & CUDA_GRAPH_INSTANTIATE_FLAG_UPLOAD) != 0) {
          upload.emplace(p->hUploadStream, sym.ends_with("_ptsz"));
        }
      }
      if (pacer != nullptr && pacer->enabled() && pacer->best_effort()) {
        splitter->Instantiated(*exec, graph, flags, PacerAdmitter(pacer), upload);
      }
    } else if constexpr (sym.starts_with("cuGraphUpload")) {
      splitter->Uploaded(std::get<0>(t), std::get<1>(t), sym.ends_with("_ptsz"));
    } else {
      // Updates, the cuGraphExec*SetParams family, cuGraphNodeSetEnabled: the first argument is
      // the executable graph changed.
      splitter->Changed(std::get<0>(t));
    }
    return result;
  }
}

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_GRAPH_HOOKS_H_
