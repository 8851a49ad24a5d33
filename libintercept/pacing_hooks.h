// Which hooked entry points are GPU work, and the step every one of them takes through the
// pacer (pacer.h) around its policy. Hooks of the launch, memset and copy families are work,
// except cuMemAdvise (no work on a stream). For each, the stream is its CUstream argument
// (cuLaunchKernelEx: the launch configuration's), or, for a synchronous entry point, the stream
// it is ordered on (the legacy default stream; the per-thread one for _ptds). A stream being
// captured into a graph is left alone: nothing runs then, and nothing may be added to the graph.
// Each call resolves its GPU's SessionGpu (session_gpu.h: the current context's device) and its
// stream's capture state once, and hands both to its policy in a WorkCall.
// Thread-safety: RunPaced may be called from any thread.
#ifndef MISSILE_LIBINTERCEPT_PACING_HOOKS_H_
#define MISSILE_LIBINTERCEPT_PACING_HOOKS_H_

#include <cuda.h>

#include <bit>
#include <cstdint>
#include <string_view>
#include <type_traits>

#include "graph_split.h"
#include "hooks.h"
#include "pacer.h"
#include "policy.h"
#include "session_gpu.h"
#include "session_manager.h"
#include "shim.h"
#include "tpc_mask.h"

namespace missile::shim {

constexpr bool IsPacedWork(HookId id) {
  const size_t i = Index(id);
  if (i >= Index(HookId::kGetProcAddress)) return false;
  const std::string_view family = kHookInfo[i].family;
  const std::string_view symbol = kHookInfo[i].symbol;
  if (symbol.starts_with("cuMemAdvise")) return false;
  return family == "launch" || family == "memset" || family == "copy";
}

// Synchronising calls: never held, but a BE's pacer has the GPU report its items first and
// retires them when the call returns, which is when they finished (learning their durations).
constexpr bool IsSync(HookId id) {
  const size_t i = Index(id);
  return i < Index(HookId::kGetProcAddress) && kHookInfo[i].family == "sync";
}

// Queries (cuStreamQuery, cuEventQuery): never held; an LS that polls for its work has its
// last items written at its first poll after them (Pacer::BeforeQuery).
constexpr bool IsQuery(HookId id) {
  const size_t i = Index(id);
  return i < Index(HookId::kGetProcAddress) && kHookInfo[i].family == "query";
}

constexpr bool PerThreadFlavour(HookId id) {
  const std::string_view symbol = kHookInfo[Index(id)].symbol;
  return symbol.ends_with("_ptsz") || symbol.ends_with("_ptds");
}

// The classification, checked where the table is compiled.
static_assert(IsPacedWork(HookId::k_cuLaunchKernel) && IsPacedWork(HookId::k_cuLaunchKernelEx_ptsz));
static_assert(IsPacedWork(HookId::k_cuGraphLaunch) && IsPacedWork(HookId::k_cuMemsetD8Async));
static_assert(IsPacedWork(HookId::k_cuMemcpyHtoDAsync_v2) && IsPacedWork(HookId::k_cuMemcpyDtoD_v2));
static_assert(!IsPacedWork(HookId::k_cuMemAdvise) && !IsPacedWork(HookId::k_cuMemAlloc_v2));
static_assert(!IsPacedWork(HookId::k_cuStreamSynchronize) && IsSync(HookId::k_cuStreamSynchronize));
static_assert(IsSync(HookId::k_cuCtxSynchronize_v2) && !IsSync(HookId::k_cuLaunchKernel));
static_assert(IsQuery(HookId::k_cuEventQuery) && IsQuery(HookId::k_cuStreamQuery_ptsz) &&
              !IsQuery(HookId::k_cuStreamSynchronize) && !IsSync(HookId::k_cuStreamQuery));
static_assert(PerThreadFlavour(HookId::k_cuLaunchKernel_ptsz) &&
              PerThreadFlavour(HookId::k_cuMemcpyHtoD_v2_ptds) &&
              !PerThreadFlavour(HookId::k_cuLaunchKernel));

namespace pacing_detail {

template <typename T>
constexpr bool kIsStream = std::is_same_v<std::remove_cv_t<T>, CUstream>;

// The first CUstream argument, or the synchronous order stream.
template <typename... Args>
CUstream StreamArg(bool ptds, Args... args) {
  CUstream found = nullptr;
  bool have = false;
  auto take = [&](auto a) {
    if constexpr (kIsStream<decltype(a)>) {
      if (!have) {
        found = a;
        have = true;
      }
    }
  };
  (take(args), ...);
  if (have) return found;
  return ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY;
}

template <typename... Args>
constexpr bool HasStreamArg() {
  return (kIsStream<Args> || ...);
}

inline uint64_t Mix(uint64_t h, uint64_t v) {
  h ^= v + 0x9e3779b97f4a7c15ull + (h << 6) + (h >> 2);
  return h;
}

// The largest size_t argument (a copy's or memset's size), for the predictor's key.
template <typename... Args>
uint64_t LargestSize(Args... args) {
  uint64_t best = 0;
  auto take = [&](auto a) {
    if constexpr (std::is_same_v<decltype(a), size_t>) best = a > best ? a : best;
  };
  (take(args), ...);
  return best;
}

}  // namespace pacing_detail

// What the item is, for the duration predictor: the kernel and its launch shape, the graph,
// or the entry point and the size class of a copy or memset.
template <HookId id, typename... Args>
uint64_t WorkKey(Args... args) {
  using namespace pacing_detail;
  uint64_t h = Mix(0, static_cast<uint64_t>(id));
  constexpr std::string_view sym = kHookInfo[Index(id)].symbol;
  if constexpr (sym.starts_with("cuLaunchKernelEx")) {
    auto t = std::make_tuple(args...);
    const CUlaunchConfig* c = std::get<0>(t);
    h = Mix(h, reinterpret_cast<uintptr_t>(std::get<1>(t)));
    if (c != nullptr) {
      for (uint64_t v : {uint64_t{c->gridDimX}, uint64_t{c->gridDimY}, uint64_t{c->gridDimZ},
                         uint64_t{c->blockDimX}, uint64_t{c->blockDimY}, uint64_t{c->blockDimZ},
                         uint64_t{c->sharedMemBytes}}) {
        h = Mix(h, v);
      }
    }
  } else if constexpr (sym.starts_with("cuLaunchKernel") ||
                       sym.starts_with("cuLaunchCooperativeKernel")) {
    auto t = std::make_tuple(args...);
    h = Mix(h, reinterpret_cast<uintptr_t>(std::get<0>(t)));
    for (uint64_t v : {uint64_t{std::get<1>(t)}, uint64_t{std::get<2>(t)}, uint64_t{std::get<3>(t)},
                       uint64_t{std::get<4>(t)}, uint64_t{std::get<5>(t)}, uint64_t{std::get<6>(t)},
                       uint64_t{std::get<7>(t)}}) {
      h = Mix(h, v);
    }
  } else if constexpr (sym.starts_with("cuGraphLaunch")) {
    h = Mix(h, reinterpret_cast<uintptr_t>(std::get<0>(std::make_tuple(args...))));
  } else {
    h = Mix(h, static_cast<uint64_t>(std::bit_width(LargestSize(args...))));
  }
  return h;
}

template <HookId id, typename... Args>
CUstream WorkStream(Args... args) {
  constexpr std::string_view sym = kHookInfo[Index(id)].symbol;
  if constexpr (sym.starts_with("cuLaunchKernelEx")) {
    const CUlaunchConfig* c = std::get<0>(std::make_tuple(args...));
    return c == nullptr ? nullptr : c->hStream;
  } else {
    return pacing_detail::StreamArg(PerThreadFlavour(id), args...);
  }
}

// The pieces of a split graph go to the GPU through the pacer, each one work item.
class PacerAdmitter final : public PieceAdmitter {
 public:
  explicit PacerAdmitter(Pacer* pacer) : pacer_(pacer) {}
  CUresult Admit(CUstream stream, bool ptsz, uint64_t key,
                 absl::FunctionRef<CUresult()> launch) override {
    Pacer::Ticket ticket = pacer_->Begin(stream, ptsz, key);
    const CUresult result = launch();
    pacer_->End(ticket, result);
    return result;
  }
  std::optional<uint64_t> Learned(uint64_t key) override { return pacer_->Learned(key); }
  // Released by every LS tenant's budget, the BE has no window and no LS hold for the pieces to
  // pass through one by one: each piece would cost it a launch and a completion write for
  // nothing. The whole graph still goes through Begin and End (a quiet time holds it, missiled
  // sees it in flight).
  bool splits() const override { return !pacer_->ReleasedByLs(); }
  // A piece is bounded like the BE's work in flight (window_us; its default if that is 0).
  uint64_t bound_ns() const override {
    const uint64_t window = pacer_->window_ns();
    return window != 0 ? window : 100'000;
  }
  uint64_t prior_ns() const override { return pacer_->unknown_ns(); }

 private:
  Pacer* pacer_;
};

// The SessionGpu of the calling thread's current context (session_gpu.h), null without a daemon.
inline SessionGpu* CurrentGpu() {
  SessionManager* sessions = Shim::Get().sessions();
  return sessions != nullptr ? sessions->CurrentGpu() : nullptr;
}

// Runs the policy of work entry point `id` with the call's context: a policy that takes one
// (the copies, copy_policy.h) gets it, so it resolves nothing the hook already has.
template <HookId id, typename Fn, typename... Args>
CUresult RunPolicy(WorkCall& call, Fn real, Args... args) {
  if constexpr (requires { Policy<id>::Run(call, real, args...); }) {
    return Policy<id>::Run(call, real, args...);
  } else {
    return Policy<id>::Run(real, args...);
  }
}

// Runs a work entry point's policy between the pacer's Begin and End, under the BE's TPC mask
// where the LS reserve applies (tpc_mask.h). A graph that was split launches piece by piece
// (graph_split.h), whether or not it is paced now. The GPU (the current context's) and the
// stream's capture state are resolved once here and handed down in a WorkCall.
template <HookId id, typename Fn, typename... Args>
CUresult RunPaced(Fn real, Args... args) {
  SessionGpu* gpu = CurrentGpu();
  Pacer* pacer = gpu != nullptr ? gpu->pacer() : nullptr;
  const CUstream stream = WorkStream<id>(args...);
  // Whether the entry point names its stream (cuLaunchKernelEx in its launch config). One that
  // does not is synchronous: the call returns once its item ran, and it is ordered on an
  // explicit default-stream handle, which needs no per-thread flavour.
  constexpr bool kNamesStream = pacing_detail::HasStreamArg<Args...>() ||
                                kHookInfo[Index(id)].symbol.starts_with("cuLaunchKernelEx");
  constexpr bool kPtsz = PerThreadFlavour(id) && kNamesStream;
  WorkCall call(Shim::Get().api(), gpu, stream, kPtsz);
  // A BE's kernels (and a graph's, when it is uploaded) leave the LS reserve of TPCs free.
  const std::optional<pacing::TpcMask> mask = pacer != nullptr ? pacer->BeMask() : std::nullopt;
  const TpcMasker::Scope masked(mask.has_value() ? &*mask : nullptr);
  if constexpr (kHookInfo[Index(id)].symbol.starts_with("cuGraphLaunch")) {
    if (GraphSplitter* splitter = Shim::Get().graphs(); splitter != nullptr) {
      std::optional<PacerAdmitter> admitter;
      if (pacer != nullptr && pacer->Paces()) admitter.emplace(pacer);
      std::optional<CUresult> r =
          splitter->Launch(std::get<0>(std::make_tuple(args...)), stream, PerThreadFlavour(id),
                           admitter.has_value() ? &*admitter : nullptr);
      if (r.has_value()) return *r;
    }
  }
  if (pacer == nullptr || !pacer->Paces()) return RunPolicy<id>(call, real, args...);
  if (call.Capturing()) return RunPolicy<id>(call, real, args...);
  Pacer::Ticket ticket = pacer->Begin(stream, kPtsz, WorkKey<id>(args...),
                                      /*host_waits=*/!kNamesStream);
  CUresult result = RunPolicy<id>(call, real, args...);
  pacer->End(ticket, result);
  return result;
}

template <HookId id, typename Fn, typename... Args>
CUresult RunSynced(Fn real, Args... args) {
  SessionGpu* gpu = CurrentGpu();
  Pacer* pacer = gpu != nullptr ? gpu->pacer() : nullptr;
  if (pacer == nullptr || !pacer->enabled()) return Policy<id>::Run(real, args...);
  if (!pacer->best_effort()) {
    // An LS's last items get their completion write before it waits (Pacer::LsMarkEvery): the
    // BE tenants and missiled see its work end when it does. Also outside pacing (a rest): what
    // it left unwritten then is written here.
    pacer->BeforeSync();
    return Policy<id>::Run(real, args...);
  }
  pacer->BeforeSync();
  CUresult result = Policy<id>::Run(real, args...);
  pacer->AfterSync();
  return result;
}

template <HookId id, typename Fn, typename... Args>
CUresult RunQueried(Fn real, Args... args) {
  // Nothing unwritten in this process (every BE tenant, an LS between its writes): no lookup.
  if (!Pacer::AnyLsUnwritten()) return Policy<id>::Run(real, args...);
  SessionGpu* gpu = CurrentGpu();
  Pacer* pacer = gpu != nullptr ? gpu->pacer() : nullptr;
  // An LS's items left unwritten (Pacer::LsMarkEvery) are written at its first poll after them,
  // as at a wait: a program that polls sees its work end no later than the BE tenants do.
  if (pacer != nullptr && pacer->enabled() && !pacer->best_effort()) pacer->BeforeQuery();
  return Policy<id>::Run(real, args...);
}

}  // namespace missile::shim

#endif  // MISSILE_LIBINTERCEPT_PACING_HOOKS_H_
