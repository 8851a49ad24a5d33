// The copy policies (declared in copy_policy.h): thin edges between the hooks and the copy
// gate. Synchronous entry points run chunk by chunk through the same synchronous entry point;
// asynchronous ones from pinned memory stay asynchronous on the caller's stream; asynchronous
// ones from pageable memory, which the driver already runs synchronously, run like the
// synchronous ones.
#include "copy.h"
#include "copy_policy.h"
#include "shim.h"

namespace missile::shim {
namespace {

using copych::kDeviceToHost;
using copych::kHostToDevice;

CopyManager* Copies() { return Shim::Get().copies(); }

// A synchronous copy is ordered on the legacy default stream, or for the _ptds entry points on
// the per-thread one.
CUstream SyncOrder(bool ptds) { return ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY; }

template <typename Fn>
CUresult SyncHtoD(Fn real, bool ptds, CUdeviceptr dst, const void* src, size_t n) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateFor(n) : nullptr;
  if (gate == nullptr) return real(dst, src, n);
  m->CountScheduled();
  return gate->RunSync(kHostToDevice, n, SyncOrder(ptds), false, [&](uint64_t off, uint64_t len) {
    return real(dst + off, static_cast<const char*>(src) + off, len);
  });
}

template <typename Fn>
CUresult SyncDtoH(Fn real, bool ptds, void* dst, CUdeviceptr src, size_t n) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateFor(n) : nullptr;
  if (gate == nullptr) return real(dst, src, n);
  m->CountScheduled();
  return gate->RunSync(kDeviceToHost, n, SyncOrder(ptds), false, [&](uint64_t off, uint64_t len) {
    return real(static_cast<char*>(dst) + off, src + off, len);
  });
}

template <typename Fn>
CUresult AsyncHtoD(Fn real, bool ptsz, CUdeviceptr dst, const void* src, size_t n, CUstream s) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateForAsync(n, s, ptsz) : nullptr;
  if (gate == nullptr) return real(dst, src, n, s);
  m->CountScheduled();
  const char* from = static_cast<const char*>(src);
  if (m->Classify(reinterpret_cast<CUdeviceptr>(src)) == MemKind::kPinnedHost) {
    return gate->EnqueueAsync(kHostToDevice, n, s, ptsz, [&](uint64_t off, uint64_t len, CUstream st) {
      return real(dst + off, from + off, len, st);
    });
  }
  return gate->RunSync(kHostToDevice, n, s, ptsz,
                       [&](uint64_t off, uint64_t len) { return real(dst + off, from + off, len, s); });
}

template <typename Fn>
CUresult AsyncDtoH(Fn real, bool ptsz, void* dst, CUdeviceptr src, size_t n, CUstream s) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateForAsync(n, s, ptsz) : nullptr;
  if (gate == nullptr) return real(dst, src, n, s);
  m->CountScheduled();
  char* to = static_cast<char*>(dst);
  if (m->Classify(reinterpret_cast<CUdeviceptr>(dst)) == MemKind::kPinnedHost) {
    return gate->EnqueueAsync(kDeviceToHost, n, s, ptsz, [&](uint64_t off, uint64_t len, CUstream st) {
      return real(to + off, src + off, len, st);
    });
  }
  return gate->RunSync(kDeviceToHost, n, s, ptsz,
                       [&](uint64_t off, uint64_t len) { return real(to + off, src + off, len, s); });
}

// The direction of a unified-address copy, if it crosses PCIe.
std::optional<copych::Direction> DirectionOf(CopyManager* m, CUdeviceptr dst, CUdeviceptr src) {
  MemKind d = m->Classify(dst), s = m->Classify(src);
  bool d_host = d == MemKind::kPinnedHost || d == MemKind::kPageableHost;
  bool s_host = s == MemKind::kPinnedHost || s == MemKind::kPageableHost;
  if (s_host && d == MemKind::kDevice) return kHostToDevice;
  if (d_host && s == MemKind::kDevice) return kDeviceToHost;
  return std::nullopt;  // device-device, host-host, managed: not the PCIe queue's business
}

template <typename Fn>
CUresult SyncUnified(Fn real, bool ptds, CUdeviceptr dst, CUdeviceptr src, size_t n) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateFor(n) : nullptr;
  if (gate == nullptr) return real(dst, src, n);
  std::optional<copych::Direction> dir = DirectionOf(m, dst, src);
  if (!dir) return real(dst, src, n);
  m->CountScheduled();
  return gate->RunSync(*dir, n, SyncOrder(ptds), false,
                       [&](uint64_t off, uint64_t len) { return real(dst + off, src + off, len); });
}

template <typename Fn>
CUresult AsyncUnified(Fn real, bool ptsz, CUdeviceptr dst, CUdeviceptr src, size_t n, CUstream s) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateForAsync(n, s, ptsz) : nullptr;
  if (gate == nullptr) return real(dst, src, n, s);
  std::optional<copych::Direction> dir = DirectionOf(m, dst, src);
  if (!dir) return real(dst, src, n, s);
  m->CountScheduled();
  CUdeviceptr host = *dir == kHostToDevice ? src : dst;
  if (m->Classify(host) == MemKind::kPinnedHost) {
    return gate->EnqueueAsync(*dir, n, s, ptsz, [&](uint64_t off, uint64_t len, CUstream st) {
      return real(dst + off, src + off, len, st);
    });
  }
  return gate->RunSync(*dir, n, s, ptsz,
                       [&](uint64_t off, uint64_t len) { return real(dst + off, src + off, len, s); });
}

}  // namespace

CUresult Policy<HookId::k_cuMemcpyHtoD_v2>::Run(PFN_cuMemcpyHtoD_v3020 real, CUdeviceptr dst,
                                                const void* src, size_t n) {
  return SyncHtoD(real, false, dst, src, n);
}
CUresult Policy<HookId::k_cuMemcpyHtoD_v2_ptds>::Run(PFN_cuMemcpyHtoD_v7000_ptds real,
                                                     CUdeviceptr dst, const void* src, size_t n) {
  return SyncHtoD(real, true, dst, src, n);
}
CUresult Policy<HookId::k_cuMemcpyDtoH_v2>::Run(PFN_cuMemcpyDtoH_v3020 real, void* dst,
                                                CUdeviceptr src, size_t n) {
  return SyncDtoH(real, false, dst, src, n);
}
CUresult Policy<HookId::k_cuMemcpyDtoH_v2_ptds>::Run(PFN_cuMemcpyDtoH_v7000_ptds real, void* dst,
                                                     CUdeviceptr src, size_t n) {
  return SyncDtoH(real, true, dst, src, n);
}
CUresult Policy<HookId::k_cuMemcpyHtoDAsync_v2>::Run(PFN_cuMemcpyHtoDAsync_v3020 real,
                                                     CUdeviceptr dst, const void* src, size_t n,
                                                     CUstream s) {
  return AsyncHtoD(real, false, dst, src, n, s);
}
CUresult Policy<HookId::k_cuMemcpyHtoDAsync_v2_ptsz>::Run(PFN_cuMemcpyHtoDAsync_v7000_ptsz real,
                                                          CUdeviceptr dst, const void* src,
                                                          size_t n, CUstream s) {
  return AsyncHtoD(real, true, dst, src, n, s);
}
CUresult Policy<HookId::k_cuMemcpyDtoHAsync_v2>::Run(PFN_cuMemcpyDtoHAsync_v3020 real, void* dst,
                                                     CUdeviceptr src, size_t n, CUstream s) {
  return AsyncDtoH(real, false, dst, src, n, s);
}
CUresult Policy<HookId::k_cuMemcpyDtoHAsync_v2_ptsz>::Run(PFN_cuMemcpyDtoHAsync_v7000_ptsz real,
                                                          void* dst, CUdeviceptr src, size_t n,
                                                          CUstream s) {
  return AsyncDtoH(real, true, dst, src, n, s);
}
CUresult Policy<HookId::k_cuMemcpy>::Run(PFN_cuMemcpy_v4000 real, CUdeviceptr dst, CUdeviceptr src,
                                         size_t n) {
  return SyncUnified(real, false, dst, src, n);
}
CUresult Policy<HookId::k_cuMemcpy_ptds>::Run(PFN_cuMemcpy_v7000_ptds real, CUdeviceptr dst,
                                              CUdeviceptr src, size_t n) {
  return SyncUnified(real, true, dst, src, n);
}
CUresult Policy<HookId::k_cuMemcpyAsync>::Run(PFN_cuMemcpyAsync_v4000 real, CUdeviceptr dst,
                                              CUdeviceptr src, size_t n, CUstream s) {
  return AsyncUnified(real, false, dst, src, n, s);
}
CUresult Policy<HookId::k_cuMemcpyAsync_ptsz>::Run(PFN_cuMemcpyAsync_v7000_ptsz real,
                                                   CUdeviceptr dst, CUdeviceptr src, size_t n,
                                                   CUstream s) {
  return AsyncUnified(real, true, dst, src, n, s);
}

}  // namespace missile::shim
