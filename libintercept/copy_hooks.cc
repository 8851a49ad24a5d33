// The copy policies (declared in copy_policy.h): thin edges between the hooks and the copy
// gate. Synchronous entry points run chunk by chunk through the same synchronous entry point;
// asynchronous ones from pinned memory stay asynchronous on the caller's stream; asynchronous
// ones from pageable memory, which the driver already runs synchronously, run like the
// synchronous ones. A 2D or 3D copy is cut at byte offsets of its payload like any other, and
// each chunk moves as the few rectangular copies that SplitBox (copy_box.h) makes of it.
#include <string_view>

#include "copy.h"
#include "copy_box.h"
#include "copy_policy.h"
#include "session_gpu.h"
#include "shim.h"

namespace missile::shim {
namespace {

using copych::kDeviceToHost;
using copych::kHostToDevice;

CopyManager* Copies() { return Shim::Get().copies(); }

// A synchronous copy is ordered on the legacy default stream, or for the _ptds entry points on
// the per-thread one.
CUstream SyncOrder(bool ptds) { return ptds ? CU_STREAM_PER_THREAD : CU_STREAM_LEGACY; }

// Runs an asynchronous copy through `gate`. From pinned memory it stays asynchronous on `s`;
// from pageable memory, which the driver copies synchronously anyway, it runs chunk by chunk in
// this thread, each chunk on `s`. `chunk(off, len, stream)` copies payload [off, off + len).
// A paced BE tenant sends its asynchronous copies as host-paced chunks (copy_gate.h).
// The decision is the SessionGpu's where the work runs (the one the hook resolved), whose pacer
// holds the state it needs.
bool HostPaced(const WorkCall& call) {
  return call.gpu() != nullptr && call.gpu()->HostPacedCopies();
}

template <typename Chunk>
CUresult RunAsync(const WorkCall& call, CopyGate* gate, copych::Direction dir, bool pinned,
                  uint64_t n, CUstream s, bool ptsz, const Chunk& chunk) {
  if (pinned) return gate->EnqueueAsync(dir, n, s, ptsz, chunk, HostPaced(call));
  return gate->RunSync(dir, n, s, ptsz,
                       [&](uint64_t off, uint64_t len) { return chunk(off, len, s); });
}

// A synchronous copy whose entry point names its direction: through the gate of the GPU of
// its device side `device` (0 for an array: the calling thread's GPU), chunk by chunk
// (`chunk(off, len)`), or `whole()` when it is not scheduled.
template <typename Whole, typename Chunk>
CUresult NamedSync(WorkCall& call, copych::Direction dir, uint64_t n, CUdeviceptr device, bool ptds,
                   const Whole& whole, const Chunk& chunk) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateFor(call, n, device) : nullptr;
  if (gate == nullptr) return whole();
  m->CountScheduled();
  return gate->RunSync(dir, n, SyncOrder(ptds), false, chunk);
}

// The same for an asynchronous one; `host` is its host side.
template <typename Whole, typename Chunk>
CUresult NamedAsync(WorkCall& call, copych::Direction dir, uint64_t n, CUdeviceptr device,
                    CUstream s, bool ptsz, const void* host, const Whole& whole,
                    const Chunk& chunk) {
  CopyManager* m = Copies();
  CopyGate* gate = m ? m->GateForAsync(call, n, device, s, ptsz) : nullptr;
  if (gate == nullptr) return whole();
  m->CountScheduled();
  const bool pinned = m->Classify(reinterpret_cast<CUdeviceptr>(host)) == MemKind::kPinnedHost;
  return RunAsync(call, gate, dir, pinned, n, s, ptsz, chunk);
}

template <typename Fn>
CUresult SyncHtoD(WorkCall& call, Fn real, bool ptds, CUdeviceptr dst, const void* src, size_t n) {
  const char* from = static_cast<const char*>(src);
  return NamedSync(
      call, kHostToDevice, n, dst, ptds, [&] { return real(dst, src, n); },
      [&](uint64_t off, uint64_t len) { return real(dst + off, from + off, len); });
}

template <typename Fn>
CUresult SyncDtoH(WorkCall& call, Fn real, bool ptds, void* dst, CUdeviceptr src, size_t n) {
  char* to = static_cast<char*>(dst);
  return NamedSync(
      call, kDeviceToHost, n, src, ptds, [&] { return real(dst, src, n); },
      [&](uint64_t off, uint64_t len) { return real(to + off, src + off, len); });
}

template <typename Fn>
CUresult AsyncHtoD(WorkCall& call, Fn real, bool ptsz, CUdeviceptr dst, const void* src, size_t n,
                   CUstream s) {
  const char* from = static_cast<const char*>(src);
  return NamedAsync(
      call, kHostToDevice, n, dst, s, ptsz, src, [&] { return real(dst, src, n, s); },
      [&](uint64_t off, uint64_t len, CUstream st) {
        return real(dst + off, from + off, len, st);
      });
}

template <typename Fn>
CUresult AsyncDtoH(WorkCall& call, Fn real, bool ptsz, void* dst, CUdeviceptr src, size_t n,
                   CUstream s) {
  char* to = static_cast<char*>(dst);
  return NamedAsync(
      call, kDeviceToHost, n, src, s, ptsz, dst, [&] { return real(dst, src, n, s); },
      [&](uint64_t off, uint64_t len, CUstream st) { return real(to + off, src + off, len, st); });
}

bool IsHost(MemKind k) { return k == MemKind::kPinnedHost || k == MemKind::kPageableHost; }

// The direction of a copy between two sides of these kinds, and whether its host side is
// pinned, if it crosses PCIe.
struct Crossing {
  copych::Direction dir;
  bool pinned;
  // The device side's pointer: its GPU's link is the one crossed (0: an array, unknown).
  CUdeviceptr device = 0;
};
std::optional<Crossing> CrossingOf(MemKind src, MemKind dst, CUdeviceptr src_device = 0,
                                   CUdeviceptr dst_device = 0) {
  if (IsHost(src) && dst == MemKind::kDevice) {
    return Crossing{kHostToDevice, src == MemKind::kPinnedHost, dst_device};
  }
  if (IsHost(dst) && src == MemKind::kDevice) {
    return Crossing{kDeviceToHost, dst == MemKind::kPinnedHost, src_device};
  }
  return std::nullopt;  // device-device, host-host, managed: not the PCIe queue's business
}

template <typename Fn>
CUresult SyncUnified(WorkCall& call, Fn real, bool ptds, CUdeviceptr dst, CUdeviceptr src,
                     size_t n) {
  CopyManager* m = Copies();
  if (m == nullptr || m->Bypassed(n)) return real(dst, src, n);
  std::optional<Crossing> crossing = CrossingOf(m->Classify(src), m->Classify(dst), src, dst);
  CopyGate* gate = crossing ? m->GateFor(call, n, crossing->device) : nullptr;
  if (gate == nullptr) return real(dst, src, n);
  m->CountScheduled();
  return gate->RunSync(crossing->dir, n, SyncOrder(ptds), false,
                       [&](uint64_t off, uint64_t len) { return real(dst + off, src + off, len); });
}

template <typename Fn>
CUresult AsyncUnified(WorkCall& call, Fn real, bool ptsz, CUdeviceptr dst, CUdeviceptr src,
                      size_t n, CUstream s) {
  CopyManager* m = Copies();
  if (m == nullptr || m->Bypassed(n)) return real(dst, src, n, s);
  std::optional<Crossing> crossing = CrossingOf(m->Classify(src), m->Classify(dst), src, dst);
  CopyGate* gate = crossing ? m->GateForAsync(call, n, crossing->device, s, ptsz) : nullptr;
  if (gate == nullptr) return real(dst, src, n, s);
  m->CountScheduled();
  return RunAsync(
      call, gate, crossing->dir, crossing->pinned, n, s, ptsz,
      [&](uint64_t off, uint64_t len, CUstream st) { return real(dst + off, src + off, len, st); });
}

// --- 2D and 3D copies --------------------------------------------------------------------

// What one side of a 2D or 3D copy is. Arrays are left alone (kOther): how the driver lays out
// block-compressed and multi-planar formats in rows is not documented, so their copies are not
// cut. Managed memory is left alone as for 1D copies.
MemKind EndpointKind(CopyManager* m, CUmemorytype type, const void* host, CUdeviceptr device) {
  switch (type) {
    case CU_MEMORYTYPE_HOST: {
      const MemKind k = m->Classify(reinterpret_cast<CUdeviceptr>(host));
      return k == MemKind::kDevice ? MemKind::kOther : k;  // not host memory after all: leave it
    }
    case CU_MEMORYTYPE_DEVICE:
      return m->Classify(device) == MemKind::kOther ? MemKind::kOther : MemKind::kDevice;
    case CU_MEMORYTYPE_UNIFIED:
      return m->Classify(device);
    default:
      return MemKind::kOther;  // an array, or a type the driver rejects
  }
}

// limit >= offset + length, without overflow.
bool Fits(size_t limit, size_t offset, size_t length) {
  return offset <= limit && length <= limit - offset;
}

// Whether the description keeps the driver's rules for linear memory: "srcPitch must be greater
// than or equal to WidthInBytes + srcXInBytes" (dst likewise) and, for a 3D copy of several
// planes, "srcHeight must be greater than or equal to Height + srcY". A part of one row or one
// plane would not break them where the whole copy does, so a description that breaks them is
// passed to the driver whole, for its own error.
bool KeepsLayoutRules(const CUDA_MEMCPY2D& c) {
  return Fits(c.srcPitch, c.srcXInBytes, c.WidthInBytes) &&
         Fits(c.dstPitch, c.dstXInBytes, c.WidthInBytes);
}
bool KeepsLayoutRules(const CUDA_MEMCPY3D& c) {
  return Fits(c.srcPitch, c.srcXInBytes, c.WidthInBytes) &&
         Fits(c.dstPitch, c.dstXInBytes, c.WidthInBytes) &&
         (c.Depth <= 1 ||
          (Fits(c.srcHeight, c.srcY, c.Height) && Fits(c.dstHeight, c.dstY, c.Height)));
}

// The direction of a 2D or 3D copy and whether its host side is pinned, if it crosses PCIe.
template <typename Desc>
std::optional<Crossing> CrossingOf(CopyManager* m, const Desc& c) {
  return CrossingOf(EndpointKind(m, c.srcMemoryType, c.srcHost, c.srcDevice),
                    EndpointKind(m, c.dstMemoryType, c.dstHost, c.dstDevice), c.srcDevice,
                    c.dstDevice);
}

uint64_t DepthOf(const CUDA_MEMCPY2D&) { return 1; }
uint64_t DepthOf(const CUDA_MEMCPY3D& c) { return c.Depth; }

// The copy of one part of `c`: the same description, moved to the part's origin and cut to
// its size. Pitches (and a 3D copy's plane heights) stay, so the part lands where it would
// have in the whole copy.
CUDA_MEMCPY2D PartOf(const CUDA_MEMCPY2D& c, const BoxPart& p) {
  CUDA_MEMCPY2D d = c;
  d.srcXInBytes += p.x;
  d.srcY += p.y;
  d.dstXInBytes += p.x;
  d.dstY += p.y;
  d.WidthInBytes = p.width;
  d.Height = p.height;
  return d;
}
CUDA_MEMCPY3D PartOf(const CUDA_MEMCPY3D& c, const BoxPart& p) {
  CUDA_MEMCPY3D d = c;
  d.srcXInBytes += p.x;
  d.srcY += p.y;
  d.srcZ += p.z;
  d.dstXInBytes += p.x;
  d.dstY += p.y;
  d.dstZ += p.z;
  d.WidthInBytes = p.width;
  d.Height = p.height;
  d.Depth = p.depth;
  return d;
}

// Moves payload bytes [off, off + len) of `c` with `one` (a copy of one description).
template <typename Desc, typename One>
CUresult CopyRange(const Desc& c, uint64_t off, uint64_t len, const One& one) {
  const BoxParts parts = SplitBox(c.WidthInBytes, c.Height, DepthOf(c), off, off + len);
  for (int i = 0; i < parts.count; ++i) {
    const Desc part = PartOf(c, parts.part[i]);
    if (CUresult r = one(&part); r != CUDA_SUCCESS) return r;
  }
  return CUDA_SUCCESS;
}

// The payload of a 2D or 3D copy worth scheduling, or nullopt: none, too large to count, or a
// description the driver will reject (it says what is wrong with it).
template <typename Desc>
std::optional<uint64_t> PayloadOf(const Desc* c) {
  if (c == nullptr || !KeepsLayoutRules(*c)) return std::nullopt;
  std::optional<uint64_t> bytes = BoxBytes(c->WidthInBytes, c->Height, DepthOf(*c));
  if (!bytes.has_value() || *bytes == 0) return std::nullopt;
  return bytes;
}

template <typename Desc, typename Fn>
CUresult SyncShaped(WorkCall& call, Fn real, bool ptds, const Desc* c) {
  CopyManager* m = Copies();
  std::optional<uint64_t> bytes = m ? PayloadOf(c) : std::nullopt;
  if (!bytes || m->Bypassed(*bytes)) return real(c);
  std::optional<Crossing> crossing = CrossingOf(m, *c);
  CopyGate* gate = crossing ? m->GateFor(call, *bytes, crossing->device) : nullptr;
  if (gate == nullptr) return real(c);
  m->CountScheduled();
  const Desc copy = *c;
  return gate->RunSync(
      crossing->dir, *bytes, SyncOrder(ptds), false, [&](uint64_t off, uint64_t len) {
        return CopyRange(copy, off, len, [&](const Desc* part) { return real(part); });
      });
}

template <typename Desc, typename Fn>
CUresult AsyncShaped(WorkCall& call, Fn real, bool ptsz, const Desc* c, CUstream s) {
  CopyManager* m = Copies();
  std::optional<uint64_t> bytes = m ? PayloadOf(c) : std::nullopt;
  if (!bytes || m->Bypassed(*bytes)) return real(c, s);
  std::optional<Crossing> crossing = CrossingOf(m, *c);
  CopyGate* gate = crossing ? m->GateForAsync(call, *bytes, crossing->device, s, ptsz) : nullptr;
  if (gate == nullptr) return real(c, s);
  m->CountScheduled();
  const Desc copy = *c;
  return RunAsync(call, gate, crossing->dir, crossing->pinned, *bytes, s, ptsz,
                  [&](uint64_t off, uint64_t len, CUstream st) {
                    return CopyRange(copy, off, len,
                                     [&](const Desc* part) { return real(part, st); });
                  });
}

// --- Copies between host memory and an array ---------------------------------------------
// The cuts are multiples of 4 KiB (every chunk size is), so from an offset on an element
// boundary each chunk starts on one too (elements are 1 to 16 bytes).

template <typename Fn>
CUresult SyncHtoA(WorkCall& call, Fn real, bool ptds, CUarray dst, size_t at, const void* src,
                  size_t n) {
  const char* from = static_cast<const char*>(src);
  return NamedSync(
      call, kHostToDevice, n, 0, ptds, [&] { return real(dst, at, src, n); },
      [&](uint64_t off, uint64_t len) { return real(dst, at + off, from + off, len); });
}

template <typename Fn>
CUresult SyncAtoH(WorkCall& call, Fn real, bool ptds, void* dst, CUarray src, size_t at, size_t n) {
  char* to = static_cast<char*>(dst);
  return NamedSync(
      call, kDeviceToHost, n, 0, ptds, [&] { return real(dst, src, at, n); },
      [&](uint64_t off, uint64_t len) { return real(to + off, src, at + off, len); });
}

template <typename Fn>
CUresult AsyncHtoA(WorkCall& call, Fn real, bool ptsz, CUarray dst, size_t at, const void* src,
                   size_t n, CUstream s) {
  const char* from = static_cast<const char*>(src);
  return NamedAsync(
      call, kHostToDevice, n, 0, s, ptsz, src, [&] { return real(dst, at, src, n, s); },
      [&](uint64_t off, uint64_t len, CUstream st) {
        return real(dst, at + off, from + off, len, st);
      });
}

template <typename Fn>
CUresult AsyncAtoH(WorkCall& call, Fn real, bool ptsz, void* dst, CUarray src, size_t at, size_t n,
                   CUstream s) {
  char* to = static_cast<char*>(dst);
  return NamedAsync(
      call, kDeviceToHost, n, 0, s, ptsz, dst, [&] { return real(dst, src, at, n, s); },
      [&](uint64_t off, uint64_t len, CUstream st) {
        return real(to + off, src, at + off, len, st);
      });
}

}  // namespace

namespace {

// Every entry point of copy_policy_list.inc runs its helper with its stream flavour, which
// its name says (checked at compile time, so the table cannot disagree with the symbol).
constexpr bool PerThreadName(std::string_view symbol) {
  return symbol.ends_with("_ptds") || symbol.ends_with("_ptsz");
}
template <HookId id>
struct CopyEntry;
#define MISSILE_COPY_POLICY(sym, pfn, helper, per_thread)         \
  static_assert(PerThreadName(#sym) == (per_thread), #sym);       \
  template <>                                                     \
  struct CopyEntry<HookId::k_##sym> {                             \
    template <typename... Args>                                   \
    static CUresult Run(WorkCall& call, pfn real, Args... args) { \
      return helper(call, real, per_thread, args...);             \
    }                                                             \
  };
#include "copy_policy_list.inc"
#undef MISSILE_COPY_POLICY

}  // namespace

template <HookId id, typename... Args>
CUresult CopyPolicy<id, CUresult(CUDAAPI*)(Args...)>::Run(WorkCall& call,
                                                          CUresult(CUDAAPI* real)(Args...),
                                                          Args... args) {
  return CopyEntry<id>::Run(call, real, args...);
}

#define MISSILE_COPY_POLICY(sym, pfn, helper, per_thread) \
  template struct CopyPolicy<HookId::k_##sym, pfn>;
#include "copy_policy_list.inc"
#undef MISSILE_COPY_POLICY

}  // namespace missile::shim
